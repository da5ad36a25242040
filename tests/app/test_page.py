"""The page at `/` and the API it needs: headers, static files, progress by document, zip.

What the page does in a browser is tests/app/test_page_browser.py; these check what the
server promises it: a policy with no inline code, no cookie, files from this origin.
"""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from sqlalchemy import event, select, update

from app.page import CSP
from stapel.formats import EXTENSIONS
from stapel.states import Status
from stapel.tables import Chunk, Job, Segment
from tests.formats.samples import PO, SRT
from tests.formats.test_api import finish
from tests.formats.test_bad_input import upload


def test_page_is_served_with_a_strict_policy_and_no_inline_code(client):
    response = client.get("/")
    assert response.status_code == 200 and response.mimetype == "text/html"
    policy = response.headers["Content-Security-Policy"]
    assert policy == CSP
    assert "'unsafe-inline'" not in policy and "script-src 'self'" in policy
    assert "Set-Cookie" not in response.headers
    page = response.get_data(as_text=True)
    assert not re.search(r"<script(?![^>]*\bsrc=)", page), "every script is a file"
    assert not re.search(r"<style|\sstyle=|\son\w+=", page), "no inline style or handler"
    assert not re.search(r"""(src|href)=['"]?(https?:)?//""", page), "nothing third-party"
    for ext in EXTENSIONS:
        assert ext in page, f"{ext} is offered for upload"


def test_static_files_are_served_from_this_origin(client):
    for name, kind in (("page.js", "javascript"), ("page.css", "text/css")):
        response = client.get(f"/static/{name}")
        assert response.status_code == 200 and kind in response.content_type
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    script = client.get("/static/page.js").get_data(as_text=True)
    assert "sessionStorage" in script and "localStorage" not in script
    assert "document.cookie" not in script


@pytest.fixture
def settings_overrides(settings_overrides):
    """Chunks of 3 segments, so chunks lie inside documents and across their boundaries."""
    return {**settings_overrides, "chunk_segments": 3}


def mark_ended(app, job_id: str, translated: set[int], failed: set[int]) -> None:
    """Write targets and errors, and each chunk's count of ended segments, as a worker does."""
    with app.extensions["stapel"].sessions() as s:
        s.execute(
            update(Segment)
            .where(Segment.job_id == job_id, Segment.idx.in_(translated))
            .values(target="x")
        )
        s.execute(
            update(Segment)
            .where(Segment.job_id == job_id, Segment.idx.in_(failed))
            .values(error_code="translation_failed", error="e")
        )
        for chunk in s.scalars(select(Chunk).where(Chunk.job_id == job_id)):
            ended = translated | failed
            chunk.done = sum(chunk.first_segment <= i < chunk.end_segment for i in ended)
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(
                status=Status.RUNNING,
                segments_done=len(translated | failed),
                segments_failed=len(failed),
                started_at=Job.created_at,
            )
        )
        s.commit()


def test_documents_show_progress_by_document_for_the_owner_only(app, client, auth, other_key):
    sizes = [2, 5, 1]  # chunks [0, 3) [3, 6) [6, 8): documents [0, 2) [2, 7) [7, 8)
    documents = [{"id": f"d{i}.txt", "segments": ["a."] * n} for i, n in enumerate(sizes)]
    body = {"source_lang": "en", "target_lang": "de", "documents": documents}
    job_id = client.post("/v1/jobs", json=body, headers=auth).get_json()["id"]
    body = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()
    assert [d["segments_total"] for d in body["documents"]] == sizes
    assert all(d["segments_done"] == 0 for d in body["documents"])
    assert body["pace"] == {"elapsed_s": None, "rate_per_s": None, "remaining_s": None}

    # a full chunk across a boundary, a chunk inside a document, a part-done one across one
    mark_ended(app, job_id, translated={0, 1, 2, 7}, failed={3})
    body = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()
    assert [(d["segments_done"], d["segments_failed"]) for d in body["documents"]] == [
        (2, 0),
        (2, 1),
        (1, 0),
    ]
    assert sum(d["segments_done"] for d in body["documents"]) == body["segments_done"]
    assert body["pace"]["elapsed_s"] >= 0 and body["pace"]["remaining_s"] is not None
    assert [d["format"] for d in body["documents"]] == ["txt"] * 3
    assert body["documents"][1]["links"]["file"].endswith("format=file&document=1")
    other = {"Authorization": f"Bearer {other_key}"}
    assert client.get(f"/v1/jobs/{job_id}/documents", headers=other).status_code == 404


