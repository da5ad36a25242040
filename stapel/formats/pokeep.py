"""A PO file rewritten by polib given back the original's lines for every entry it kept.

polib writes a whole file in its own form (its line wrapping, its order of comments and
of the header's lines). `restore` cuts the original at its entries (polib records the
line each starts on) and keeps each entry's original lines; in an entry that changed,
only the msgstr lines, the flags line and the translator comments are polib's. The
result is checked to read as the same entries as polib's file; if it did not, polib's
file is returned.
"""

from __future__ import annotations

import hashlib

import polib

from stapel.formats.base import FormatError, Limits, Mark, Options
from stapel.formats.po import (
    Filler,
    charset_of,
    merge,
    parse_po,
    plural_forms,
    read_entries,
)

WRAP = polib.POFile().wrapwidth
"""The line width polib writes a changed entry's msgstr at (its POFile's default)."""


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


def rewrite(
    original: bytes,
    targets: list[str | None],
    options: Options,
    langs: tuple[str, str],
    limits: Limits,
    marks: list[Mark] | None = None,
) -> bytes:
    """Return the PO file with its targets filled, every line of the original kept where
    `restore` keeps it, read and written entry by entry.

    Each entry is filled (Filler) and written as soon as the next one starts, from
    the original's lines of its block (`_patched` where it changed), so only one entry
    and its lines are held, where merge then restore held polib's entries for the file
    three times (about 80 times the file). The result is read back entry by entry and
    must hold the entries intended (a digest of each one's content); where it does not,
    or the original's entries carry no line numbers, merge and restore build it whole.
    """
    kept = _rewritten(original, targets, options, limits, marks)
    if kept is not None:
        return kept
    out = merge(original, targets, options, langs, limits, marks=marks)
    return out if out == original else restore(original, out)


def _rewritten(
    original: bytes,
    targets: list[str | None],
    options: Options,
    limits: Limits,
    marks: list[Mark] | None,
) -> bytes | None:
    charset = charset_of(original)
    state = _Stream(Filler(targets, marks, options, 2))
    try:
        read_entries(original, state.take, lambda: None, limits.max_line_chars, state.line)
    except FormatError:
        return None
    if not state.finish():
        return None
    if not state.changed:
        return original
    result = "".join(state.out).encode(charset)
    state.out = []
    check = _Digest()
    try:
        read_entries(result, check.take, lambda: None, limits.max_line_chars)
    except FormatError:
        return None
    return result if check.digest.digest() == state.wanted.digest.digest() else None


class _Digest:
    """A running digest of the entries read, in order (what they hold, not how)."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()

    def take(self, entry: polib.POEntry) -> None:
        self.digest.update(repr(_content(entry)).encode())


class _Stream:
    """The rewrite's state: the original's lines not written yet, the entry before the
    one being read, the pieces written, and a digest of the entries intended."""

    def __init__(self, fill: Filler) -> None:
        self.fill = fill
        self.lines: list[str] = []
        self.first = 1
        """The line number of lines[0] (1-based, as polib counts)."""
        self.seen = 0
        self.last: polib.POEntry | None = None
        self.last_start = 0
        self.out: list[str] = []
        self.wanted = _Digest()
        self.changed = False
        self.broken = False

    def line(self, text: str) -> None:
        self.lines.append(text)
        self.seen += 1

    def take(self, entry: polib.POEntry) -> None:
        # polib numbers an entry by the line that starts it, except the first: its
        # block starts the file (comments before it are its own)
        start = 1 if self.last is None else entry.linenum
        if start is None or (self.last is not None and start <= self.last_start):
            self.broken = True
        if self.last is not None and not self.broken:
            self._write(self.last, self.last_start, start)
        self.last, self.last_start = entry, start

    def finish(self) -> bool:
        """Write the last entry and what follows it; False: the lines could not be cut."""
        if self.last is not None and not self.broken:
            self._write(self.last, self.last_start, self.first + len(self.lines))
        if self.broken:
            return False
        self.out.append("".join(self.lines))
        self.lines = []
        return True

    def _write(self, entry: polib.POEntry, begin: int, end: int) -> None:
        """Write the entry's block (its lines from `begin` up to `end`), filled."""
        start = begin - self.first
        stop = end - self.first
        if start < 0 or stop < start or stop > len(self.lines):
            self.broken = True
            return
        self.out.append("".join(self.lines[:start]))
        block = self.lines[start:stop]
        if not entry.msgid and not entry.obsolete:  # the header: its nplurals fill the rest
            self.fill.nplurals = plural_forms(entry.msgstr)
        before = _content(entry)
        if self.fill(entry) and _content(entry) != before:
            self.changed = True
            self.out.append(_patched(block, entry, WRAP))
        else:
            self.out.append("".join(block))
        self.wanted.take(entry)
        del self.lines[:stop]
        self.first = end
