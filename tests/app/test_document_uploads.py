"""An uploaded document is parsed from the file the multipart reader spooled it to: its
bytes are read whole only once it is accepted, so a refused one is never held."""

from __future__ import annotations

import tracemalloc

import pytest

from app.api.parsing import Limits
from app.api.uploads import parse_document
from bench.parsing import srt
from stapel.exceptions import TooLarge
from tests.formats.test_decoded_reading import spooled

LIMITS = Limits(max_segments=100, max_segment_chars=4000, max_documents=10, max_metadata_bytes=1)


def test_a_refused_document_is_never_read_whole(app):
    data = srt(200_000)  # 8.1 MiB
    with app.test_request_context(), spooled(data) as file:
        tracemalloc.start()
        try:
            with pytest.raises(TooLarge, match="limit"):
                parse_document(0, "a.srt", file, LIMITS, 100)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < len(data) / 8, f"{peak / len(data):.2f}x the file"  # read whole: over 1x


def test_an_accepted_document_keeps_its_bytes(app):
    data = srt(3)
    with app.test_request_context(), spooled(data) as file:
        document = parse_document(0, "a.srt", file, LIMITS, 100)
    assert document.original == data and len(document.segments) == 3
