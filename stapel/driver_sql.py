"""Statements compiled once per dialect and run on the DBAPI cursor of a Connection, in
its transaction: the web's submission.

Through a Connection each statement pays for an execution context, its parameters'
processing and a result object; a one-segment submission's five statements spent a
third of the POST's CPU there, more than the driver's own work. Here a statement is
compiled once per dialect (and per set of parameter names), its parameters converted
by SQLAlchemy's own bind processors, so a value is stored as through a Connection, and
a returned value read by the column type's result processor.

The cursor is the Connection's, so the statements share its transaction and its
commit; `stapel.db.hold_write_turn` takes SQLite's write turn first, as a write through
the Connection would. A DBAPI error is wrapped as SQLAlchemy wraps it
(DBAPIError.instance: an IntegrityError stays one) and the connection is invalidated if
the dialect says it was lost, as a Connection does; the caller rolls back.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import ClauseElement

from stapel.db import hold_write_turn
from stapel.one_row import result_processor


class _Compiled(NamedTuple):
    sql: str
    names: tuple[str, ...]  # a positional style's parameters, in the driver's order
    positional: bool
    defaults: dict[str, Any]  # the columns not given: their scalar defaults; fixed values
    processors: tuple[tuple[str, Callable[[Any], Any]], ...]  # (parameter, bind processor)
    returned: Callable[[Any], Any] | None  # the first column's result processor, if any


class DriverStatement:
    """A Core statement run on a Connection's DBAPI cursor; see the module's docstring.

    A write (`write=True`) takes SQLite's write turn first; a read (a count) does not.
    A column not given takes its scalar default (`default=0`), as through a Connection;
    preparing a statement that would need a column's function default raises.
    """

    def __init__(self, statement: ClauseElement, *, write: bool = True) -> None:
        self.statement, self.write = statement, write
        self._compiled: weakref.WeakKeyDictionary[Dialect, dict[tuple[str, ...], _Compiled]] = (
            weakref.WeakKeyDictionary()
        )

    def _compile(self, dialect: Dialect, keys: tuple[str, ...]) -> _Compiled:
        by_keys = self._compiled.setdefault(dialect, {})
        found = by_keys.get(keys)
        if found is not None:
            return found
        compiled: Any = self.statement.compile(dialect=dialect, column_keys=list(keys))
        defaults = {}
        prefetch = [(c, c.default) for c in compiled.insert_prefetch]
        prefetch += [(c, c.onupdate) for c in compiled.update_prefetch]
        for column, default in prefetch:
            if default is None or not default.is_scalar:
                raise ValueError(f"give {column}: its default is not a constant")
            defaults[column.key] = default.arg
        processors = []
        for name, bind in compiled.binds.items():
            if name not in keys and name not in defaults and not bind.required:
                defaults[name] = bind.effective_value  # a value the statement itself holds
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors.append((name, process))
        columns = list(getattr(self.statement, "exported_columns", ()))
        returned = result_processor(columns[0].type, dialect) if columns else None
        found = by_keys[keys] = _Compiled(
            str(compiled),
            tuple(compiled.positiontup or ()),
            compiled.positional,
            defaults,
            tuple(processors),
            returned,
        )
        return found

    def _args(self, compiled: _Compiled, params: dict[str, Any]) -> Any:
        if compiled.defaults or compiled.processors:
            params = compiled.defaults | params
            for name, process in compiled.processors:
                if name in params:
                    params[name] = process(params[name])
        if compiled.positional:
            return [params[name] for name in compiled.names]
        return params

    def execute(self, conn: Connection, params: dict[str, Any]) -> Any:
        """Run the statement with one set of parameters; return the first column of its
        first row (None for a statement that returns none)."""
        compiled = self._compile(conn.dialect, tuple(params))
        args = self._args(compiled, params)
        with _cursor(conn, compiled.sql, args, self.write) as cursor:
            cursor.execute(compiled.sql, args)
            row = cursor.fetchone() if cursor.description else None
        if row is None:
            return None
        return compiled.returned(row[0]) if compiled.returned else row[0]

    def executemany(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
        """Run the statement once per row (every row with the same parameter names)."""
        if not rows:
            return
        compiled = self._compile(conn.dialect, tuple(rows[0]))
        many = [self._args(compiled, row) for row in rows]
        with _cursor(conn, compiled.sql, many, self.write) as cursor:
            cursor.executemany(compiled.sql, many)


class _cursor:
    """A cursor of the Connection's DBAPI connection, in the write turn; a DBAPI error
    leaves it wrapped as SQLAlchemy's, the connection invalidated if it was lost."""

    def __init__(self, conn: Connection, sql: str, args: Iterable | dict, write: bool) -> None:
        self.conn, self.sql, self.args = conn, sql, args
        if write:
            hold_write_turn(conn)
        self.cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]

    def __enter__(self) -> Any:
        return self.cursor

    def __exit__(self, _type, exc, _tb) -> None:
        dialect = self.conn.dialect
        try:
            self.cursor.close()
        except dialect.loaded_dbapi.Error:
            pass
        if not isinstance(exc, dialect.loaded_dbapi.Error):
            return
        lost = dialect.is_disconnect(exc, self.conn.connection.dbapi_connection, self.cursor)
        if lost:
            self.conn.invalidate(exc)
        raise DBAPIError.instance(
            self.sql,
            self.args,  # type: ignore[arg-type]
            exc,
            dialect.loaded_dbapi.Error,
            dialect=dialect,
            connection_invalidated=lost,
        ) from exc
