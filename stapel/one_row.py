"""One-row selects run straight on a pooled DBAPI connection: the web's status read.

A status read is one SELECT by primary key. Through SQLAlchemy's Connection it paid for
the Connection object, the execution context and the result's metadata, which reads the
cursor's description (psycopg builds a Column object per selected column for it each
time): on PostgreSQL about three times the driver's own work. Here the statement is
compiled once per dialect, run on a connection of the engine's pool, and its row
converted by SQLAlchemy's own result processors, so a value reads as it would through a
Connection. A DBAPI error is not handled here: the connection that raised it is
invalidated and the statement run again through a Connection, whose error handling
(wrapping the driver's error, which the API answers with 503; replacing a broken pool's
connections) stays the one place for that. A connection the pool cannot open is
wrapped as SQLAlchemy wraps it (DBAPIError.instance), not tried a second time.
"""

from __future__ import annotations

import weakref
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

from sqlalchemy import Engine, Float, Select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError


class _Prepared(NamedTuple):
    sql: str
    positions: tuple[str, ...] | None  # parameter names in order, for a positional style
    converted: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column, its processor)


def result_processor(type_: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    """The column type's result processor, without the cursor's type code it may ask for.

    A float column (not decimal) is a float as the driver returns it; psycopg's numeric
    types would need the cursor's type code to choose their processor, and raise without.
    """
    if isinstance(type_, Float) and not type_.asdecimal:
        return None
    return type_.dialect_impl(dialect).result_processor(dialect, None)


class OneRow:
    """A select of at most one row, run on an engine's pool without a Connection.

    Its parameters go to the driver as given (no bind processors run): plain strings and
    numbers, as a lookup by key takes.
    """

    def __init__(self, statement: Select, name: str) -> None:
        self.statement = statement
        names = [str(c.key) for c in statement.selected_columns]
        self.row: Any = namedtuple(name, names)  # type: ignore[misc]  # made at run time
        self._prepared: weakref.WeakKeyDictionary[Dialect, _Prepared] = weakref.WeakKeyDictionary()

    def _prepare(self, dialect: Dialect) -> _Prepared:
        prepared = self._prepared.get(dialect)
        if prepared is None:
            compiled = self.statement.compile(dialect=dialect)
            processors = (
                result_processor(c.type, dialect) for c in self.statement.selected_columns
            )
            converted = tuple((i, p) for i, p in enumerate(processors) if p is not None)
            positions = tuple(compiled.positiontup or ()) if compiled.positional else None
            prepared = self._prepared[dialect] = _Prepared(str(compiled), positions, converted)
        return prepared

    def first(self, engine: Engine, params: dict[str, Any]) -> Any:
        """Return the row (attributes named as the statement's columns), or None."""
        prepared = self._prepare(engine.dialect)
        positions = prepared.positions
        args: Any = params if positions is None else [params[k] for k in positions]
        error = engine.dialect.loaded_dbapi.Error
        try:
            dbapi_conn = engine.raw_connection()
        except error as exc:  # no connection to be had: wrapped as Engine.connect wraps it
            raise DBAPIError.instance(None, None, exc, error, dialect=engine.dialect) from exc
        try:
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute(prepared.sql, args)
                values = cursor.fetchone()
            finally:
                cursor.close()
        except error:
            dbapi_conn.invalidate()
            return self._through_connection(engine, params)
        finally:
            dbapi_conn.close()
        if values is None:
            return None
        values = list(values)
        for i, process in prepared.converted:
            values[i] = process(values[i])
        return self.row._make(values)

    def _through_connection(self, engine: Engine, params: dict[str, Any]) -> Any:
        """Run the statement through a Connection, whose errors are SQLAlchemy's own."""
        with engine.connect() as conn:
            return conn.execute(self.statement, params).first()
