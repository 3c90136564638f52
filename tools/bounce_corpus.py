"""Measure how tidings classifies real bounces (issue 35, PRV-6): every message of the bounce
corpus that ships with flufl.bounce's source distribution (GNU Mailman's detectors), read as if
it had come to a VERP address (the recipient known, only "is it permanent?" asked).

    .venv/bin/python tools/bounce_corpus.py            # downloads flufl.bounce's sdist with pip
    .venv/bin/python tools/bounce_corpus.py DIR        # an unpacked flufl.bounce sdist

Each message's label comes from the corpus's own test table (`DETECTORS` in
tests/test_detectors.py: file, expected addresses, temporary or not), read as data with
`ast.literal_eval`, never run. Prints JSON: permanent failures recognised as hard bounces,
temporary-only warnings taken as hard (must be 0), and the files behind each miss.
"""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
import tarfile
import tempfile

from tidings.delivery.inbound_mail import read_report

VERSION = "6.0.0"


def _unpacked(into: pathlib.Path) -> pathlib.Path:
    subprocess.run(  # noqa: S603 (our own interpreter, fixed arguments)
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         "--dest", str(into), f"flufl.bounce=={VERSION}"],
        check=True,
    )  # fmt: skip
    [archive] = into.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return next(path for path in into.glob("flufl_bounce-*") if path.is_dir())


def _labels(root: pathlib.Path) -> dict[str, str]:
    """file -> "permanent" (some detector expects a permanent failure) or "temporary"."""
    tree = ast.parse((root / "tests" / "test_detectors.py").read_text())
    table = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "DETECTORS"
    )
    labels: dict[str, str] = {}
    for _detector, filename, expected, temporary in ast.literal_eval(table):
        if expected and not temporary:
            labels[filename] = "permanent"
        elif expected:
            labels.setdefault(filename, "temporary")
    return labels


def _decision(data: bytes) -> str:
    report = read_report(data, report_id="corpus", to_unsubscribe=False)
    if report.kind != "bounce":
        return report.kind
    return "hard" if any(failure.permanent for failure in report.failures) else "soft"


def measure(root: pathlib.Path) -> dict[str, object]:
    labels = _labels(root)
    decided = {name: _decision((root / "tests" / "data" / name).read_bytes()) for name in labels}
    permanent = [name for name, label in labels.items() if label == "permanent"]
    temporary = [name for name, label in labels.items() if label == "temporary"]
    missed = sorted(name for name in permanent if decided[name] != "hard")
    wrongly_hard = sorted(name for name in temporary if decided[name] == "hard")
    return {
        "corpus": f"flufl.bounce {VERSION} tests/data",
        "messages": len(list((root / "tests" / "data").glob("*.txt"))),
        "permanent": len(permanent),
        "permanent_recognised": len(permanent) - len(missed),
        "temporary_only": len(temporary),
        "temporary_taken_as_hard": len(wrongly_hard),
        "missed": {name: decided[name] for name in missed},
        "wrongly_hard": wrongly_hard,
    }


def main() -> None:
    if len(sys.argv) > 1:
        print(json.dumps(measure(pathlib.Path(sys.argv[1])), indent=2))
        return
    with tempfile.TemporaryDirectory() as scratch:
        print(json.dumps(measure(_unpacked(pathlib.Path(scratch))), indent=2))


if __name__ == "__main__":
    main()
