"""DOCX: paragraphs of the body, tables, headers, footers, footnotes and endnotes translated.

A paragraph is one segment. Its runs' formatting travels as inline codes: the
paragraph's most used run formatting is the plain text, a stretch of runs formatted
otherwise (bold, italic, a style) is a paired code around its words, a hyperlink (and
tracked insertions, smart tags) a paired code whose content is laid out the same way,
and tabs, breaks, pictures, footnote references, bookmarks and fields standalone codes
kept whole (text inside a field is not translated). The translation is laid back into
runs with the same formatting around the words alignment gives them.

Only the XML parts with a translated paragraph are rewritten (as lxml serialises them);
every other entry of the container is copied unchanged, and a paragraph whose
translation equals its text is not touched, so an identity round trip returns every
part byte for byte. The container is bounded by Limits (entries, unpacked size).
"""

from __future__ import annotations

import copy
import io
import re
import zipfile
from collections import Counter
from dataclasses import dataclass, field

from lxml import etree

import stapel.formats.inline as inline
from stapel.formats.base import (
    FormatError,
    Limits,
    Options,
    Source,
    Zip,
    iter_ends,
    parse_xml,
    release,
    xml_bytes,
)

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
PARTS = re.compile(r"^word/(document|header\d*|footer\d*|footnotes|endnotes)\.xml$")
CONTAINERS = {"hyperlink", "ins", "smartTag", "customXml", "dir", "bdo"}
BREAKS = {"tab", "br", "cr"}
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


def q(name: str) -> str:
    return f"{{{W}}}{name}"


def _local(elem) -> str:
    return etree.QName(elem).localname if isinstance(elem.tag, str) else ""


@dataclass
class Code:
    """What a code number stands for when the paragraph is rebuilt."""

    kind: str
    """"format" (runs formatted so), "container" (a hyperlink ...), "run" (a run's tab,
    break or picture), "element" (bookmarks, fields: kept as they are)."""
    rpr: etree._Element | None = None
    elements: list[etree._Element] = field(default_factory=list)
    base: etree._Element | None = None
    """For a container: the formatting of its plain text."""


@dataclass
class Para:
    """A paragraph as a segment, with its codes."""

    element: etree._Element
    text: str = ""
    codes: dict[int, Code] = field(default_factory=dict)
    base: etree._Element | None = None


def _key(rpr: etree._Element | None) -> bytes:
    return b"" if rpr is None else etree.tostring(rpr)


def _items(parent: etree._Element, out: list, fields: list[int]) -> None:
    """Flatten a paragraph's (or container's) content into text, point and container items."""
    for child in parent:
        name = _local(child)
        if name == "pPr":
            continue
        if name == "r":
            _run_items(child, out, fields)
        elif name in CONTAINERS:
            out.append(("open", child))
            _items(child, out, fields)
            out.append(("close", child))
        elif fields[0] and out and out[-1][0] == "field":
            out[-1][1].append(child)
        else:
            out.append(("element", [child]))


def _run_items(run: etree._Element, out: list, fields: list[int]) -> None:
    chars = [c.get(q("fldCharType")) for c in run.iter(q("fldChar"))]
    if fields[0] or "begin" in chars or run.find(q("instrText")) is not None:
        if out and out[-1][0] == "field":
            out[-1][1].append(run)
        else:
            out.append(("field", [run]))
        fields[0] += chars.count("begin") - chars.count("end")
        return
    rpr = run.find(q("rPr"))
    for child in run:
        name = _local(child)
        if name == "rPr":
            continue
        if name == "t":
            out.append(("text", child.text or "", rpr))
        else:
            out.append(("run", child, rpr))


def _base(items: list) -> etree._Element | None:
    """The formatting with the most characters among a level's direct text items."""
    counts: Counter[bytes] = Counter()
    first: dict[bytes, etree._Element | None] = {}
    depth = 0
    for item in items:
        if item[0] == "open":
            depth += 1
        elif item[0] == "close":
            depth -= 1
        elif item[0] == "text" and depth == 0:
            key = _key(item[2])
            counts[key] += len(item[1])
            first.setdefault(key, item[2])
    return first[counts.most_common(1)[0][0]] if counts else None


def paragraph(p: etree._Element) -> Para:
    """Turn a w:p into a segment with codes."""
    items: list = []
    _items(p, items, [0])
    para = Para(p, base=_base(items))
    para.text = _encode(items, para, para.base)
    return para


def _encode(items: list, para: Para, base: etree._Element | None) -> str:
    parts: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        if item[0] == "text" and _key(item[2]) != _key(base):
            n = _code(para, Code("format", rpr=item[2]))
            parts.append(inline.marker("open", n))
            while i < len(items) and items[i][0] == "text" and _key(items[i][2]) == _key(item[2]):
                parts.append(items[i][1])
                i += 1
            parts.append(inline.marker("close", n))
            continue
        if item[0] == "text":
            parts.append(item[1])
        elif item[0] == "open":
            end = _close_index(items, i)
            inner = items[i + 1 : end]
            n = _code(para, Code("container", elements=[item[1]], base=_base(inner)))
            parts.append(inline.marker("open", n))
            parts.append(_encode(inner, para, para.codes[n].base))
            parts.append(inline.marker("close", n))
            i = end
        elif item[0] == "run":
            parts.append(inline.marker("point", _code(para, Code("run", item[2], [item[1]]))))
            after = items[i + 1] if i + 1 < len(items) else None
            if _local(item[1]) in BREAKS and after and after[0] == "text" and after[1][:1] != " ":
                parts.append(" ")  # the model must see two words, not one
        else:  # "element" and "field"
            parts.append(inline.marker("point", _code(para, Code("element", elements=item[1]))))
        i += 1
    return "".join(parts)


