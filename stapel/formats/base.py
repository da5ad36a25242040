"""What every document format shares: options, limits, errors, safe XML and zip reading
(stapel/formats/reading.py reads text in pieces)."""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO
from xml.parsers import expat

from lxml import etree

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Options:
    """A job's choices about its documents (form fields of an upload)."""

    overwrite_targets: bool = False
    """XLIFF targets and PO msgstrs already there are translated again (default: kept)."""
    mark_fuzzy: bool = True
    """PO entries Stapel translated get the `fuzzy` flag, so a translator reviews them."""

    def as_json(self) -> dict:
        return {"overwrite_targets": self.overwrite_targets, "mark_fuzzy": self.mark_fuzzy}

    @classmethod
    def from_json(cls, value: dict | None) -> Options:
        value = value or {}
        return cls(
            overwrite_targets=bool(value.get("overwrite_targets", False)),
            mark_fuzzy=bool(value.get("mark_fuzzy", True)),
        )


OPTION_FIELDS = tuple(Options().as_json())


@dataclass(frozen=True)
class Mark:
    """What a rebuilt document says about one machine-translated segment."""

    score: float | None = None
    """The segment's confidence score in [0, 1]; None where the model gave none."""
    review: bool | None = None
    """Under the job's `min_score`; None where the job routes nothing to review."""

    @property
    def percent(self) -> str:
        """The score on the 0-100 scale XLIFF's match qualities use, one decimal."""
        return "" if self.score is None else f"{100 * self.score:.1f}"


def combined(marks: list[Mark]) -> Mark:
    """One mark for the segments of one entry: its lowest score, review if any needs it."""
    scores = [m.score for m in marks if m.score is not None]
    reviews = [m.review for m in marks if m.review is not None]
    return Mark(min(scores) if scores else None, any(reviews) if reviews else None)


@dataclass(frozen=True)
class Limits:
    """Bounds on one document (the zip bounds stop a zip bomb before it unpacks)."""

    max_segment_chars: int = 4000
    max_segments: int = 200_000
    max_unpacked_bytes: int = 256 * 1024 * 1024
    max_zip_entries: int = 2000
    max_zip_ratio: int = 200
    """An entry that unpacks to more than this many times its packed size is a bomb (a
    Word document's XML packs 5-30 times; zeros pack a thousand times)."""
    max_line_chars: int = 1 << 20
    """A line of a line-based format (PO, SRT) is held whole while it is read."""


class FormatError(Exception):
    """A document that cannot be read as its format; line and column where known."""

    def __init__(
        self, message: str, line: int | None = None, column: int | None = None, *, code: str = ""
    ) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column
        self.code = code or "invalid_document"

    def where(self) -> str:
        if self.line is None:
            return ""
        return f" at line {self.line}" + (f", column {self.column}" if self.column else "")


def position(text: str, offset: int) -> tuple[int, int]:
    """Return the 1-based (line, column) of an offset in text."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def decode_utf8(data: bytes) -> str:
    """Decode UTF-8 (a BOM is dropped here and kept by the formats that write it back)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column = position(data[: exc.start].decode("utf-8", "replace"), exc.start)
        raise FormatError(
            f"not UTF-8 (bad byte at offset {exc.start})", line, column, code="invalid_encoding"
        ) from None


Source = bytes | IO[bytes]
"""A document as the web has it: bytes, or a (spooled) file read from its start, so a
document refused while it is read is never held whole."""


class _RootReached(Exception):
    """The prolog ended: every DOCTYPE the document may have was seen."""


class DoctypeCheck:
    """Refuse a DOCTYPE that declares or names anything, fed the document chunk by chunk.

    expat reads the prolog as XML (a DOCTYPE inside a comment is a comment) and stops at
    the root element, so the cost is the prolog's, however long. A bare `<!DOCTYPE name>`
    passes: it declares nothing. An internal subset (entity, element or attribute
    declarations) or an external DTD (SYSTEM or PUBLIC) is refused. `checked` is False
    when expat cannot read the encoding: the caller then refuses any DOCTYPE.
    """

    def __init__(self) -> None:
        self.reader = expat.ParserCreate()
        self.reader.StartDoctypeDeclHandler = self._doctype
        self.reader.StartElementHandler = self._root
        self.done, self.checked = False, True
        self.head = bytearray()

    def feed(self, chunk: bytes, final: bool = False) -> None:
        if self.done:
            return
        self.head += chunk  # only the prolog is kept: done at the root element
        try:
            self.reader.Parse(chunk, final)
        except _RootReached:
            self.done = True
        except (expat.ExpatError, ValueError, LookupError):
            self.done, self.checked = True, False  # malformed (lxml says where), or encoding
        if self.done:
            self.head = bytearray()

    def _doctype(self, name: str, system: str | None, public: str | None, subset: int) -> None:
        if subset or system or public:
            what = "an internal subset" if subset else "an external DTD"
            at = max(self.head.rfind(b"<!DOCTYPE", 0, self.reader.CurrentByteIndex + 1), 0)
            line, column = position(bytes(self.head[:at]).decode("utf-8", "replace"), at)
            raise FormatError(
                f"a DOCTYPE with {what} (entity or DTD declarations) is not accepted; "
                f"a bare <!DOCTYPE {name}> is",
                line,
                column,
            )

    def _root(self, *_args: object) -> None:
        raise _RootReached


