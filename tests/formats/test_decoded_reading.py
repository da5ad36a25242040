"""Text documents (HTML, SRT, PO) are read as their bytes are decoded, entry by entry.

The whole text never exists while a document is read: a refused one costs what was read
before its limit, an accepted one about its segments. Python's allocations are measured
with tracemalloc (memory, not time); bench/parsing.py measures the process's peak RSS
for the same shapes (docs/design/parsing.md).
"""

from __future__ import annotations

import gc
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from bench.parsing import docx_paragraphs, html_paragraphs, po, srt, xliff
from stapel.exceptions import TooLarge, ValidationError
from stapel.formats import Limits, Options, parse_document, pokeep, render_document
from stapel.formats.po import encode, parse_po, units
from stapel.formats.reading import decode_pieces, iter_lines
from tests.formats.samples import PO

CORPUS = Path(__file__).parent / "corpus"
MiB = 1 << 20


def _peak(read) -> int:
    """The peak of Python's allocations while read() runs: the lower of two runs, since
    tracemalloc counts every thread's, and a thread another test left behind in this
    process may allocate during one of them."""
    peaks = []
    for _ in range(2):
        gc.collect()
        tracemalloc.start()
        try:
            read()
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    return min(peaks)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("a.html", html_paragraphs(1_000_000)),  # 7.6 MiB
        ("a.srt", srt(200_000)),  # 8.1 MiB
    ],
)
def test_a_refused_text_document_is_never_decoded_whole(name, data):
    def read():
        with pytest.raises(TooLarge, match="limit"):
            parse_document(name, data, Limits(max_segments=100))

    assert _peak(read) < MiB  # decoded whole it was at least the body


REFUSED = {
    "a.html": lambda: html_paragraphs(1_000_000),
    "a.srt": lambda: srt(200_000),
    "a.po": lambda: po(250_000),
    "a.xlf": lambda: xliff(100_000),
    "a.docx": lambda: docx_paragraphs(100_000),
}


def spooled(data: bytes) -> tempfile.SpooledTemporaryFile:
    """The file as the multipart reader leaves it: spooled to disk past 1 MiB."""
    file = tempfile.SpooledTemporaryFile(1 << 20)
    file.write(data)
    file.seek(0)
    return file


@pytest.mark.parametrize("name", REFUSED)
def test_a_refused_document_is_read_from_its_file_never_whole(name):
    data = REFUSED[name]()
    with spooled(data) as file:

        def read():
            with pytest.raises(TooLarge, match="limit"):
                parse_document(name, file, Limits(max_segments=100))

        peak = _peak(read)
    assert peak < MiB, f"{peak / MiB:.1f} MiB of a {len(data) / MiB:.1f} MiB file"


def test_an_accepted_document_keeps_the_bytes_of_its_file():
    with spooled(srt(3)) as file:
        parsed = parse_document("a.srt", file, Limits())
    assert parsed.original == srt(3) and len(parsed.segments) == 3


def test_an_accepted_po_costs_about_its_segments_not_its_entries():
    data = po(40_000)  # 1.1 MiB
    parsed = []
    peak = _peak(lambda: parsed.append(parse_document("a.po", data, Limits())))
    assert len(parsed[0].segments) == 40_000
    assert peak <= 3 * len(data), f"{peak / len(data):.1f}x the body"  # polib built: 25x


def test_an_html_file_of_newlines_keeps_no_list_of_its_lines():
    data = b"<p>a</p>" + b"\n" * (2 * MiB)
    peak = _peak(lambda: parse_document("a.html", data, Limits()))
    assert peak <= 3 * len(data), f"{peak / len(data):.1f}x the body"  # a start per line: 37x


def test_a_line_over_its_bound_is_refused_before_it_is_held_whole():
    data = b'msgid "' + b"x" * 5000 + b'"\nmsgstr ""\n'
    with pytest.raises(ValidationError, match="longer than 1000 characters"):
        parse_document("a.po", data, Limits(max_line_chars=1000))


PO_FILES = {"sample": PO} | {p.name: p.read_bytes() for p in sorted(CORPUS.glob("*.po*"))}
PO_TRICKS = (
    b'# comment\nmsgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    b'#, fuzzy, python-format\nmsgctxt "menu"\nmsgid ""\n"File %s"\nmsgstr ""\n\n'
    b'msgid "one"\nmsgid_plural "many"\nmsgstr[0] ""\nmsgstr[1] ""\n\n'
    b'msgid "done"\nmsgstr "fertig"\n\n#~ msgid "old"\n#~ msgstr ""\n\n'
    b'#| msgid "before"\nmsgid "tab\\there \\"quoted\\""\nmsgstr ""\n'
)


@pytest.mark.parametrize("options", [Options(), Options(overwrite_targets=True)])
@pytest.mark.parametrize(
    "data",
    [*PO_FILES.values(), PO_TRICKS, PO_TRICKS.replace(b"\n", b"\r\n"), b"\xef\xbb\xbf" + PO],
    ids=[*PO_FILES, "tricks", "crlf", "bom"],
)
def test_the_streamed_po_gives_the_segments_the_rebuild_walks(data, options):
    """merge fills the entries polib.pofile reads: the stream must find the same ones,
    or targets land in wrong entries."""
    walked = [encode(text)[0] for unit in units(parse_po(data)[0], options) for text in unit.texts]
    assert walked
    assert parse_document("a.po", data, Limits(), options).segments == walked


@pytest.mark.parametrize("size", [1, 2, 3, 5, 64])
def test_lines_read_in_pieces_are_the_lines_of_the_whole_text(size):
    text = "a\r\nb\rc\n\nd\x85e\u2028f\r\r\ng é\r"
    pieces = [text[at : at + size] for at in range(0, len(text), size)]
    assert list(iter_lines(pieces, 100)) == text.splitlines(keepends=True)
    assert "".join(decode_pieces(b"\xef\xbb\xbf" + text.encode())) == text


def test_writing_a_po_back_holds_one_entry_at_a_time():
    """A download rebuilds the file entry by entry from the original's lines
    (pokeep.rewrite): about 7 times the file, where polib's entries for the file held
    three times over were about 80 times."""
    data = po(20_000)
    targets: list[str | None] = [f"X {s}" for s in parse_document("a.po", data, Limits()).segments]
    peak = _peak(lambda: render_document("po", data, targets, Options(), ("en", "de")))
    assert peak <= 12 * len(data), f"{peak / len(data):.1f} times the file"


def test_a_po_is_written_back_without_building_it_whole(monkeypatch):
    """The corpus files and a file without a header take the entry-by-entry path, and a
    file without a header gets none added."""

    def whole(*_args):
        raise AssertionError("merge and restore built the file whole")

    monkeypatch.setattr(pokeep, "restore", whole)
    files = [p.read_bytes() for p in sorted(CORPUS.rglob("*.po"))] + [po(3), PO]
    for data in files:
        segments = parse_document("a.po", data, Limits()).segments
        out = render_document("po", data, [f"X {s}" for s in segments], Options(), ("en", "de"))
        assert [u.entry.msgstr for u in units(parse_po(out)[0], Options(overwrite_targets=True))]
    out = render_document("po", po(3), ["X a", "X b", "X c"], Options(), ("en", "de"))
    assert not out.startswith(b'#\nmsgid ""') and b'msgstr "X a"' in out
