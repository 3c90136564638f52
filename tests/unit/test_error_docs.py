"""Every error code the API can return is a row of docs/api.md's error table, with the status
the API answers it with (HOUSE rule 18)."""

from tests.support.markdown import table
from tidings.api.errors import CODE_BY_STATUS
from tidings.error_status import STATUS_BY_ERROR


def test_every_error_code_is_documented() -> None:
    """API clients branch on error codes; each must be a row of docs/api.md's table with its
    status."""
    documented = {row["code"]: int(row["status"]) for row in table("api.md", "Errors")}
    answered = {cls.code: status for cls, status in STATUS_BY_ERROR.items() if cls.code != "error"}
    answered |= {code: status for status, code in CODE_BY_STATUS.items()}
    assert documented == answered
