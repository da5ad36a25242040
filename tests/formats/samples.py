"""Sample documents for the format tests, built in code (factories, not fixture files)."""

from __future__ import annotations

import io
import zipfile

from stapel.formats import inline

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
OOXML = "http://schemas.openxmlformats.org"
WML = "application/vnd.openxmlformats-officedocument.wordprocessingml"
REL = f"{OOXML}/officeDocument/2006/relationships"
HEAD = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
CONTENT_TYPES = (
    f'{HEAD}<Types xmlns="{OOXML}/package/2006/content-types">'
    '<Default Extension="rels" '
    'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    f'<Override PartName="/word/document.xml" ContentType="{WML}.document.main+xml"/>'
    f'<Override PartName="/word/header1.xml" ContentType="{WML}.header+xml"/>'
    f'<Override PartName="/word/footnotes.xml" ContentType="{WML}.footnotes+xml"/>'
    "</Types>"
)


def _rels(*rels: tuple[str, str, str]) -> str:
    items = "".join(
        f'<Relationship Id="{i}" Type="{REL}/{kind}" Target="{target}"'
        + (' TargetMode="External"/>' if target.startswith("http") else "/>")
        for i, kind, target in rels
    )
    return (
        f'{HEAD}<Relationships xmlns="{OOXML}/package/2006/relationships">{items}</Relationships>'
    )


ROOT_RELS = _rels(("rId1", "officeDocument", "word/document.xml"))
DOC_RELS = _rels(
    ("rId2", "header", "header1.xml"),
    ("rId3", "footnotes", "footnotes.xml"),
    ("rId9", "hyperlink", "https://example.com/"),
)

BOLD = "<w:rPr><w:b/></w:rPr>"


def run(text: str, rpr: str = "") -> str:
    space = ' xml:space="preserve"' if text != text.strip() else ""
    return f"<w:r>{rpr}<w:t{space}>{text}</w:t></w:r>"


def docx(paragraphs: list[str], header: str = "", footnote: str = "") -> bytes:
    """A minimal Word document: body paragraphs (inner XML of w:p), a header and a footnote."""
    body = "".join(f"<w:p>{p}</w:p>" for p in paragraphs)
    document = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<w:document xmlns:w="{W}" xmlns:r="{R}"><w:body>{body}'
        f'<w:sectPr><w:headerReference w:type="default" r:id="rId2"/></w:sectPr>'
        f"</w:body></w:document>"
    )
    parts = {
        "[Content_Types].xml": CONTENT_TYPES,
        "_rels/.rels": ROOT_RELS,
        "word/_rels/document.xml.rels": DOC_RELS,
        "word/document.xml": document,
        "word/header1.xml": f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<w:hdr xmlns:w="{W}"><w:p>{header}</w:p></w:hdr>',
        "word/footnotes.xml": f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<w:footnotes xmlns:w="{W}"><w:footnote w:id="1"><w:p>{footnote}</w:p></w:footnote>'
        f"</w:footnotes>",
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts.items():
            z.writestr(name, text.encode())
    return out.getvalue()


def tags(text: str) -> str:
    """Write a segment with readable tags (<1>, </1>, <1/>) as markers."""
    import re

    def mark(m: re.Match) -> str:
        kind = "close" if m.group(1) else "point" if m.group(3) else "open"
        return inline.marker(kind, int(m.group(2)))

    return re.sub(r"<(/?)(\d+)(/?)>", mark, text)
