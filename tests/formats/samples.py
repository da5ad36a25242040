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


XLIFF12 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="ui.html" source-language="en" datatype="html">
    <body>
      <trans-unit id="1">
        <source>The <g id="1">old man</g> sees the small dog.</source>
      </trans-unit>
      <trans-unit id="2" translate="no">
        <source>The cat sleeps.</source>
      </trans-unit>
      <trans-unit id="3">
        <source>We have bought <x id="2"/> a new car.</source>
        <target>Wir haben schon eins.</target>
      </trans-unit>
      <group translate="no">
        <trans-unit id="4"><source>The dog sleeps.</source></trans-unit>
      </group>
      <trans-unit id="5">
        <source>The <bpt id="5">&lt;b&gt;</bpt>dog<ept id="5">&lt;/b&gt;</ept> sleeps.</source>
        <note>Keep it short.</note>
      </trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF2 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.1" srcLang="en">
  <file id="f1">
    <unit id="u1">
      <segment id="s1">
        <source>The <pc id="1">old man</pc> sees the small dog.</source>
      </segment>
      <ignorable><source> </source></ignorable>
      <segment id="s2" state="final">
        <source>The dog sleeps.</source>
        <target>Der Hund schlaeft.</target>
      </segment>
    </unit>
    <group id="g1" translate="no">
      <unit id="u2"><segment><source>The cat sleeps.</source></segment></unit>
      <unit id="u3" translate="yes"><segment>
        <source>We have bought <ph id="2"/> a new car.</source></segment></unit>
    </group>
    <unit id="u4"><segment>
      <source>The <sc id="3"/>small dog<ec startRef="3"/> sleeps.</source></segment></unit>
  </file>
</xliff>
"""

PO = b"""# German translation of the demo.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\\n"

#: app.py:10
msgid "The old man sees %s the small dog."
msgstr ""

#, python-format
msgid "%(count)d dog sleeps."
msgid_plural "%(count)d dogs sleep."
msgstr[0] ""
msgstr[1] ""

msgid "We have bought {name} a new car."
msgstr ""

msgid "The cat sleeps."
msgstr "Die Katze schlaeft."

#~ msgid "The old dog."
#~ msgstr "Der alte Hund."
"""

SRT = (
    b"1\r\n00:00:01,000 --> 00:00:03,500\r\nThe old man sees\r\nthe <i>small dog</i>.\r\n\r\n"
    b"2\r\n00:00:04,000 --> 00:00:05,000 X1:40 X2:600\r\n{\\an8}We have bought a new car.\r\n\r\n"
    b"3\r\n0:00:06,5 --> 0:00:07,25\r\nThe cat sleeps.\r\n"
)

HTML = b"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>The old man</title>
<style>p { color: red; }</style>
<script>var s = "<b>The dog</b>";</script>
</head>
<body>
  <p>The <b>old man</b> sees the <a href="/dog?a=1&amp;b=2">small dog</a>.</p>
  <p class="notranslate">The dog sleeps.</p>
  <p>We have bought <img src="car.png" alt="The new car" title="The car"> a new car.</p>
  <div translate="no"><p>The cat sleeps.</p></div>
  <p>The <code>old man</code> sleeps.</p>
</body>
</html>
"""


def sample_docx() -> bytes:
    """Bold and a hyperlink in the body, a table, a tab, a header and a footnote."""
    table = f"<w:tbl><w:tr><w:tc><w:p>{run('The cat sleeps.')}</w:p></w:tc></w:tr></w:tbl>"
    body = [
        run("The ") + run("old man", BOLD) + run(" sees the small dog."),
        '<w:hyperlink r:id="rId9">' + run("We have bought a new car.") + "</w:hyperlink>",
        run("The dog") + "<w:r><w:tab/></w:r>" + run("sleeps."),
    ]
    doc = docx(body, header=run("The dog sleeps."), footnote=run("The old man sleeps."))
    return _with_table(doc, table)


def _with_table(doc: bytes, table: str) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(doc))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "word/document.xml":
                data = data.replace(b"<w:sectPr>", table.encode() + b"<w:sectPr>")
            z.writestr(info, data)
    return out.getvalue()
