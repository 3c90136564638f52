"""The README's one-screen tour works when pasted into a shell line by line (issue 13, item 10).

The commands are read from README.md itself, so the README and this test cannot drift. They
run in one bash, in a scratch directory holding a link to the project's virtualenv and a copy
of examples/, as a person pasting them would. Two things a person does without thinking are
done for them: waiting for `tidings serve &` to listen before the next line, and not having
a browser open (`BROWSER=true`). The server's port is a free one instead of 8000.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import clean_env
from tidings.cli.context import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[2]
README_PORT = "127.0.0.1:8000"


def tour_commands(readme: str) -> list[str]:
    """The `$ ` lines of the tour's console block, continuation lines joined."""
    section = readme.split("## A one-screen tour", 1)[1]
    block = re.search(r"```console\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the tour has no ```console block"
    commands: list[str] = []
    continuing = False
    for line in block.group(1).splitlines():
        if continuing:
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line.removeprefix("$ "))
        continuing = line.rstrip().endswith("\\")
    return commands


def _script(commands: list[str], port: int) -> str:
    lines = ["set -e", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for command in commands:
        lines.append(command.replace(README_PORT, f"127.0.0.1:{port}"))
        if command.split("#", 1)[0].rstrip().endswith("&"):
            # A person waits for the server's banner before pasting the next line.
            lines.append(
                f"for _ in $(seq 600); do curl -sf http://127.0.0.1:{port}/healthz >/dev/null "
                "&& break; sleep 0.1; done"
            )
    return "\n".join(lines) + "\n"


def test_the_tour_parses_into_the_commands_a_person_pastes() -> None:
    """If the parser lost a line, the tour test below would prove less than it claims."""
    commands = tour_commands((ROOT / "README.md").read_text())
    assert commands[0] == "source .venv/bin/activate"
    assert any(c.startswith("tidings serve &") for c in commands)
    assert any("--sender-address ed@example.org" in c for c in commands)  # a joined line
    assert commands[-1].startswith("kill %1")


def test_readme_tour_runs_line_by_line_in_a_scratch_directory(tmp_path: Path) -> None:
    """The tour is the first thing a new user pastes; every line must work as written, on
    the files it names, from a fresh clone."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():
        pytest.skip(f"the tour needs a virtualenv; tests run from {venv}")
    (tmp_path / ".venv").symlink_to(venv)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    port = free_port()
    script = tmp_path / "tour.sh"
    script.write_text(_script(tour_commands((ROOT / "README.md").read_text()), port))
    env = clean_env(HTTP_PORT=str(port), SITE_PUBLIC_URL=f"http://127.0.0.1:{port}")
    env["BROWSER"] = "true"
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if Path(part) != venv / "bin"
    )
    process = subprocess.Popen(
        ["bash", str(script)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=540)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    assert "email,name,tier,labels,status" in stdout  # cat examples/readers.csv
    assert "campaign 1 submitted: 3 sent, 0 excluded, 0 failed, 0 uncertain" in stdout
    unwrapped = stdout.replace("=\n", "")  # quoted-printable soft line breaks
    assert f"http://127.0.0.1:{port}/confirm/" in unwrapped  # outbox show 1: the confirm link
    assert '"ada@example.org"' in stdout  # the admin API, with the key just created
    assert (tmp_path / "paid.html").read_text().count("For supporters") == 1
