"""Set-based statements whose text stays short whatever the row count (imports, provider
events): the one dialect branch for bulk work.

On PostgreSQL many values travel as one array per column (`= ANY(array)`, `INSERT ... SELECT
FROM unnest(...)`, `UPDATE ... FROM unnest(...)`): the statement is the same text for 3 rows
or 1,000, so it is parsed once and prepared by the server, where a VALUES or IN list of N
parameters is a new statement for every N and costs more to build and parse, on both ends,
than to execute. SQLite's `executemany` and IN lists are native and fast, so it gets those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from sqlalchemy import ARRAY, Column, Result, Table, any_, bindparam, column, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import TableValuedAlias
from sqlalchemy.types import TypeEngine

from tidings.storage.dialect import insert_for, is_postgresql


def among(conn: AsyncConnection, column: Column[Any], values: Collection[Any]) -> Any:
    """`column IN values`, as `= ANY(array)` on PostgreSQL (one parameter, not 1,000)."""
    if is_postgresql(conn):
        return column == any_(bindparam(None, list(values), type_=ARRAY(column.type)))
    return column.in_(list(values))


def unnested(
    types: Mapping[str, TypeEngine[Any]],
    rows: Sequence[Mapping[str, Any]] | None,
    *,
    prefix: str,
    ordinality: str | None = None,
) -> TableValuedAlias:
    """PostgreSQL only: `rows` as a derived table `unnest(array, ...) AS (name, ...)`, one
    array parameter `PREFIX_NAME` per column of `types`. With `rows` None the arrays are left
    to bind at execution (a statement built once); `ordinality` names a column numbering the
    rows from 1 (WITH ORDINALITY)."""
    arrays = [
        bindparam(f"{prefix}_{name}", type_=ARRAY(kind))
        if rows is None
        else bindparam(f"{prefix}_{name}", [row[name] for row in rows], type_=ARRAY(kind))
        for name, kind in types.items()
    ]
    columns = [column(name, kind) for name, kind in types.items()]
    return func.unnest(*arrays).table_valued(*columns, with_ordinality=ordinality).render_derived()


def pairs_among(
    conn: AsyncConnection,
    first: Column[Any],
    second: Column[Any],
    pairs: Collection[tuple[Any, Any]],
) -> ColumnElement[bool]:
    """`(first, second) IN pairs`; on PostgreSQL against two arrays zipped by `unnest`."""
    if not is_postgresql(conn):
        return tuple_(first, second).in_(list(pairs))
    rows = [{"a": a, "b": b} for a, b in pairs]
    zipped = unnested({"a": first.type, "b": second.type}, rows, prefix=f"pairs_{first.name}")
    return tuple_(first, second).in_(select(zipped.c.a, zipped.c.b))


_Rows = Sequence[dict[str, Any]]
_Values = dict[str, Any]
_Finish = Callable[[Any], Any]


async def insert_rows(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    constants: dict[str, Any] | None = None,
    finish: Callable[[Any], Any] = lambda statement: statement,
) -> Result[Any]:
    """INSERT `rows` (dicts with the same keys), each with `constants` added. `finish` takes
    the dialect's insert construct and adds ON CONFLICT / RETURNING."""
    constants = constants or {}
    if is_postgresql(conn):
        return await _insert_rows_postgresql(conn, table, rows, constants, finish)
    return await _insert_rows_sqlite(conn, table, rows, constants, finish)


async def _insert_rows_sqlite(
    conn: AsyncConnection, table: Table, rows: _Rows, constants: _Values, finish: _Finish
) -> Result[Any]:
    """SQLite: one `executemany` of the rows."""
    statement = finish(insert_for(conn, table))
    result: Result[Any] = await conn.execute(statement, [{**row, **constants} for row in rows])
    return result


async def _insert_rows_postgresql(
    conn: AsyncConnection, table: Table, rows: _Rows, constants: _Values, finish: _Finish
) -> Result[Any]:
    """PostgreSQL: one INSERT ... SELECT FROM unnest(one array per column)."""
    names = list(rows[0])
    source_rows = unnested({name: table.c[name].type for name in names}, rows, prefix="rows")
    fixed = [
        bindparam(f"fixed_{name}", value, type_=table.c[name].type)
        for name, value in constants.items()
    ]
    source = select(*(source_rows.c[name] for name in names), *fixed)
    statement = insert_for(conn, table).from_select([*names, *constants], source)
    result: Result[Any] = await conn.execute(finish(statement))
    return result
