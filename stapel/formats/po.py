"""PO (gettext): every untranslated msgid translated into its msgstr, plurals included.

Entries already translated are kept unless the job overwrites targets; the header,
comments, references, contexts and obsolete entries are kept. A plural entry fills
every slot the header's `Plural-Forms: nplurals=N` names: slot 0 from the singular
msgid, the others from msgid_plural. Format placeholders (`%s`, `%(count)d`, `%1$s`,
`{name}`, `{0}`, `%{name}`) are inline codes, so the model never sees them and they
come back intact, placed by alignment. Entries Stapel translates get the `fuzzy` flag
unless the job turns it off, and always where a segment is to review; a scored entry
gets a translator comment `stapel-score: 0.83` (its lowest segment's score). The file is
written as polib writes it (docs/formats.md).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import polib

import stapel.formats.inline as inline
from stapel.formats.base import FormatError, Limits, Mark, Options, Source, combined
from stapel.formats.reading import decode_pieces, head, iter_lines

PLACEHOLDER = re.compile(
    r"%(?:\([^)\s]+\))?[-+ #0]*(?:\d+\$)?(?:\*|\d+)?(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGcrsa%]"
    r"|%\{\w+\}"
    r"|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"
)
CHARSET = re.compile(rb"charset=([\w.:-]+)")
NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
SYNTAX_LINE = re.compile(r"line (\d+)")
SCORE_COMMENT = "stapel-score:"
"""The translator comment line that carries an entry's score."""


@dataclass
class Unit:
    """An entry to translate and its texts (msgid, then msgid_plural)."""

    entry: polib.POEntry
    texts: list[str]


_GETTEXT = """ascii utf-8 iso-8859-1 iso-8859-2 iso-8859-3 iso-8859-4 iso-8859-5 iso-8859-6
iso-8859-7 iso-8859-8 iso-8859-9 iso-8859-10 iso-8859-13 iso-8859-14 iso-8859-15 iso-8859-16
koi8-r koi8-u koi8-t cp850 cp866 cp874 cp932 cp949 cp950 cp1250 cp1251 cp1252 cp1253 cp1254
cp1255 cp1256 cp1257 cp1258 gb2312 gbk gb18030 big5 big5hkscs euc-jp euc-kr shift_jis johab
tis-620"""
GETTEXT_CHARSETS = frozenset(codecs.lookup(name).name for name in _GETTEXT.split())
"""The charsets a PO header may name: GNU gettext's portable list, as Python spells them.
Anything else (unicode_escape, punycode, idna ...) is a codec, not a text encoding: it
can turn bytes into NULs or lone surrogates, or cost seconds of CPU per megabyte."""


def charset_of(data: bytes) -> str:
    match = CHARSET.search(data[:8192])
    name = match.group(1).decode("ascii", "replace") if match else "utf-8"
    if name.upper() == "CHARSET":
        return "utf-8"
    try:
        canonical = codecs.lookup(name).name
    except LookupError:
        canonical = ""
    if canonical not in GETTEXT_CHARSETS:
        raise FormatError(
            f"the header's charset {name!r} is not a text encoding gettext supports (use UTF-8)",
            code="invalid_encoding",
        )
    return canonical


def parse_po(data: bytes) -> tuple[polib.POFile, str]:
    charset = charset_of(data)
    try:
        text = data.decode(charset)
    except (LookupError, UnicodeDecodeError):
        raise FormatError(
            f"not valid {charset} (the charset its header names)", code="invalid_encoding"
        ) from None
    # polib reads a file when its argument names one: a one-line upload such as
    # "/etc/passwd" must stay content, and content always has a newline.
    text = text.lstrip("\ufeff")
    if "\n" not in text:
        text += "\n"
    try:
        return polib.pofile(text, encoding=charset), charset
    except (OSError, ValueError) as exc:
        found = SYNTAX_LINE.search(str(exc))
        line = int(found.group(1)) if found else None
        raise FormatError(f"malformed PO: {exc}", line) from None


def _translated(entry: polib.POEntry) -> bool:
    return bool(entry.msgstr) or any(entry.msgstr_plural.values())


def texts(entry: polib.POEntry, options: Options) -> list[str]:
    """The entry's texts to translate (msgid, then msgid_plural); none for the header,
    an obsolete entry, or one translated already that the job keeps."""
    if entry.obsolete or not entry.msgid:
        return []
    if _translated(entry) and not options.overwrite_targets:
        return []
    return [entry.msgid] + ([entry.msgid_plural] if entry.msgid_plural else [])


def units(po: polib.POFile, options: Options) -> Iterator[Unit]:
    """Yield the entries to translate, in file order."""
    for entry in po:
        if found := texts(entry, options):
            yield Unit(entry, found)


class _Handed:
    """Stands in for the POFile polib's parser fills: each entry goes to `take` as it
    ends, and nothing is kept."""

    def __init__(self, **_kwargs: object) -> None:
        self.header, self.fpath = "", None
        self.take: Callable[[polib.POEntry], None] = lambda _entry: None

    def append(self, entry: polib.POEntry) -> None:
        self.take(entry)

    def find(self, *_args: object, **_kwargs: object) -> None:
        return None  # the header's metadata is not read here


