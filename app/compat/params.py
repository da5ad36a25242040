"""Request parameters as both dialects' clients send them: JSON, form or query string.

A form body counts on every method: the official DeepL client sends `type=target` as a
form body on a GET, which `request.values` leaves out. A JSON object's values win over
the form's, and the form's over the query string's.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from flask import g, request

from stapel.exceptions import ValidationError


class Params:
    """One request's parameters, looked up by name."""

    def __init__(self) -> None:
        self.json: dict = {}
        if request.is_json:
            try:
                body = request.get_json(silent=True)
            except RecursionError:  # deeply nested brackets: bad input, not a 500
                body = None
            if not isinstance(body, dict):
                raise ValidationError("the body is not a JSON object", code="invalid_json")
            self.json = body

    def value(self, name: str) -> object | None:
        """Return the parameter: a JSON value as sent, else the form's or query's text."""
        if name in self.json:
            return self.json[name]
        if name in request.form:
            return request.form.get(name)
        return request.args.get(name)

    def text(self, name: str) -> str | None:
        """Return the parameter as text (None when absent); a JSON non-string is refused."""
        value = self.value(name)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bool | int | float):
            return str(value).lower() if isinstance(value, bool) else str(value)
        raise ValidationError(f"{name} must be a string", code="invalid_type")

    def values(self, name: str) -> list[object]:
        """Return every value of a parameter that may repeat (a JSON list, repeated fields)."""
        if name in self.json:
            value = self.json[name]
            return list(value) if isinstance(value, list) else [value]
        found = request.form.getlist(name)
        return list(found or request.args.getlist(name))


def all_strings(values: list[Any]) -> TypeGuard[list[str]]:
    """Whether every value is a string (so the list is one of strings)."""
    return all(isinstance(value, str) for value in values)


def params() -> Params:
    """Return this request's parameters, read once."""
    if "compat_params" not in g:
        g.compat_params = Params()
    return g.compat_params
