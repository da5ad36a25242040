"""A PO file rewritten by polib given back the original's lines for every entry it kept.

polib writes a whole file in its own form (its line wrapping, its order of comments and
of the header's lines). `restore` cuts the original at its entries (polib records the
line each starts on) and keeps each entry's original lines; in an entry that changed,
only the msgstr lines, the flags line and the translator comments are polib's. The
result is checked to read as the same entries as polib's file; if it did not, polib's
file is returned.
"""

from __future__ import annotations

import polib

from stapel.formats.base import FormatError
from stapel.formats.po import parse_po


def _same(a: polib.POEntry, b: polib.POEntry) -> bool:
    return _content(a) == _content(b)


def _content(e: polib.POEntry) -> tuple:
    return (
        e.msgctxt,
        e.tcomment,
        e.msgid,
        e.msgid_plural,
        e.msgstr,
        sorted(e.msgstr_plural.items()),
        sorted(e.flags),
        e.obsolete,
    )


def _patched(block: list[str], entry: polib.POEntry, wrap: int) -> str:
    """The entry's original lines with its msgstr lines and flags line as polib writes
    them; the whole entry in polib's form where the original's cannot be found."""
    rendered = entry.__unicode__(wrap).split("\n")
    first = next((k for k, line in enumerate(rendered) if line.startswith("msgstr")), None)
    start = next((k for k, line in enumerate(block) if line.startswith("msgstr")), None)
    if first is None or start is None:
        return entry.__unicode__(wrap) + "\n" + "".join(line for line in block if not line.strip())
    end = start
    while end < len(block) and block[end].startswith(("msgstr", '"')):
        end += 1
    newline = "\r\n" if block[start].endswith("\r\n") else "\n"
    written = [line + newline for line in rendered[first:] if line]
    lines = block[:start] + written + block[end:]
    flags = next((line for line in rendered if line.startswith("#,")), None)
    at = next((k for k, line in enumerate(lines) if line.startswith("#,")), None)
    if flags is not None and at is not None:
        lines[at] = flags + newline
    elif flags is not None:
        before = next(
            k for k, line in enumerate(lines) if line.startswith(("#|", "msgctxt", "msgid"))
        )
        lines.insert(before, flags + newline)
    elif at is not None:
        del lines[at]
    return "".join(_translator_comments(lines, rendered, newline))


def _is_translator_comment(line: str) -> bool:
    return line.startswith("#") and not line.startswith(("#.", "#:", "#,", "#|", "#~"))


def _translator_comments(lines: list[str], rendered: list[str], newline: str) -> list[str]:
    """The entry's lines with its translator comments (`# ...`) as polib writes them."""
    written = [line + newline for line in rendered if _is_translator_comment(line)]
    mine = [k for k, line in enumerate(lines) if _is_translator_comment(line)]
    if [lines[k] for k in mine] == written:
        return lines
    at = mine[0] if mine else 0
    kept = [line for k, line in enumerate(lines) if k not in set(mine)]
    return kept[:at] + written + kept[at:]


def restore(original: bytes, rewritten: bytes) -> bytes:
    """Return rewritten with the original's lines for every entry that did not change."""
    try:
        old, charset = parse_po(original)
        new, _ = parse_po(rewritten)
        text = original.decode(charset).lstrip("\ufeff")
    except (FormatError, LookupError, UnicodeError):
        return rewritten
    old_entries, new_entries = list(old), list(new)
    starts = [e.linenum for e in old_entries]
    if (
        len(old_entries) != len(new_entries)
        or any(s is None for s in starts)
        or starts != sorted(starts)
        or any(
            not (a.msgid == b.msgid and a.msgctxt == b.msgctxt)
            for a, b in zip(old_entries, new_entries, strict=True)
        )
    ):
        return rewritten
    lines = text.splitlines(keepends=True)
    cuts = [s - 1 for s in starts] + [len(lines)]
    out = ["".join(lines[: cuts[0]])]
    for k, (a, b) in enumerate(zip(old_entries, new_entries, strict=True)):
        block = lines[cuts[k] : cuts[k + 1]]
        if _same(a, b):
            out.append("".join(block))
            continue
        out.append(_patched(block, b, new.wrapwidth))
    result = "".join(out).encode(charset)
    wanted = [_content(e) for e in new_entries]
    del old, new, old_entries, new_entries, lines, out  # the check's entries held alone
    try:
        check, _ = parse_po(result)
    except FormatError:
        return rewritten
    if [_content(e) for e in check] != wanted:
        return rewritten
    return result
