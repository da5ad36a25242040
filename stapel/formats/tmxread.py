"""Read a TMX file as a stream of (source, target) translation units, for a memory.

The file is parsed incrementally (lxml's iterparse, each `<tu>` dropped once read), so
a large memory never sits in memory whole. Entities are not resolved and no DTD or
network is touched. A malformed file is a BadTmx naming the line and column; so is a
unit that lacks either language of the pair. A `<seg>`'s text keeps the text of `<hi>`
and `<sub>`; the native codes inside `<bpt>`, `<ept>`, `<ph>` and `<it>` are dropped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from lxml import etree

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
CODES = {"bpt", "ept", "ph", "it", "ut"}


class Readable(Protocol):
    """A binary stream, as iterparse reads it: a file, a request body, a capped body."""

    def read(self, size: int = -1, /) -> bytes: ...


class BadTmx(ValueError):
    """The TMX cannot be read: why, and where (line and column, 1-based)."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.line, self.column = line, column


def primary(lang: str) -> str:
    """Return a language tag's primary subtag, lower case: en-US -> en."""
    return lang.replace("_", "-").split("-")[0].lower()


def seg_text(seg: etree._Element) -> str:
    """Return a <seg>'s text without its native inline codes."""
    out = [seg.text or ""]
    for child in seg:
        tag = etree.QName(child).localname if isinstance(child.tag, str) else ""
        if tag not in CODES and tag:
            out.append(seg_text(child))
        out.append(child.tail or "")
    return "".join(out)


def units(stream: Readable, source_lang: str, target_lang: str) -> Iterator[tuple[str, str]]:
    """Yield (source, target) of each <tu> of a TMX stream, for the pair given.

    Raises BadTmx for malformed XML, a file that is not TMX, a header whose srclang is
    another language, or a unit without a variant in each language of the pair.
    """
    want = primary(source_lang), primary(target_lang)
    etree.clear_error_log()  # this thread's log: only this file's errors in it
    parser = etree.iterparse(
        stream,
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
    )
    root_seen = False
    try:
        for event, element in parser:
            tag = etree.QName(element).localname
            if event == "start":
                if not root_seen:
                    root_seen = True
                    if tag != "tmx":
                        raise BadTmx(
                            f"the root element is <{tag}>, not <tmx>", element.sourceline or 1, 1
                        )
                continue
            if tag == "header":
                src = element.get("srclang", "*all*")
                if src.lower() != "*all*" and primary(src) != want[0]:
                    raise BadTmx(
                        f"the TMX's srclang is {src}; the memory is {source_lang}-{target_lang}",
                        element.sourceline or 1,
                        1,
                    )
            elif tag == "tu":
                yield _unit(element, want, source_lang, target_lang)
                element.clear()
                parent = element.getparent()
                while parent is not None and element.getprevious() is not None:
                    del parent[0]
    except etree.XMLSyntaxError as exc:
        # the first error logged is the cause (the exception's own text may be a later
        # "no element found" at 0:0)
        first = next(iter(exc.error_log), None)
        if first is not None:
            raise BadTmx(f"malformed TMX: {first.message}", first.line, first.column) from None
        line, column = exc.position if exc.position else (exc.lineno or 0, 0)
        raise BadTmx(f"malformed TMX: {exc.msg}", line, column) from None
    if not root_seen:
        raise BadTmx("the file is empty", 1, 1)


def _unit(tu: etree._Element, want: tuple[str, str], source: str, target: str) -> tuple[str, str]:
    found: dict[str, str] = {}
    for tuv in tu:
        if not isinstance(tuv.tag, str) or etree.QName(tuv).localname != "tuv":
            continue
        lang = primary(tuv.get(XML_LANG) or tuv.get("lang") or "")
        seg = next(
            (c for c in tuv if isinstance(c.tag, str) and etree.QName(c).localname == "seg"), None
        )
        if seg is not None and lang in want and lang not in found:
            found[lang] = seg_text(seg)
    if want[0] not in found or want[1] not in found:
        langs = sorted({primary(t.get(XML_LANG) or t.get("lang") or "?") for t in tu})
        raise BadTmx(
            f"a <tu> has no {source} and {target} variants (it has {', '.join(langs) or 'none'})",
            tu.sourceline or 0,
            1,
        )
    return found[want[0]], found[want[1]]
