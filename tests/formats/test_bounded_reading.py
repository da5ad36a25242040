"""Limits are checked while a document is read, and zip entries are streamed and bounded.

A document over the segment limit is refused once it passes the limit, so what it
costs is the limit's worth, not the document's: the Python memory a refused read
allocates (tracemalloc) stays under a bound that reading the whole document passed.
bench/parsing.py measures the process's peak RSS for the same shapes.
"""

from __future__ import annotations

import io
import tracemalloc
import zipfile

import pytest

from bench.parsing import docx_of, docx_paragraphs
from stapel.exceptions import TooLarge
from stapel.formats import Limits, Options, docx, parse_document, xliff
from stapel.formats.base import parse_xml
from tests.formats.samples import XLIFF2, XLIFF12, W, sample_docx

N = 40_000
LIMIT = 100
LONG = {
    "a.html": b"<p>Hello world.</p>\n" * N,
    "a.srt": b"".join(b"%d\n00:00:01,000 --> 00:00:02,000\nHello.\n\n" % i for i in range(1, N)),
    "a.po": b"".join(b'msgid "Entry %d"\nmsgstr ""\n\n' % i for i in range(N)),
    "a.xlf": (
        b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>'
        + b'<trans-unit id="u"><source>The old man sees the small dog.</source></trans-unit>' * N
        + b"</body></file></xliff>"
    ),
    "a.docx": docx_paragraphs(N),
}


@pytest.mark.parametrize("name", LONG)
def test_a_document_over_the_segment_limit_costs_the_limits_worth(name):
    data = LONG[name]
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge) as refused:
            parse_document(name, data, Limits(max_segments=LIMIT))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.value.code == "too_many_segments"
    assert peak < 2 * 1024 * 1024, f"{peak / 2**20:.1f} MiB"


def test_an_entry_packed_beyond_the_ratio_is_refused_before_it_unpacks():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", f'<w:document xmlns:w="{W}"/>')
        with z.open("word/media/zeros.bin", "w") as member:  # 64 MiB of zeros, ~64 KB packed
            for _ in range(64):
                member.write(bytes(1 << 20))
    with pytest.raises(TooLarge, match="times its packed size; the limit is 200"):
        parse_document("a.docx", out.getvalue(), Limits())


def test_an_ordinary_document_passes_the_ratio_bound():
    assert len(parse_document("a.docx", docx_paragraphs(2000), Limits()).segments) == 2000


def test_a_paragraph_is_read_with_the_text_box_inside_it_in_document_order():
    box = (
        "<w:p><w:r><w:t>Before the box.</w:t></w:r><w:r><w:pict><w:txbxContent>"
        "<w:p><w:r><w:t>Inside the box.</w:t></w:r></w:p></w:txbxContent></w:pict></w:r></w:p>"
        "<w:p><w:r><w:t>After it.</w:t></w:r></w:p>"
    )
    data = docx_of(f'<w:document xmlns:w="{W}"><w:body>{box}</w:body></w:document>'.encode())
    segments = parse_document("a.docx", data, Limits()).segments
    assert [s.split("\ufdd2")[0] for s in segments] == [
        "Before the box.",
        "Inside the box.",
        "After it.",
    ]


MIXED = (
    b'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file><body>'
    b'<trans-unit xmlns="" id="a"><source>No namespace.</source></trans-unit>'
    b'<group translate="no"><trans-unit id="b"><source>Kept.</source></trans-unit></group>'
    b'<trans-unit id="c" approved="yes"><source>Approved.</source></trans-unit>'
    b'<trans-unit id="d"><source>One. Two.</source><seg-source><mrk mtype="seg" mid="1">One.'
    b'</mrk> <mrk mtype="seg" mid="2">Two.</mrk></seg-source></trans-unit>'
    b"</body></file></xliff>"
)


@pytest.mark.parametrize("data", [XLIFF12, XLIFF2, MIXED])
def test_a_streamed_xliff_gives_the_segments_the_rebuild_walks(data):
    """The stream and the rebuild's tree walk must agree, or targets land in wrong units."""
    tree, version = xliff._tree(data)
    walked = [
        f.text
        for s in xliff.slots(tree, version, Options())
        if (f := xliff._flat(s, version)).translatable
    ]
    assert parse_document("a.xlf", data, Limits()).segments == walked


def test_a_streamed_docx_gives_the_paragraphs_the_rebuild_walks():
    data = sample_docx()
    container, parts = docx._open(data, Limits())
    walked = [
        para.text.strip()
        for name in parts
        for para in docx._paragraphs(parse_xml(container.read(name)))
    ]
    assert parse_document("a.docx", data, Limits()).segments == walked
