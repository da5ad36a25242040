"""What every document format shares: options, limits, errors, safe XML and zip reading."""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from dataclasses import dataclass
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
class Limits:
    """Bounds on one document (the zip bounds stop a zip bomb before it unpacks)."""

    max_segment_chars: int = 4000
    max_segments: int = 200_000
    max_unpacked_bytes: int = 256 * 1024 * 1024
    max_zip_entries: int = 2000


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


class _RootReached(Exception):
    """The prolog ended: every DOCTYPE the document may have was seen."""


def _check_doctype(data: bytes) -> bool:
    """Refuse a DOCTYPE that declares or names anything; return False if expat cannot read
    the encoding (the caller then refuses any DOCTYPE).

    expat reads the prolog as XML (a DOCTYPE inside a comment is a comment) and stops at
    the root element, so the cost is the prolog's, however long. A bare `<!DOCTYPE name>`
    passes: it declares nothing. An internal subset (entity, element or attribute
    declarations) or an external DTD (SYSTEM or PUBLIC) is refused.
    """
    reader = expat.ParserCreate()

    def doctype(name: str, system: str | None, public: str | None, subset: int) -> None:
        if subset or system or public:
            what = "an internal subset" if subset else "an external DTD"
            at = data.rfind(b"<!DOCTYPE", 0, reader.CurrentByteIndex + 1)
            line, column = position(data[: max(at, 0)].decode("utf-8", "replace"), max(at, 0))
            raise FormatError(
                f"a DOCTYPE with {what} (entity or DTD declarations) is not accepted; "
                f"a bare <!DOCTYPE {name}> is",
                line,
                column,
            )

    def root(*_args: object) -> None:
        raise _RootReached

    reader.StartDoctypeDeclHandler = doctype
    reader.StartElementHandler = root
    try:
        reader.Parse(data, True)
    except _RootReached:
        return True
    except (expat.ExpatError, ValueError, LookupError):
        return False  # malformed (lxml says where) or an encoding expat lacks
    return True


def parse_xml(data: bytes) -> etree._ElementTree:
    """Parse XML with no DTD, no entity expansion and no network: billion laughs and XXE fail.

    The whole prolog is read as XML (_check_doctype), so a DOCTYPE is judged wherever it
    stands and whatever comes before it; the parser would not expand or fetch entities
    anyway (resolve_entities=False, no_network=True, load_dtd=False) and keeps libxml2's
    limits on huge documents (huge_tree=False). With nothing declared, a reference to
    any entity but XML's five is malformed.
    """
    checked = _check_doctype(data)
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        strip_cdata=False,
        remove_blank_text=False,
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        line, column = exc.position
        raise FormatError(f"malformed XML: {exc.msg}", line, column) from None
    tree = root.getroottree()
    if not checked and tree.docinfo.doctype:
        raise FormatError("a DOCTYPE is not accepted in this encoding (use UTF-8)", 1, 1)
    return tree


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

    def __init__(self, data: bytes, limits: Limits) -> None:
        try:
            self.file = zipfile.ZipFile(io.BytesIO(data))
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
        self.infos = infos
        self.left = limits.max_unpacked_bytes

    def names(self) -> list[str]:
        return [i.filename for i in self.infos]

    def read(self, name: str) -> bytes:
        """Unpack one entry, counting what it really unpacks to against the limit."""
        out = bytearray()
        try:
            with self.file.open(name) as member:
                while chunk := member.read(1 << 16):
                    out += chunk
                    if len(out) > self.left:
                        raise FormatError(
                            "the container unpacks to more than the limit",
                            code="document_too_large",
                        )
        except (zipfile.BadZipFile, zlib.error, OSError) as exc:
            raise FormatError(f"entry {name!r} cannot be unpacked ({exc})") from None
        self.left -= len(out)
        return bytes(out)
