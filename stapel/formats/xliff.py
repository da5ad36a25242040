"""XLIFF 1.2 and 2.x: each translatable segment's source translated into its target.

What changes in the file: a `<target>` per translated segment (created after the
source, or refilled when the job overwrites existing targets), its machine-translation
state, and the target language where the file did not name one. Everything else is
kept; the file is written back as lxml serialises it (docs/formats.md: canonical form).

- 1.2: every `<trans-unit>` not marked `translate="no"` (on itself or a `<group>`);
  with a `<seg-source>`, each `<mrk mtype="seg">` is a segment and fills the target's
  `<mrk>` of the same `mid`. The target gets `state="needs-review-translation"` and
  `state-qualifier="leveraged-mt"`. Units with `approved="yes"` are never touched.
- 2.x: every `<segment>` of a `<unit>` whose `translate` (inherited from `<file>` and
  `<group>`) is not "no"; `<ignorable>` is left alone. The segment gets
  `state="translated"`; a segment in state "final" is never touched.

A segment's score and review flag (docs/quality.md) are written in each version's own
terms by stapel/formats/xliffscores.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lxml import etree

import stapel.formats.xliffscores as xliffscores
import stapel.formats.xmlinline as xmlinline
from stapel.formats.base import (
    FormatError,
    Limits,
    Mark,
    Options,
    Source,
    iter_ends,
    parse_xml,
    release,
    xml_bytes,
)
from stapel.formats.reading import read_pieces
from stapel.formats.xmlinline import Flat

NS1 = "urn:oasis:names:tc:xliff:document:1.2"
NS2 = "urn:oasis:names:tc:xliff:document:2.0"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
STATE1 = {"state": "needs-review-translation", "state-qualifier": "leveraged-mt"}
STATE2 = "translated"


@dataclass
class Slot:
    """One segment of the file: its source content and how to write its translation."""

    source: etree._Element
    write: Callable[[etree._Element, Flat, str], None]
    mark: Callable[[Mark], None]


def _local(elem: etree._Element) -> str:
    return etree.QName(elem).localname if isinstance(elem.tag, str) else ""


def _classify1(elem: etree._Element) -> str:
    name = _local(elem)
    if name == "g" or (name == "mrk" and elem.get("mtype") != "protected"):
        return "pair"
    return "atom"


def _partner1(elem: etree._Element) -> tuple[str, str] | None:
    name = _local(elem)
    if name in ("bpt", "bx"):
        return "open", elem.get("rid") or elem.get("id") or ""
    if name in ("ept", "ex"):
        return "close", elem.get("rid") or elem.get("id") or ""
    return None


def _classify2(elem: etree._Element) -> str:
    name = _local(elem)
    if name == "pc" or (name == "mrk" and elem.get("translate") != "no"):
        return "pair"
    return "atom"


def _partner2(elem: etree._Element) -> tuple[str, str] | None:
    name = _local(elem)
    if name in ("sc", "sm"):
        return "open", name + (elem.get("id") or "")
    if name in ("ec", "em"):
        return "close", ("sc" if name == "ec" else "sm") + (elem.get("startRef") or "")
    return None


def _tree(data: bytes) -> tuple[etree._ElementTree, str]:
    tree = parse_xml(data)
    return tree, _version(tree.getroot())


def _version(root: etree._Element) -> str:
    """The XLIFF version of a root element ("1" or "2"); FormatError if it is no XLIFF."""
    if _local(root) != "xliff":
        raise FormatError(
            f"the root element is <{_local(root)}>, not <xliff>",
            root.sourceline,
            code="unsupported_file_type",
        )
    namespace = etree.QName(root).namespace
    if namespace == NS1 or (namespace is None and root.get("version", "").startswith("1.")):
        return "1"
    if namespace == NS2:
        return "2"
    raise FormatError(f"unknown XLIFF namespace {namespace!r}", root.sourceline)


def slots(tree: etree._ElementTree, version: str, options: Options) -> Iterator[Slot]:
    """Yield the file's segments to translate, in document order."""
    root = tree.getroot()
    if version == "1":
        yield from _slots1(root, options)
    else:
        yield from _slots2(root, options)


def _q1(root: etree._Element, name: str) -> str:
    namespace = etree.QName(root).namespace
    return f"{{{namespace}}}{name}" if namespace else name


def _slots1(root: etree._Element, options: Options) -> Iterator[Slot]:
    for unit in root.iter(_q1(root, "trans-unit")):
        yield from _unit_slots1(unit, options)


