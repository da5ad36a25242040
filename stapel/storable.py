"""Text the database can store: PostgreSQL's text refuses NUL, and UTF-8 has no lone
surrogates (a decoder such as unicode_escape can make them), so both are refused at
the API with a 400 before they reach an INSERT."""

from __future__ import annotations

import re

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(text: str) -> str | None:
    """Name the first character of text the database cannot store (None: all can be)."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    char = found.group(0)
    what = "a NUL character" if char == "\x00" else f"a lone surrogate U+{ord(char):04X}"
    return f"{what} at offset {found.start()}"
