"""Any job as a bilingual file for post-editing: XLIFF 2.1 or TMX 1.4, streamed.

One `<file>` (XLIFF) per document and one unit per segment; a segment not translated
yet has no target (XLIFF, state "initial") or no translation unit (TMX). Inline codes
become XLIFF `<pc>`/`<ph/>` (`<sc/>`/`<ec/>` when unpaired) and TMX `<bpt>`/`<ept>`/`<ph>`
with the code's number; their original markup stays in the job's own documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from xml.sax.saxutils import escape, quoteattr

import stapel.formats.inline as inline

NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufdcf\ufdf0-\ufffd\U00010000-\U0010ffff]")
Documents = Iterable[tuple[str | None, Iterable[tuple[str, str | None]]]]
"""(document name, its (source, target) pairs) in order."""


def _text(text: str) -> str:
    return escape(NOT_XML.sub("", text))


def _inline(text: str, codes: dict[str, str]) -> str:
    """Escape text and turn its markers into the given elements."""
    paired = set(inline.pairs(inline.split(text)[1]))
    out, at = [], 0
    for match in inline.MARKER.finditer(text):
        out.append(_text(text[at : match.start()]))
        at = match.end()
        kind, n = inline.KINDS[match.group(1)], int(match.group(2))
        if kind != "point" and n not in paired:
            kind = "lone_" + kind
        out.append(codes[kind].format(n=n))
    out.append(_text(text[at:]))
    return "".join(out)


XLIFF_CODES = {
    "open": '<pc id="{n}">',
    "close": "</pc>",
    "point": '<ph id="{n}"/>',
    "lone_open": '<sc id="{n}"/>',
    "lone_close": '<ec startRef="{n}"/>',
}
TMX_CODES = {
    "open": '<bpt i="{n}"></bpt>',
    "close": '<ept i="{n}"></ept>',
    "point": '<ph x="{n}"></ph>',
    "lone_open": '<it pos="begin" x="{n}"></it>',
    "lone_close": '<it pos="end" x="{n}"></it>',
}


def xliff(documents: Documents, source_lang: str, target_lang: str) -> Iterator[str]:
    """Yield an XLIFF 2.1 file of the documents, piece by piece."""
    yield (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.1" '
        f"srcLang={quoteattr(source_lang)} trgLang={quoteattr(target_lang)}>\n"
    )
    for d, (name, pairs) in enumerate(documents):
        original = f" original={quoteattr(NOT_XML.sub('', name))}" if name else ""
        yield f'  <file id="f{d + 1}"{original}>\n'
        for s, (source, target) in enumerate(pairs):
            state = "translated" if target is not None else "initial"
            body = f"<source>{_inline(source, XLIFF_CODES)}</source>"
            if target is not None:
                body += f"<target>{_inline(target, XLIFF_CODES)}</target>"
            yield f'    <unit id="u{s + 1}"><segment state="{state}">{body}</segment></unit>\n'
        yield "  </file>\n"
    yield "</xliff>\n"


def tmx(
    documents: Documents, source_lang: str, target_lang: str, version: str = ""
) -> Iterator[str]:
    """Yield a TMX 1.4 memory of the documents' translated segments, piece by piece."""
    yield (
        '<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n'
        f'  <header creationtool="Stapel" creationtoolversion={quoteattr(version or "0")} '
        'segtype="paragraph" o-tmf="Stapel" adminlang="en" '
        f'srclang={quoteattr(source_lang)} datatype="plaintext"/>\n  <body>\n'
    )
    for name, pairs in documents:
        note = f'<prop type="x-document">{_text(name)}</prop>' if name else ""
        for source, target in pairs:
            if target is None or not source.strip():
                continue
            yield f"    <tu>{note}{_tuv(source_lang, source)}{_tuv(target_lang, target)}</tu>\n"
    yield "  </body>\n</tmx>\n"


def _tuv(lang: str, text: str) -> str:
    return f"<tuv xml:lang={quoteattr(lang)}><seg>{_inline(text, TMX_CODES)}</seg></tuv>"
