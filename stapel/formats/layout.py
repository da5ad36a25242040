"""A rebuilt text file keeps the original's bytes around its content: a UTF-8 BOM, the
XML declaration, CRLF line endings, and a final newline or its absence.

The XLIFF and PO writers serialise their trees again (lxml drops a declaration that
follows a BOM, XML parsing turns CRLF into LF, polib writes LF and a final newline);
this puts back what the original had, for every text format, after its merge.
"""

from __future__ import annotations

import re

UTF8_BOM = b"\xef\xbb\xbf"
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
DECLARATION = re.compile(rb"\s*<\?xml[^>]*\?>\s*")


def keep(original: bytes, out: bytes) -> bytes:
    """Return out with original's BOM, XML declaration, line endings and final newline."""
    if out == original or original.startswith(UTF16_BOMS) or out.startswith(UTF16_BOMS):
        return out  # two bytes a character: nothing here is a byte-level rule
    bom = original.startswith(UTF8_BOM)
    source = original[len(UTF8_BOM) :] if bom else original
    body = out[len(UTF8_BOM) :] if out.startswith(UTF8_BOM) else out
    declaration = DECLARATION.match(source)
    if declaration and not DECLARATION.match(body):
        body = declaration.group(0) + body.lstrip()
    if b"\r\n" in source and source.count(b"\n") == source.count(b"\r\n"):
        body = body.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    tail = source[len(source.rstrip(b"\r\n")) :]
    body = body.rstrip(b"\r\n") + tail
    return (UTF8_BOM if bom else b"") + body