def _unit_slots1(unit: etree._Element, options: Options) -> Iterator[Slot]:
    q = lambda name: _q1(unit, name)  # noqa: E731
    if unit.get("approved") == "yes" or any(
        e.get("translate") == "no" for e in (unit, *unit.iterancestors())
    ):
        return
    source = unit.find(q("source"))
    if source is None:
        return
    target = unit.find(q("target"))
    seg_source = unit.find(q("seg-source"))
    marks = [] if seg_source is None else _seg_marks(seg_source, q)
    if not marks:
        if options.overwrite_targets or xmlinline.content_is_empty(target):
            yield Slot(source, _writer1(unit, source, q), _marker1(unit, None, q))
        return
    for mark in marks:
        existing = None if target is None else _mark_by_mid(target, q, mark.get("mid"))
        if options.overwrite_targets or xmlinline.content_is_empty(existing):
            yield Slot(
                mark, _mark_writer1(unit, seg_source, mark, q), _marker1(unit, mark.get("mid"), q)
            )


def _seg_marks(seg_source: etree._Element, q) -> list[etree._Element]:
    return [m for m in seg_source.iter(q("mrk")) if m.get("mtype") == "seg"]


def _mark_by_mid(target: etree._Element, q, mid: str | None) -> etree._Element | None:
    for m in target.iter(q("mrk")):
        if m.get("mtype") == "seg" and m.get("mid") == mid:
            return m
    return None


def _target1(unit: etree._Element, after: etree._Element, q) -> etree._Element:
    target = unit.find(q("target"))
    if target is None:
        target = etree.Element(q("target"))
        _insert_after(after, target)
    target.attrib.update(STATE1)
    return target


def _insert_after(ref: etree._Element, new: etree._Element) -> None:
    """Put new right after ref, indented like ref."""
    before = ref.getprevious()
    indent = ref.getparent().text if before is None else before.tail
    new.tail = ref.tail
    if indent is not None and not indent.strip():
        ref.tail = indent
    ref.addnext(new)


def _writer1(unit, source, q) -> Callable[[etree._Element, Flat, str], None]:
    def write(_source: etree._Element, flat: Flat, text: str) -> None:
        xmlinline.fill(_target1(unit, source, q), text, flat)

    return write


def _mark_writer1(unit, seg_source, mark, q) -> Callable[[etree._Element, Flat, str], None]:
    def write(_source: etree._Element, flat: Flat, text: str) -> None:
        fresh = unit.find(q("target")) is None
        target = _target1(unit, seg_source, q)
        if fresh:  # the target starts as the segmented source: text between segments kept
            target.text = seg_source.text
            for child in seg_source:
                target.append(copy.deepcopy(child))
        found = _mark_by_mid(target, q, mark.get("mid"))
        if found is None:
            found = etree.SubElement(target, q("mrk"), dict(mark.attrib))
        xmlinline.fill(found, text, flat)
        _drop_copies(target, found, q)

    return write


STANDALONE1 = ("x", "bx", "ex", "ph", "bpt", "ept", "it")
"""XLIFF 1.2 codes that hold no translatable text: safe to drop as a duplicate."""


def _drop_copies(target: etree._Element, filled: etree._Element, q) -> None:
    """Remove the codes a filled segment now holds from between the target's segments.

    A segmented target (Trados writes `<x id="ph8"/><mrk mid="7"/>`) may keep a code
    outside the empty segment that the source segment holds inside: once the segment
    is filled with it, the outer copy would make it appear twice.
    """
    held = {(e.tag, e.get("id")) for e in filled.iterdescendants() if e.get("id")}
    for elem in list(target.iterdescendants()):
        if (elem.tag, elem.get("id")) not in held or etree.QName(elem).localname not in STANDALONE1:
            continue
        if any(a is filled or _is_seg(a, q) for a in elem.iterancestors()):
            continue
        _remove_keeping_tail(elem)


def _is_seg(elem: etree._Element, q) -> bool:
    return elem.tag == q("mrk") and elem.get("mtype") == "seg"


def _remove_keeping_tail(elem: etree._Element) -> None:
    parent, before = elem.getparent(), elem.getprevious()
    if elem.tail:
        if before is not None:
            before.tail = (before.tail or "") + elem.tail
        else:
            parent.text = (parent.text or "") + elem.tail
    parent.remove(elem)


def _slots2(root: etree._Element, options: Options) -> Iterator[Slot]:
    for unit in root.iter(f"{{{NS2}}}unit"):
        yield from _unit_slots2(unit, options)


