"""structlog set-up, done once by the entrypoint (SPEC OBS-1).

JSON lines when the output is not a terminal (or when asked), readable console output
otherwise. Context (request_id, job_id, campaign_id ...) is bound with contextvars and merged
into every record. Standard-library loggers (uvicorn, alembic) go through the same renderer.
Nothing here may log personal data: callers pass ids, never addresses, names or tokens.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Literal, TextIO

import structlog

from tidings.observability.sentry import report_errors

LogFormat = Literal["auto", "json", "console"]
_PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[a-z]")


def configure_logging(
    level: str = "info", log_format: LogFormat = "auto", stream: TextIO | None = None
) -> None:
    stream = stream or sys.stderr
    use_json = log_format == "json" or (log_format == "auto" and not stream.isatty())
    numeric_level = logging.getLevelNamesMapping()[level.upper()]
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    structlog.configure(
        processors=[
            *shared,
            report_errors,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.UnicodeDecoder(),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(numeric_level)
    # uvicorn's access log prints raw paths, which carry confirmation and unsubscribe tokens;
    # tidings logs each request itself with the route template instead.
    logging.getLogger("uvicorn.access").disabled = True
    for name in ("uvicorn", "uvicorn.error", "alembic"):
        logging.getLogger(name).handlers = []
        logging.getLogger(name).propagate = True
    logging.getLogger("alembic").setLevel(max(numeric_level, logging.WARNING))
    # At debug, SQLAlchemy would print result rows and aiosqlite each call's arguments, both
    # holding personal data; at info SQLAlchemy echoes every statement. Their warnings are
    # enough (SQLAlchemy's own default level).
    for name in ("sqlalchemy", "aiosqlite", "psycopg"):
        logging.getLogger(name).setLevel(max(numeric_level, logging.WARNING))
    # aiosmtpd (`tidings inbound`) writes envelope addresses at info and every line of the
    # message at debug: only its warnings pass, and without their arguments (the client's
    # address, a command it sent).
    smtp_server = logging.getLogger("mail.log")
    smtp_server.setLevel(max(numeric_level, logging.WARNING))
    smtp_server.addFilter(_without_arguments)


def _without_arguments(record: logging.LogRecord) -> bool:
    if record.args:
        record.msg = _PLACEHOLDER.sub("-", str(record.msg))
        record.args = None
    return True


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.get_logger(name)
    return logger
