"""Every error code the API can return is documented in docs/api.md (HOUSE rule 18)."""

from pathlib import Path

from tidings.api.errors import CODE_BY_STATUS, STATUS_BY_ERROR

DOCS = Path(__file__).parents[2] / "docs" / "api.md"


def test_every_error_code_is_documented() -> None:
    text = DOCS.read_text()
    codes = {cls.code for cls in STATUS_BY_ERROR if cls.code != "error"} | set(
        CODE_BY_STATUS.values()
    )
    missing = sorted(code for code in codes if f"`{code}`" not in text)
    assert missing == []
