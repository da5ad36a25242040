"""The page at `/` and the API it needs: headers, static files, progress by document, zip.

What the page does in a browser is tests/app/test_page_browser.py; these check what the
server promises it: a policy with no inline code, no cookie, files from this origin.
"""

from __future__ import annotations

import io
import re
import zipfile

from sqlalchemy import update

from app.page import CSP
from stapel.formats import EXTENSIONS
from stapel.states import Status
from stapel.tables import Job, Segment
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


def test_documents_show_progress_by_document_for_the_owner_only(app, client, auth, other_key):
    response = upload(client, auth, [("app.po", PO), ("subs.srt", SRT)])
    job_id = response.get_json()["id"]
    body = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()
    assert [d["format"] for d in body["documents"]] == ["po", "srt"]
    assert all(d["segments_done"] == 0 for d in body["documents"])
    assert body["pace"] == {"elapsed_s": None, "rate_per_s": None, "remaining_s": None}
    po_total = body["documents"][0]["segments_total"]
    with app.extensions["stapel"].sessions() as s:  # the PO document translated, as a worker
        s.execute(
            update(Segment)
            .where(Segment.job_id == job_id, Segment.idx < po_total)
            .values(target="x")
        )
        s.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status=Status.RUNNING, segments_done=po_total, started_at=Job.created_at)
        )
        s.commit()
    body = client.get(f"/v1/jobs/{job_id}/documents", headers=auth).get_json()
    first, second = body["documents"]
    assert first["segments_done"] == first["segments_total"] == po_total
    assert second["segments_done"] == 0 and second["segments_total"] > 0
    assert body["pace"]["elapsed_s"] >= 0
    assert first["links"]["file"].endswith("format=file&document=0")
    other = {"Authorization": f"Bearer {other_key}"}
    assert client.get(f"/v1/jobs/{job_id}/documents", headers=other).status_code == 404


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
