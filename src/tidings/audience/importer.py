"""CSV import and export of the audience (AUD-9).

Import is an idempotent upsert, one write transaction per chunk of rows; importing the same
file twice changes nothing the second time. The rules, safest reading first:

- **Blanks never clear.** A blank name or tier keeps what is stored; labels are only ever
  added (removing a label is an explicit admin edit). A new subscriber without a tier is
  `free`.
- **Status `pending`** (the default) creates a subscription that waits for consent. An import
  never sends confirmation emails: mailing thousands of people at once is a separate,
  explicit action.
- **Status `confirmed`** is the admin asserting consent (AUD-9): the subscription records
  `source=import` (when the import creates it) and `consent_evidence=import:<actor>`. It
  confirms a new or pending subscription; a confirmed one stays as it is.
- **Status `unsubscribed`** records the subscription as unsubscribed with its history
  (count 1, last time = the import), or unsubscribes a pending or confirmed one; honouring
  an unsubscribe is always safe.
- **An import never overrides a person's own unsubscribe**: a subscription that is
  unsubscribed stays so whatever the file says (counted in `kept_unsubscribed`).
- **Suppressed addresses** (AUD-8) are stored as subscriber data but never confirmed; their
  rows are counted as `suppressed` only.
- `created_at` sets a new subscription's creation date; an existing one keeps its own.
- **Repeats:** an address may appear once per newsletter; a second row for the same address
  and newsletter is an error, and rows for the same address in other newsletters must not
  contradict each other's name or tier.
- Webhook events go out in each chunk's transaction, one per change, in a few set-based
  statements: `subscriber.created` for new subscribers (carrying the state of the
  subscription their row created), `subscriber.confirmed` and `subscriber.unsubscribed` for
  consent the import changed on others. Endpoints may opt out of import events.

Every row lands in exactly one of created, updated, unchanged, suppressed or failed. Export
writes one row per subscription of the filtered audience (so a file exported from one site
imports into another with the same meaning); subscribers with no subscription are in no
audience and are not exported (the privacy export, AUD-10, covers them).
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import structlog

from tidings.audience.context import AudienceContext
from tidings.audience.import_chunks import ChunkWriter, ImportReport
from tidings.audience.import_header import (
    RowError,
    csv_records,
    detect_delimiter,
    neutralise_formula,
    read_header,
)
from tidings.audience.import_rows import ImportRow, RowReader
from tidings.audience.import_vocabulary import COLUMNS, JSON_ATTRIBUTE_COLUMNS
from tidings.audience.subscribers import validate_tier
from tidings.domain.consent import SubscriptionState, subscription_state
from tidings.domain.errors import InvalidInput, NotFound
from tidings.storage import importing as queries
from tidings.storage import newsletters as newsletter_queries
from tidings.storage import subscribers as subscriber_queries
from tidings.storage.importing import ExportFilter

__all__ = ["ImportReport", "Importer", "RowError", "TextSink"]
log = structlog.get_logger("tidings.audience")
EXPORT_PAGE_SIZE = 1000


class TextSink(Protocol):
    def write(self, text: str, /) -> object: ...


class Importer:
    def __init__(self, context: AudienceContext) -> None:
        self._ctx = context

    # -- import -----------------------------------------------------------------------

    async def import_csv(
        self,
        lines: Iterable[str],
        *,
        newsletter_slug: str,
        actor: str,
        on_progress: Callable[[int], None] | None = None,
        chunk_size: int = 1000,
        column_map: Mapping[str, str] | None = None,
        assert_consent: bool = False,
    ) -> ImportReport:
        """Import CSV text (a file opened with `newline=""`, or any iterable of lines), its
        delimiter detected. `column_map` ({normalised column: field}, from
        `import_header.parse_column_map`) overrides the header's reading. `on_progress` gets
        the number of rows read so far after each chunk. `assert_consent` is the admin
        saying they hold everyone's consent: rows that would wait import confirmed."""
        async with self._ctx.db.read() as conn:
            newsletters = {row.id: row for row in await newsletter_queries.list_newsletters(conn)}
        by_slug = {newsletter.slug: newsletter.id for newsletter in newsletters.values()}
        if newsletter_slug not in by_slug:
            raise NotFound(f"no newsletter called {newsletter_slug!r}", field="newsletter")
        remaining = iter(lines)
        first_line = next(remaining, "")
        records = csv_records(
            itertools.chain([first_line], remaining), delimiter=detect_delimiter(first_line)
        )
        first = next(records, None)
        if first is None:
            raise InvalidInput("the file is empty: a header row is required", field="header")
        if isinstance(first, RowError):
            raise InvalidInput(f"the header row is not valid CSV: {first.message}", field="header")
        header = read_header(first[1], column_map)
        if not header.has_header_row:  # a file of bare addresses: its first line is one
            records = itertools.chain([first], records)
        reader = RowReader(
            header,
            newsletter_ids=by_slug,
            default_newsletter=newsletter_slug,
            now=self._ctx.now(),
            assert_consent=assert_consent,
        )
        writer = ChunkWriter(self._ctx, newsletters, evidence=f"import:{actor}"[:200])
        report = ImportReport(
            ignored_columns=list(header.ignored),
            attribute_columns=list(header.attribute_columns),
        )
        chunk: list[ImportRow] = []
        for record in records:
            report.total_rows += 1
            if isinstance(record, RowError):
                report.add_errors([record])
                continue
            result = reader.read(*record)
            report.add(result)
            if result.row is not None:
                chunk.append(result.row)
            if len(chunk) >= chunk_size:
                await writer.write(chunk, report)
                chunk = []
                if on_progress is not None:
                    on_progress(report.total_rows)
        if chunk:
            await writer.write(chunk, report)
        if on_progress is not None:
            on_progress(report.total_rows)
        report.finish()
        log.info(
            "subscribers.imported",
            total_rows=report.total_rows,
            created=report.created,
            updated=report.updated,
            unchanged=report.unchanged,
            suppressed=report.suppressed,
            skipped=report.skipped,
            failed_rows=report.failed_rows,
            warned_rows=report.warned_rows,
            mailable=report.mailable,
            awaiting_confirmation=report.awaiting_confirmation,
        )
        return report

    # -- export -----------------------------------------------------------------------

    async def export_csv(
        self,
        out: TextSink,
        *,
        newsletter: str | None = None,
        state: str | None = None,
        tier: str | None = None,
        label: str | None = None,
    ) -> int:
        """Write the filtered audience as CSV (the import's columns), one row per
        subscription, page by page; returns the number of rows written."""
        if state is not None and state not in set(SubscriptionState):
            raise InvalidInput("state must be pending, confirmed or unsubscribed", field="state")
        audience = ExportFilter(
            state=state,
            tier=validate_tier(tier) if tier is not None else None,
            label=label.strip().lower() if label is not None else None,
        )
        if newsletter is not None:
            async with self._ctx.db.read() as conn:
                found = await newsletter_queries.get_by_slug(conn, newsletter)
            if found is None:
                raise NotFound(f"no newsletter called {newsletter!r}", field="newsletter")
            audience = ExportFilter(found.id, audience.state, audience.tier, audience.label)
        writer = csv.writer(out)
        # Custom fields travel as listmonk's `attributes` JSON column, which import reads.
        writer.writerow([*COLUMNS, JSON_ATTRIBUTE_COLUMNS[0]])
        written, after_id = 0, None
        while True:
            async with self._ctx.db.read() as conn:
                page = await queries.export_page(
                    conn, audience, after_id=after_id, limit=EXPORT_PAGE_SIZE
                )
                labels = await subscriber_queries.labels_of(
                    conn, {row.subscriber_id for row in page}
                )
            for row in page:
                cells = [
                    row.email,
                    row.name or "",
                    row.tier,
                    ";".join(labels[row.subscriber_id]),
                    row.newsletter,
                    subscription_state(row.confirmed_at, row.unsubscribed_at).value,
                    row.created_at.isoformat(),
                    "true" if row.tracking_consent else "false",
                    json.dumps(row.attributes, ensure_ascii=False) if row.attributes else "",
                ]
                writer.writerow([neutralise_formula(cell) for cell in cells])
            written += len(page)
            if len(page) < EXPORT_PAGE_SIZE:
                break
            after_id = page[-1].subscription_id
        log.info("subscribers.exported", rows=written)
        return written