def _unit_slots2(unit: etree._Element, options: Options) -> Iterator[Slot]:
    q = lambda name: f"{{{NS2}}}{name}"  # noqa: E731
    if _translate_no(unit):
        return
    for segment in unit.iterchildren(q("segment")):
        source = segment.find(q("source"))
        if source is None or segment.get("state") == "final":
            continue
        target = segment.find(q("target"))
        if options.overwrite_targets or xmlinline.content_is_empty(target):
            yield Slot(source, _writer2(segment, source, q), _marker2(unit, segment, q))


def _translate_no(unit: etree._Element) -> bool:
    """XLIFF 2 `translate` is inherited: the nearest element that sets it decides."""
    for elem in (unit, *unit.iterancestors()):
        value = elem.get("translate")
        if value is not None:
            return value == "no"
    return False


def _writer2(segment, source, q) -> Callable[[etree._Element, Flat, str], None]:
    def write(_source: etree._Element, flat: Flat, text: str) -> None:
        target = segment.find(q("target"))
        if target is None:
            target = etree.Element(q("target"))
            _insert_after(source, target)
        segment.set("state", STATE2)
        xmlinline.fill(target, text, flat)

    return write


def _marker1(unit, mid: str | None, q) -> Callable[[Mark], None]:
    def mark(found: Mark) -> None:
        target = unit.find(q("target"))
        if target is not None:
            written = target if mid is None else _mark_by_mid(target, q, mid)
            xliffscores.mark1(unit, target, written, mid, found, q)

    return mark


def _marker2(unit, segment, q) -> Callable[[Mark], None]:
    return lambda found: xliffscores.mark2(unit, segment, found, q)


def _flat(slot: Slot, version: str) -> Flat:
    if version == "1":
        return xmlinline.flatten(slot.source, _classify1, _partner1)
    return xmlinline.flatten(slot.source, _classify2, _partner2)


UNITS = (f"{{{NS1}}}trans-unit", "trans-unit", f"{{{NS2}}}unit")


def extract(data: Source, options: Options, limits: Limits) -> list[str]:
    """Return the sources of the segments to translate (with inline-code markers).

    Read as a stream (iter_ends): a unit becomes its segments when it ends and is then
    dropped, so memory holds one unit, not the file; reading stops past the limit.
    """
    out: list[str] = []
    version = ""
    for elem in iter_ends(read_pieces(data), UNITS, root=True):
        version = version or _version(elem.getroottree().getroot())
        if elem.getparent() is None:
            break  # the root, after every unit
        root = elem.getroottree().getroot()
        if elem.tag != (_q1(root, "trans-unit") if version == "1" else f"{{{NS2}}}unit"):
            continue  # what `slots` would not visit either (merge walks with it)
        per_unit = _unit_slots1 if version == "1" else _unit_slots2
        for slot in per_unit(elem, options):
            flat = _flat(slot, version)
            if flat.translatable:
                out.append(flat.text)
        if len(out) > limits.max_segments:
            raise FormatError(
                f"more than {limits.max_segments} segments; that is the limit",
                elem.sourceline,
                code="too_many_segments",
            )
        release(elem)
    return out


def merge(
    data: bytes,
    targets: list[str | None],
    options: Options,
    langs: tuple[str, str],
    limits: Limits,
    marks: list[Mark] | None = None,
) -> bytes:
    """Return the file with each translated segment's target written, and its mark."""
    tree, version = _tree(data)
    todo = iter(targets)
    marked = iter(marks or [])
    written: list[tuple[Slot, Mark]] = []
    for slot in list(slots(tree, version, options)):
        flat = _flat(slot, version)
        if not flat.translatable:
            continue
        text, found = next(todo, None), next(marked, Mark())
        if text is not None:
            slot.write(slot.source, flat, text)
            written.append((slot, found))
    if not written:
        return data
    # a unit's segments share one 1.2 target state: those to review are marked last, so win
    for slot, found in sorted(written, key=lambda pair: bool(pair[1].review)):
        slot.mark(found)
    _languages(tree.getroot(), version, langs)
    return xml_bytes(tree, data)


def target_languages(data: bytes) -> set[str]:
    """The target languages the file declares: trgLang (2.x), each file's target-language."""
    tree, version = _tree(data)
    root = tree.getroot()
    if version == "2":
        found = [root.get("trgLang")]
    else:
        found = [file.get("target-language") for file in root.iter(_q1(root, "file"))]
    return {lang for lang in found if lang}


def _languages(root: etree._Element, version: str, langs: tuple[str, str]) -> None:
    if version == "2":
        if root.get("trgLang") is None:
            root.set("trgLang", langs[1])
        return
    for file in root.iter(_q1(root, "file")):
        if file.get("target-language") is None:
            file.set("target-language", langs[1])
