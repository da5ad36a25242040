"""Property tests: parsing keeps segments exactly; results read back what was written."""

from __future__ import annotations

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from app.api.parsing import Limits, parse_json
from app.api.streams import read_json
from app.api.uploads import parse_upload
from stapel import chunks as ch
from stapel import jobs
from stapel.keys import create_key
from stapel.tables import Chunk

LIMITS = Limits(max_segments=1000, max_segment_chars=200, max_documents=20, max_metadata_bytes=4096)
PAIRS = ["en-de"]
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60
)
LINE = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\n\r\ufeff"), max_size=60
)
FAST = settings(
    max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
)


@FAST
@given(st.lists(TEXT, min_size=1, max_size=30))
def test_json_segments_round_trip(segments):
    spec = parse_json(
        {"source_lang": "en", "target_lang": "de", "segments": segments}, PAIRS, LIMITS, None
    )
    assert [d.segments for d in spec.documents] == [segments]


@FAST
@given(st.lists(st.lists(TEXT, min_size=1, max_size=5), min_size=1, max_size=5))
def test_json_documents_round_trip(documents):
    body = {
        "source_lang": "en",
        "target_lang": "de",
        "documents": [{"id": f"d{i}", "segments": s} for i, s in enumerate(documents)],
    }
    spec = parse_json(body, PAIRS, LIMITS, None)
    assert [d.segments for d in spec.documents] == documents
    assert [d.name for d in spec.documents] == [f"d{i}" for i in range(len(documents))]


@FAST
@given(st.lists(LINE, min_size=1, max_size=30), st.booleans(), st.booleans())
def test_upload_lines_round_trip_with_empty_lines_kept(lines, crlf, final_newline):
    if lines[-1] == "":
        final_newline = True  # without it, a last empty line cannot be told from none
    text = ("\r\n" if crlf else "\n").join(lines) + (
        ("\r\n" if crlf else "\n") if final_newline else ""
    )
    boundary, body = encode_multipart(
        {
            "source_lang": "en",
            "files": FileStorage(io.BytesIO(text.encode("utf-8")), filename="doc.txt"),
            "target_lang": "de",
        }
    )
    spec = parse_upload(io.BytesIO(body), boundary.encode(), PAIRS, LIMITS, None)
    assert spec.documents[0].segments == lines


class Trickle(io.BytesIO):
    """A request stream that hands over at most `step` bytes per read."""

    def __init__(self, data: bytes, step: int) -> None:
        super().__init__(data)
        self.step = step

    def read(self, size: int = -1) -> bytes:
        return super().read(self.step if size < 0 else min(size, self.step))


@FAST
@given(
    st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), max_size=20),
    st.booleans(),
    st.integers(1, 64),
)
def test_streamed_json_reads_what_json_reads(segments, ascii_only, step):
    """Escapes (surrogate pairs included) split across reads decode exactly as json does."""
    body = {"source_lang": "en", "target_lang": "de", "segments": segments, "metadata": {"k": 1}}
    raw = json.dumps(body, ensure_ascii=ascii_only).encode()
    streamed = read_json(
        Trickle(raw, step), max_segments=100, max_segment_chars=200, max_documents=5
    )
    assert streamed == json.loads(raw)


def test_results_round_trip_through_the_api(app, client, auth, api_key):
    sessions = app.extensions["stapel"].sessions
    with sessions() as s:
        from stapel.keys import hash_key
        from stapel.tables import ApiKey

        tenant_id = s.scalar(select(ApiKey.tenant_id).where(ApiKey.key_hash == hash_key(api_key)))

    @settings(
        max_examples=20, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(
        st.lists(st.lists(TEXT, min_size=1, max_size=6), min_size=1, max_size=4), st.integers(1, 4)
    )
    def check(documents, chunk_size):
        with sessions() as s:
            job, _ = jobs.create_job(
                s,
                tenant_id,
                jobs.JobSpec(
                    "en", "de", [jobs.DocumentSpec(f"d{i}", d) for i, d in enumerate(documents)]
                ),
                gpu_threshold=10**9,
                chunk_segments=chunk_size,
            )
            flat = [t for d in documents for t in d]
            targets = [t[::-1] + "✓" for t in flat]
            for chunk_id, first, end in s.execute(
                select(Chunk.id, Chunk.first_segment, Chunk.end_segment)
                .where(Chunk.job_id == job.id)
                .order_by(Chunk.idx.desc())
            ):
                claim = ch.claim_chunk(s, chunk_id, "w")
                ch.record_batch(s, claim, [(i, targets[i]) for i in range(first, end)])
                ch.finish_chunk(s, claim)
            job_id = job.id
        result = client.get(f"/v1/jobs/{job_id}/result", headers=auth).get_json()
        assert result["complete"] is True
        expected, start = [], 0
        for d in documents:
            expected.append(targets[start : start + len(d)])
            start += len(d)
        assert [d["segments"] for d in result["documents"]] == expected

    check()


def test_keys_are_shown_once_and_stored_hashed(app):
    with app.extensions["stapel"].sessions() as s:
        row, plain = create_key(s, "acme")
        assert plain not in (row.key_hash, row.prefix) and len(row.key_hash) == 64