def _close_index(items: list, i: int) -> int:
    depth = 0
    for j in range(i, len(items)):
        if items[j][0] == "open":
            depth += 1
        elif items[j][0] == "close":
            depth -= 1
            if depth == 0:
                return j
    return len(items) - 1


def _code(para: Para, code: Code) -> int:
    n = len(para.codes) + 1
    para.codes[n] = code
    return n


def rebuild(para: Para, target: str) -> None:
    """Replace the paragraph's content with target laid out in runs like the source's."""
    p = para.element
    for child in list(p):
        if _local(child) != "pPr":
            p.remove(child)
    stack: list[tuple[etree._Element, etree._Element | None, int]] = [(p, para.base, 0)]
    run: etree._Element | None = None
    at = 0
    for match in inline.MARKER.finditer(target):
        run = _text(stack[-1], run, inline.ANY_MARK.sub("", target[at : match.start()]))
        at = match.end()
        kind, n = inline.KINDS[match.group(1)], int(match.group(2))
        code = para.codes.get(n)
        run = None
        if code is None:
            continue
        parent, _rpr, _ = stack[-1]
        if kind == "close":
            if len(stack) > 1 and stack[-1][2] == n:
                stack.pop()
        elif code.kind == "format":
            if kind == "open":
                stack.append((parent, code.rpr, n))
        elif code.kind == "container":
            shell = etree.SubElement(parent, code.elements[0].tag, dict(code.elements[0].attrib))
            if kind == "open":
                stack.append((shell, code.base, n))
        elif code.kind == "run":
            new = _new_run(parent, code.rpr)
            new.append(code.elements[0])
        else:
            for elem in code.elements:
                parent.append(elem)
    _text(stack[-1], run, inline.ANY_MARK.sub("", target[at:]))


def _new_run(parent: etree._Element, rpr: etree._Element | None) -> etree._Element:
    run = etree.SubElement(parent, q("r"))
    if rpr is not None:
        run.append(copy.deepcopy(rpr))
    return run


def _text(level, run: etree._Element | None, text: str) -> etree._Element | None:
    """Append text to the open run of this level (or a new one); return the run."""
    if not text:
        return run
    parent, rpr, _ = level
    if run is None:
        run = _new_run(parent, rpr)
    t = etree.SubElement(run, q("t"))
    t.text = text
    if text != text.strip():
        t.set(XML_SPACE, "preserve")
    return run


def _open(data: Source, limits: Limits) -> tuple[Zip, list[str]]:
    container = Zip(data, limits)
    names = container.names()
    if "word/document.xml" not in names:
        raise FormatError(
            "not a Word document (no word/document.xml)", code="unsupported_file_type"
        )
    return container, [n for n in names if PARTS.match(n)]


def _paragraphs(tree: etree._ElementTree) -> list[Para]:
    out = []
    for p in list(tree.getroot().iter(q("p"))):
        para = paragraph(p)
        if re.search(r"\w", inline.strip(para.text)):
            out.append(para)
    return out


def extract(data: Source, options: Options, limits: Limits) -> list[str]:
    """Return each paragraph with text, part by part, as a segment.

    Each part is read as a stream (iter_ends): a paragraph is turned into its segment
    when it ends and then dropped, so memory holds one paragraph, not the part, and
    the segment limit stops the reading when it is passed.
    """
    container, parts = _open(data, limits)
    out: list[str] = []
    for name in parts:
        try:
            for outer in iter_ends(container.stream(name), q("p")):
                if _nested(outer):
                    continue  # read with the paragraph it stands in, in document order
                for p in outer.iter(q("p")):
                    para = paragraph(p)
                    if re.search(r"\w", inline.strip(para.text)):
                        out.append(para.text.strip())
                if len(out) > limits.max_segments:
                    raise FormatError(
                        f"more than {limits.max_segments} paragraphs; that is the limit",
                        code="too_many_segments",
                    )
                release(outer)
        except FormatError as exc:
            raise FormatError(
                f"{name}: {exc.message}", exc.line, exc.column, code=exc.code
            ) from None
    return out


def _nested(p: etree._Element) -> bool:
    """Whether p stands inside another paragraph (a text box's)."""
    parent = p.getparent()
    while parent is not None:
        if parent.tag == p.tag:
            return True
        parent = parent.getparent()
    return False


def merge(
    data: bytes, targets: list[str | None], options: Options, langs: tuple[str, str], limits: Limits
) -> bytes:
    """Return the document with translated paragraphs rebuilt; other entries copied."""
    container, parts = _open(data, limits)
    todo = iter(targets)
    changed: dict[str, bytes] = {}
    read: dict[str, bytes] = {}
    for name in parts:
        raw = read[name] = container.read(name)
        tree = parse_xml(raw)
        touched = False
        for para in _paragraphs(tree):
            target = next(todo, None)
            if target is not None and target != para.text.strip():
                lead = para.text[: len(para.text) - len(para.text.lstrip())]
                trail = para.text[len(para.text.rstrip()) :]
                rebuild(para, lead + target + trail)
                touched = True
        if touched:
            changed[name] = xml_bytes(tree, raw)
    if not changed:
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zout:
        for info in container.infos:
            name = info.filename
            content = changed.get(name) or read.get(name)
            if content is not None:
                zout.writestr(info, content)
                continue
            # copied chunk by chunk, never whole; the writer changes the info it is given
            with zout.open(copy.copy(info), "w") as member:
                for chunk in container.stream(name):
                    member.write(chunk)
    return out.getvalue()