SAFE = {
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "dtd_validation": False,
    "huge_tree": False,
    "strip_cdata": False,
    "remove_blank_text": False,
}
"""lxml's parser options for every document: no DTD, entities or network, libxml2's
limits on huge documents kept."""


def parse_xml(data: bytes) -> etree._ElementTree:
    """Parse XML with no DTD, no entity expansion and no network: billion laughs and XXE fail.

    The whole prolog is read as XML (_check_doctype), so a DOCTYPE is judged wherever it
    stands and whatever comes before it; the parser would not expand or fetch entities
    anyway (resolve_entities=False, no_network=True, load_dtd=False) and keeps libxml2's
    limits on huge documents (huge_tree=False). With nothing declared, a reference to
    any entity but XML's five is malformed.
    """
    check = DoctypeCheck()
    check.feed(data, final=True)
    try:
        root = etree.fromstring(data, etree.XMLParser(**SAFE))
    except etree.XMLSyntaxError as exc:
        line, column = exc.position
        raise FormatError(f"malformed XML: {exc.msg}", line, column) from None
    tree = root.getroottree()
    refuse_unchecked(check, tree)
    return tree


def refuse_unchecked(check: DoctypeCheck, tree: etree._ElementTree) -> None:
    if not check.checked and tree.docinfo.doctype:
        raise FormatError("a DOCTYPE is not accepted in this encoding (use UTF-8)", 1, 1)


def iter_ends(
    chunks: Iterable[bytes], tag: str | tuple[str, ...], root: bool = False
) -> Iterator[etree._Element]:
    """Yield each `tag` element of a streamed document as it ends (its subtree complete),
    and with root=True the root element last.

    The caller drops what it has read (`release`), so memory holds one element and the
    path to it, not the document. Parsed as parse_xml parses.
    """
    check = DoctypeCheck()
    parser = etree.XMLPullParser(events=("end",), tag=tag, **SAFE)
    try:
        for chunk in chunks:
            check.feed(chunk)
            parser.feed(chunk)
            for _event, elem in parser.read_events():
                yield elem
        check.feed(b"", final=True)
        top = parser.close()
        for _event, elem in parser.read_events():
            yield elem
    except etree.XMLSyntaxError as exc:
        log = exc.error_log  # its last entry is the cause ("no element found" is the end)
        cause = log[len(log) - 1] if len(log) else None
        if cause is None:
            raise FormatError(f"malformed XML: {exc.msg}", *exc.position) from None
        raise FormatError(f"malformed XML: {cause.message}", cause.line, cause.column) from None
    refuse_unchecked(check, top.getroottree())
    if root:
        yield top


def release(elem: etree._Element) -> None:
    """Free an element that was read, and the siblings read before it."""
    elem.clear(keep_tail=False)
    parent = elem.getparent()
    if parent is not None:
        while elem.getprevious() is not None:
            del parent[0]


def xml_bytes(tree: etree._ElementTree, original: bytes) -> bytes:
    """Serialize tree in its encoding with the original XML declaration (when there was one)."""
    encoding = tree.docinfo.encoding or "UTF-8"
    body = etree.tostring(tree, encoding=encoding, xml_declaration=False)
    declaration = re.match(rb"\s*<\?xml[^>]*\?>\s*", original)
    if declaration:
        return declaration.group(0) + body.lstrip()
    return body


class Zip:
    """A zip container checked against the limits before anything is unpacked."""

    def __init__(self, data: Source, limits: Limits) -> None:
        try:
            self.file = zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data)
            infos = self.file.infolist()
        except (zipfile.BadZipFile, ValueError, OSError) as exc:
            raise FormatError(f"not a valid zip container ({exc})") from None
        if len(infos) > limits.max_zip_entries:
            raise FormatError(
                f"the container has {len(infos)} entries; the limit is {limits.max_zip_entries}",
                code="document_too_large",
            )
        declared = sum(i.file_size for i in infos)
        if declared > limits.max_unpacked_bytes:
            raise FormatError(
                f"the container unpacks to {declared} bytes; the limit is "
                f"{limits.max_unpacked_bytes}",
                code="document_too_large",
            )
        for info in infos:
            packed = max(info.compress_size, 1)
            if info.file_size > limits.max_zip_ratio * packed + 4096:
                raise FormatError(
                    f"entry {info.filename!r} unpacks {info.file_size // packed} times its "
                    f"packed size; the limit is {limits.max_zip_ratio}",
                    code="document_too_large",
                )
        self.infos = infos
        self.left = limits.max_unpacked_bytes

    def names(self) -> list[str]:
        return [i.filename for i in self.infos]

    def stream(self, name: str) -> Iterator[bytes]:
        """Unpack one entry in chunks, counting what it really unpacks to against the limit."""
        try:
            with self.file.open(name) as member:
                while chunk := member.read(1 << 16):
                    self.left -= len(chunk)
                    if self.left < 0:
                        raise FormatError(
                            "the container unpacks to more than the limit",
                            code="document_too_large",
                        )
                    yield chunk
        except (zipfile.BadZipFile, zlib.error, OSError) as exc:
            raise FormatError(f"entry {name!r} cannot be unpacked ({exc})") from None

    def read(self, name: str) -> bytes:
        """Unpack one entry whole (counted as `stream` counts)."""
        return b"".join(self.stream(name))