def read_entries(
    data: Source,
    take: Callable[[polib.POEntry], None],
    check: Callable[[], None],
    max_line: int,
    on_line: Callable[[str], None] | None = None,
) -> None:
    """Read the file with polib's own parser, a line at a time as the bytes are decoded,
    handing each entry to `take` as it ends; `check` runs before each line and may stop
    the reading by raising; `on_line` sees each line before the parser does. Only the
    current entry and line are held, where polib.pofile holds the text, its lines and
    every entry (about 25 times the file)."""
    charset = charset_of(head(data, 8192))
    parser = polib._POFileParser("\n", klass=_Handed)  # the same parser merge's pofile uses
    parser.instance.take = take

    def lines(pieces: Iterable[str]) -> Iterator[str]:
        for n, line in enumerate(iter_lines(pieces, max_line)):
            check()
            if n == 0:
                line = line.lstrip("\ufeff")
            if on_line is not None:
                on_line(line)
            yield line

    parser.fhandle = lines(decode_pieces(data, charset))
    try:
        parser.parse()
    except FormatError as exc:
        if exc.code == "invalid_encoding":
            exc.message = f"not valid {charset} (the charset its header names)"
        raise
    except (OSError, ValueError) as exc:
        found = SYNTAX_LINE.search(str(exc))
        raise FormatError(f"malformed PO: {exc}", int(found.group(1)) if found else None) from None


def encode(text: str) -> tuple[str, list[str]]:
    """Return text with placeholders as point codes, and the placeholders by number."""
    found: list[str] = []

    def code(match: re.Match) -> str:
        found.append(match.group(0))
        return inline.marker("point", len(found))

    return PLACEHOLDER.sub(code, text), found


def decode(text: str, placeholders: list[str]) -> str:
    """Turn a translation's point codes back into the placeholders."""

    def back(match: re.Match) -> str:
        n = int(match.group(2))
        return placeholders[n - 1] if 0 < n <= len(placeholders) else ""

    return inline.ANY_MARK.sub("", inline.MARKER.sub(back, text))


def extract(data: Source, options: Options, limits: Limits) -> list[str]:
    """Return the texts to translate: each entry's msgid, and msgid_plural where it has one.

    Read entry by entry (read_entries), each freed once its texts are taken; more
    entries than the segment limit (the header aside) or more texts are refused as
    soon as they are read, so merge never builds more entries than an accepted file has.
    """
    out: list[str] = []
    seen = 0

    def take(entry: polib.POEntry) -> None:
        nonlocal seen
        seen += 1
        out.extend(encode(text)[0] for text in texts(entry, options))

    def check() -> None:
        if seen > limits.max_segments + 1 or len(out) > limits.max_segments:
            raise FormatError(
                f"more than {limits.max_segments} entries; that is the limit",
                code="too_many_segments",
            )

    read_entries(data, take, check, limits.max_line_chars)
    check()
    return out


def merge(
    data: bytes,
    targets: list[str | None],
    options: Options,
    langs: tuple[str, str],
    limits: Limits,
    marks: list[Mark] | None = None,
) -> bytes:
    """Return the PO file with each translated entry's msgstr (or plural msgstrs) filled,
    written whole by polib (stapel.formats.pokeep.rewrite keeps the original's lines)."""
    po, charset = parse_po(data)
    fill = Filler(targets, marks, options, plural_forms(po.metadata.get("Plural-Forms", "")))
    changed = False
    for entry in po:
        changed = fill(entry) or changed
    if not changed:
        return data
    return str(po).encode(charset)


def plural_forms(header_value: str) -> int:
    """The number of msgstr slots a plural entry has (the header's nplurals, else 2)."""
    match = NPLURALS.search(header_value)
    return int(match.group(1)) if match else 2


class Filler:
    """Fills each entry it is given, in file order, with its next targets and marks."""

    def __init__(
        self,
        targets: list[str | None],
        marks: list[Mark] | None,
        options: Options,
        nplurals: int,
    ) -> None:
        self.todo, self.marked = iter(targets), iter(marks or [])
        self.options, self.nplurals = options, nplurals

    def __call__(self, entry: polib.POEntry) -> bool:
        """Fill the entry if it is one to translate and all its targets are there;
        return whether it changed."""
        found_texts = texts(entry, self.options)
        if not found_texts:
            return False
        outs = [next(self.todo, None) for _ in found_texts]
        found = combined([next(self.marked, Mark()) for _ in found_texts])
        if any(out is None for out in outs):
            return False
        filled = [
            decode(out or "", encode(src)[1]) for out, src in zip(outs, found_texts, strict=True)
        ]
        if entry.msgid_plural:
            slots = max(self.nplurals, len(entry.msgstr_plural), 1)
            entry.msgstr_plural = {i: filled[0] if i == 0 else filled[-1] for i in range(slots)}
        else:
            entry.msgstr = filled[0]
        if (self.options.mark_fuzzy or found.review) and "fuzzy" not in entry.flags:
            entry.flags.append("fuzzy")
        _score_comment(entry, found)
        return True


def _score_comment(entry: polib.POEntry, found: Mark) -> None:
    """Put the entry's score in its translator comment, replacing one written before."""
    kept = entry.tcomment.split("\n") if entry.tcomment else []
    lines = [line for line in kept if not line.startswith(SCORE_COMMENT)]
    if found.score is not None:
        lines.append(f"{SCORE_COMMENT} {found.score:.2f}")
    entry.tcomment = "\n".join(lines)