def test_a_job_said_ended_has_every_document_counted(app, client, auth):
    """The job ends right after its chunks' counts are read: the answer may still call it
    running, never ended with documents left short (the page then stops reading them)."""
    sizes = [2, 5, 1]
    documents = [{"id": f"d{i}.txt", "segments": ["a."] * n} for i, n in enumerate(sizes)]
    body = {"source_lang": "en", "target_lang": "de", "documents": documents}
    job_id = client.post("/v1/jobs", json=body, headers=auth).get_json()["id"]
    engine = app.extensions["stapel"].engine
    ended: list[str] = []

    def end_after_the_counts(_conn, _cursor, statement, *_args) -> None:
        if ended or not re.search(r"\bFROM chunks\b", statement):
            return
        ended.append(statement)
        mark_ended(app, job_id, translated=set(range(sum(sizes))), failed=set())
        with app.extensions["stapel"].sessions() as s:
            s.execute(update(Job).where(Job.id == job_id).values(status=Status.SUCCEEDED))
            s.execute(update(Chunk).where(Chunk.job_id == job_id).values(status=Status.SUCCEEDED))
            s.commit()

    event.listen(engine, "after_cursor_execute", end_after_the_counts)
    try:
        body = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()
    finally:
        event.remove(engine, "after_cursor_execute", end_after_the_counts)
    assert ended, "the job ended while the answer was being read"
    done = [d["segments_done"] for d in body["documents"]]
    assert body["status"] == Status.QUEUED and done == [0, 0, 0], body
    body = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()
    assert body["status"] == Status.SUCCEEDED
    assert [d["segments_done"] for d in body["documents"]] == sizes


@pytest.mark.parametrize(
    ("sizes", "ended"),
    [
        ([1] * 7, {0, 2, 3, 4, 6}),  # several documents in each chunk
        ([4, 0, 3], {1, 2, 3, 5}),  # an empty document at a chunk boundary
        ([8], {0, 4, 5, 7}),  # one document over every chunk
        ([3, 3, 2], set(range(8))),  # everything ended
    ],
)
def test_progress_by_document_matches_counting_every_segment(app, client, auth, sizes, ended):
    documents = [{"id": f"d{i}.txt", "segments": ["a."] * n} for i, n in enumerate(sizes)]
    body = {"source_lang": "en", "target_lang": "de", "documents": documents}
    created = client.post("/v1/jobs", json=body, headers=auth)
    assert created.status_code == 202, created.get_json()
    job_id = created.get_json()["id"]
    mark_ended(app, job_id, translated=ended, failed=set())
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    want = [sum(s <= i < s + n for i in ended) for s, n in zip(starts, sizes, strict=True)]
    got = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()["documents"]
    assert [d["segments_done"] for d in got] == want


def test_documents_name_each_uploaded_format(client, auth):
    response = upload(client, auth, [("app.po", PO), ("subs.srt", SRT)])
    body = client.get(f"/v1/jobs/{response.get_json()['id']}/documents", headers=auth)
    assert [(d["name"], d["format"]) for d in body.get_json()["documents"]] == [
        ("app.po", "po"),
        ("subs.srt", "srt"),
    ]


def test_zip_of_several_documents_is_streamed_and_holds_each_file(app, client, auth):
    response = upload(client, auth, [("app.po", PO), ("subs.srt", SRT), ("b.srt", SRT)])
    job_id = response.get_json()["id"]
    finish(app, job_id)
    response = client.get(f"/v1/jobs/{job_id}/result?format=file", headers=auth)
    assert response.status_code == 200 and response.mimetype == "application/zip"
    assert response.is_streamed
    archive = zipfile.ZipFile(io.BytesIO(response.get_data()))
    assert archive.testzip() is None
    assert archive.namelist() == ["app.po", "subs.srt", "b.srt"]
    one = client.get(f"/v1/jobs/{job_id}/result?format=file&document=1", headers=auth)
    assert archive.read("subs.srt") == one.get_data()


def test_a_job_of_plain_segments_is_one_text_document(client, auth):
    body = {"source_lang": "en", "target_lang": "de", "segments": ["a.", "b.", "c.", "d."]}
    job_id = client.post("/v1/jobs", json=body, headers=auth).get_json()["id"]
    got = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()["documents"]
    assert [(d["index"], d["name"], d["format"], d["segments_total"]) for d in got] == [
        (0, None, "txt", 4)
    ]
