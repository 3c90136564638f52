"""The memory floor `tidings bench send` puts beside a worker's peak RSS: a process that loads
the libraries a sending worker loads, connects to the database through SQLAlchemy's async
engine as a worker does, opens an HTTP client, and sends nothing; no tidings module beyond
the `__init__`s of `tidings` and of this package, which import nothing. Prints
`{"peak_rss_mb": …, "libraries": […]}`.

`python -m tidings.bench.bare_process ASYNC_DATABASE_URL` (`storage.database.async_url`'s form)
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path

# The worker's direct dependencies that a send imports (what `sys.modules` of a sending worker
# holds, less what they pull in themselves).
LIBRARIES = (
    "sqlalchemy.ext.asyncio",
    "psycopg",
    "aiosqlite",
    "pydantic_settings",
    "typer",
    "rich",
    "structlog",
    "prometheus_client",
    "httpx",
    "httpcore",
    "aiosmtplib",
    "standardwebhooks",
    "jinja2",
    "markdown_it",
    "nh3",
    "css_inline",
)


async def connect(url: str) -> None:
    """One connection and one statement through SQLAlchemy's async engine, and an HTTP client
    opened and closed: what a worker has done before its first batch."""
    import httpx
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn, httpx.AsyncClient():
            await conn.execute(text("SELECT 1"))
    finally:
        await engine.dispose()


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """A process's peak resident memory in MB (Linux /proc; None elsewhere or once gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def main(url: str) -> None:
    for name in LIBRARIES:
        importlib.import_module(name)
    asyncio.run(connect(url))
    print(json.dumps({"peak_rss_mb": peak_rss_mb(), "libraries": list(LIBRARIES)}))


if __name__ == "__main__":
    main(sys.argv[1])
