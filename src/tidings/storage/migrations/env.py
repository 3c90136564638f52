"""Alembic environment: always given a live connection by tidings.storage.migrate."""

from alembic import context

from tidings.storage.dialect import is_sqlite
from tidings.storage.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `tidings migrate`, not the alembic command")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=is_sqlite(connection),
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
