"""Request bodies are read as streams within limits; heads are bounded by the server."""

from __future__ import annotations

import io
import json
import socket

import pytest
from sqlalchemy import func, select

from stapel.tables import Document, Job
from tests.conftest import free_port
from tests.factories import job_body
from tests.workers_proc import web_process


def job_count(app) -> int:
    with app.extensions["stapel"].sessions() as s:
        return s.scalar(select(func.count()).select_from(Job))


def upload(client, auth, files, **form):
    data = {"source_lang": "en", "target_lang": "de", **form}
    data["files"] = [(io.BytesIO(content), name) for name, content in files]
    return client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")


def test_an_upload_of_1500_files_is_one_job_of_1500_documents(app, client, auth):
    files = [(f"part{n:04}.txt", f"line {n}\n".encode()) for n in range(1500)]
    response = upload(client, auth, files)
    assert response.status_code == 202, response.get_json()
    job = response.get_json()
    assert job["documents_total"] == 1500 and job["segments_total"] == 1500
    with app.extensions["stapel"].sessions() as s:
        names = s.scalars(
            select(Document.name).where(Document.job_id == job["id"]).order_by(Document.idx)
        ).all()
    assert names == [name for name, _ in files]


def test_one_file_more_than_the_document_limit_is_413(app, client, auth):
    limit = app.extensions["stapel"].settings.max_documents_per_job
    app.extensions["stapel"].settings = app.extensions["stapel"].settings.replace(
        max_documents_per_job=3
    )
    response = upload(client, auth, [(f"{n}.txt", b"x\n") for n in range(4)])
    assert response.status_code == 413 and limit == 10_000
    assert response.get_json()["error"]["code"] == "too_many_documents"
    assert job_count(app) == 0


@pytest.mark.parametrize(
    ("files", "code"),
    [
        ([("long.txt", b"y" * 20_000)], "segment_too_long"),  # one line, no newline at all
        ([("a.txt", b"ok\n"), ("b.txt", b"\xff\n")], "invalid_encoding"),
    ],
)
def test_a_bad_file_stops_the_upload(app, client, auth, files, code):
    response = upload(client, auth, files)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == code
    assert job_count(app) == 0


def test_more_lines_than_the_segment_limit_is_413(app, client, auth):
    app.extensions["stapel"].settings = app.extensions["stapel"].settings.replace(
        max_segments_per_job=10
    )
    response = upload(client, auth, [("a.txt", b"x\n" * 6), ("b.txt", b"y\n" * 6)])
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "too_many_segments"


def test_fields_after_the_files_count_too(client, auth):
    data = {
        "files": [(io.BytesIO(b"hello\n"), "a.txt")],
        "source_lang": "en",
        "target_lang": "de",
        "split_sentences": "false",
    }
    response = client.post("/v1/jobs", data=data, headers=auth, content_type="multipart/form-data")
    assert response.status_code == 202, response.get_json()
    assert response.get_json()["split_sentences"] is False


def test_deeply_nested_json_is_400_not_500(app, client, auth):
    body = '{"source_lang": "en", "target_lang": "de", "segments": ["a"], "metadata": {"k": '
    nested = body + "[" * 10_000 + "]" * 10_000 + "}}"
    response = client.post("/v1/jobs", data=nested, headers=auth, content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_json"
    assert "nested deeper than" in response.get_json()["error"]["message"]
    assert job_count(app) == 0


def test_metadata_of_200k_values_is_refused_before_it_is_built(client, auth):
    raw = json.dumps(job_body(metadata={"k": list(range(200_000))}))
    response = client.post("/v1/jobs", data=raw, headers=auth, content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_request"


def test_a_huge_json_string_is_refused_before_it_is_read_whole(client, auth):
    raw = json.dumps(job_body(callback_url="https://example.com/" + "a" * 500_000))
    response = client.post("/v1/jobs", data=raw, headers=auth, content_type="application/json")
    assert response.status_code == 400
    assert "longer than" in response.get_json()["error"]["message"]


@pytest.mark.parametrize(("value", "stored"), [(None, True), (True, True), (False, False)])
def test_split_sentences_is_a_job_option_on_by_default(client, auth, value, stored):
    body = job_body() if value is None else job_body(split_sentences=value)
    job = client.post("/v1/jobs", json=body, headers=auth).get_json()
    assert job["split_sentences"] is stored
    assert client.get(job["links"]["self"], headers=auth).get_json()["split_sentences"] is stored


def test_split_sentences_must_be_a_boolean(client, auth):
    response = client.post("/v1/jobs", json=job_body(split_sentences="maybe"), headers=auth)
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_type"


def raw_request(port: int, line: bytes) -> tuple[int, bytes, bytes]:
    """Send one raw request; return (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(line + b"\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


@pytest.fixture
def web_server(settings_overrides, tmp_path):
    """The Procfile's server (app.server: granian serving app.serve()) on a free port."""
    port = free_port()
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_BIND": f"127.0.0.1:{port}",
        "STAPEL_WEB_WORKERS": "1",
    }
    with web_process(env, port, tmp_path / "web.log"):
        yield port


@pytest.mark.process
def test_a_request_target_over_4094_bytes_is_414_in_the_api_error_shape(web_server):
    got, head, body = raw_request(web_server, b"GET /v1/jobs/" + b"x" * 4086 + b" HTTP/1.1")
    assert got == 414
    assert b"application/json" in head
    error = json.loads(body)["error"]
    assert error["code"] == "uri_too_long" and "4094" in error["message"]
    # one byte less is a target like any other: the route decides (here: no key, 401)
    assert raw_request(web_server, b"GET /v1/jobs/" + b"x" * 4085 + b" HTTP/1.1")[0] == 401


@pytest.mark.parametrize(
    ("line", "status"),
    [
        (b"GET /\x01 nonsense", 400),
        (b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 70_000, 431),
        (b"GET /healthz HTTP/1.1" + b"".join(b"\r\nX-%d: v" % n for n in range(101)), 431),
    ],
    ids=["a malformed request line", "a head over 64 KiB", "101 header fields"],
)
@pytest.mark.process
def test_the_server_refuses_what_is_not_a_sane_http_head(web_server, line, status):
    assert raw_request(web_server, line)[0] == status
    assert raw_request(web_server, b"GET /healthz HTTP/1.1")[0] == 200  # and serves on
