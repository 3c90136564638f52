"""The stored links tokens name, remembered in-process (ENG-3): a burst of hits on one
campaign's few links costs one query per link, not one per hit."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from tidings.storage.campaign_links import StoredLink, find_link
from tidings.storage.database import Database

LinkKey = tuple[int, str, int]  # campaign, segment, number


class LinkCache:
    """An LRU of `find_link`'s answers. A found link is kept `found_seconds` (a deleted
    campaign's links may redirect that long; the applier drops their hits); a miss is kept
    `missing_seconds`, so a stream of forged-but-signed or stale tokens costs little."""

    def __init__(
        self,
        db: Database,
        *,
        size: int = 10_000,
        found_seconds: float = 60.0,
        missing_seconds: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = db
        self._size = size
        self._found = found_seconds
        self._missing = missing_seconds
        self._monotonic = monotonic
        self._entries: OrderedDict[LinkKey, tuple[StoredLink | None, float]] = OrderedDict()

    async def find(self, campaign_id: int, segment: str, number: int) -> StoredLink | None:
        key = (campaign_id, segment, number)
        now = self._monotonic()
        entry = self._entries.get(key)
        if entry is not None and entry[1] > now:
            self._entries.move_to_end(key)
            return entry[0]
        async with self._db.read() as conn:
            link = await find_link(conn, campaign_id, segment, number)
        expires = now + (self._missing if link is None else self._found)
        self._entries[key] = (link, expires)
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return link
