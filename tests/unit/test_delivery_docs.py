"""docs/delivery.md names every webhook event, job kind and delivery setting (HOUSE rule 18)."""

from pathlib import Path

import pytest

from tests.support.markdown import table
from tidings.bootstrap import build
from tidings.config import iter_keys, load_settings
from tidings.domain.webhook_events import WEBHOOK_EVENT_TYPES

DELIVERY_DOC = Path(__file__).parents[2] / "docs" / "delivery.md"
DELIVERY_SECTIONS = ("queue", "email", "smtp", "mailgun", "webhooks")


def _undocumented(names: list[str]) -> list[str]:
    text = DELIVERY_DOC.read_text()
    return sorted(name for name in names if f"`{name}`" not in text)


def test_every_webhook_event_type_is_documented() -> None:
    """Receivers build on the event names; one missing from the docs is one nobody handles.
    The "Event types" table lists exactly the events tidings publishes, each as described."""
    rows = table("delivery.md", "Event types")
    assert {row["Event"]: row["When"] for row in rows} == WEBHOOK_EVENT_TYPES


async def test_every_registered_job_kind_is_documented(tmp_path: Path) -> None:
    """Operators read job kinds in `tidings jobs list` and the admin API; each must be explained."""
    settings = load_settings(database={"url": f"sqlite:///{tmp_path / 'x.db'}"})
    container = build(settings)  # building does not connect
    try:
        kinds = container.handler_registry().kinds()
    finally:
        await container.close()
    assert kinds, "the registry should hold at least one job kind"
    documented = {row["Job kind"] for row in table("delivery.md", "One durable queue")}
    assert documented == set(kinds)


@pytest.mark.parametrize("section", DELIVERY_SECTIONS)
def test_every_delivery_setting_is_documented(section: str) -> None:
    """A delivery setting missing from the delivery guide is a knob operators cannot find."""
    keys = [key for key, _ in iter_keys() if key.startswith(f"{section}.")]
    assert keys, f"no settings found in section {section!r}"
    assert _undocumented(keys) == []
