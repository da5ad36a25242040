"""Log lines: request ids, job context, secrets masked, files and JSON lines."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from stapel import logs
from stapel.settings import Settings
from tests.factories import job_body


@pytest.fixture
def captured():
    """A Stapel handler on the root logger writing to a buffer."""
    buffer = io.StringIO()
    handler = logs._handler(logging.StreamHandler(buffer), logging.INFO, json_lines=False)
    root = logging.getLogger()
    root.addHandler(handler)
    yield buffer
    root.removeHandler(handler)


def test_request_id_is_taken_from_the_header_and_stamped_on_the_request_lines(
    client, auth, captured
):
    response = client.post("/v1/jobs", json=job_body(), headers={**auth, "X-Request-ID": "abc-1"})
    assert response.status_code == 202
    assert response.headers["X-Request-ID"] == "abc-1"
    job_id = response.get_json()["id"]
    (line,) = [x for x in captured.getvalue().splitlines() if "job created" in x]
    assert f"logid={job_id}" in line and "request_id=abc-1" in line


def test_request_id_is_made_when_missing_or_malformed(client, auth):
    made = client.get("/v1/languages", headers=auth).headers["X-Request-ID"]
    for bad in ("a b", "x" * 300, "<script>"):
        echoed = client.get("/v1/languages", headers={**auth, "X-Request-ID": bad})
        assert echoed.headers["X-Request-ID"] not in (bad, made)
    assert len(made) == 32


def test_lines_inside_a_request_for_a_job_carry_its_logid(client, auth, captured):
    job_id = client.post("/v1/jobs", json=job_body(), headers=auth).get_json()["id"]
    client.post(f"/v1/jobs/{job_id}/cancel", headers=auth)
    assert client.post(f"/v1/jobs/{job_id}/cancel", headers=auth).status_code == 409
    logging.getLogger("test").info("unrelated")
    cancelled = [x for x in captured.getvalue().splitlines() if "job cancelled" in x]
    assert cancelled and f"logid={job_id}" in cancelled[0] and "request_id=" in cancelled[0]
    assert "logid=" not in captured.getvalue().splitlines()[-1]


def test_job_context_adds_logid_and_chunk_once(captured):
    log = logging.getLogger("stapel.test")
    with logs.job_context("job-1", 3):
        log.info("database unavailable, retrying")
        log.info("chunk done logid=job-1 chunk=3")
    first, second = captured.getvalue().splitlines()
    assert first.endswith("logid=job-1 chunk=3")
    assert second.count("logid=") == 1 and second.count("chunk=") == 1


def test_keys_and_bearer_tokens_are_masked(captured):
    logging.getLogger("stapel.test").warning(
        "bad header Bearer stp_secretvalue123 key=%s", "stp_another_secret"
    )
    line = captured.getvalue()
    assert "secretvalue" not in line and "another_secret" not in line
    assert "Bearer ***" in line and "stp_***" in line


def test_files_split_by_level_and_json_lines(tmp_path):
    root = logging.getLogger()
    before = list(root.handlers)
    logs.add_file_handlers(tmp_path, json_lines=True)
    try:
        log = logging.getLogger("stapel.test")
        with logs.job_context("job-9", 1):
            log.info("chunk claimed")
            log.warning("chunk requeued")
        log.debug("not written")
        logging.getLogger(logs.TRACER_LOGGER).info("tracer block")
    finally:
        tracer = logging.getLogger(logs.TRACER_LOGGER)
        for handler in set(root.handlers) - set(before):
            root.removeHandler(handler)
            handler.close()
        for handler in list(tracer.handlers):
            tracer.removeHandler(handler)
            handler.close()
    info = [json.loads(x) for x in (tmp_path / "stapel.log").read_text().splitlines()]
    warnings = [json.loads(x) for x in (tmp_path / "stapel.log.wf").read_text().splitlines()]
    assert [r["message"] for r in info] == ["chunk claimed", "chunk requeued"]
    assert [(r["level"], r["logid"], r["chunk"]) for r in warnings] == [("WARNING", "job-9", "1")]
    assert "tracer block" in (tmp_path / "stapel.tracer").read_text()
    assert "tracer block" not in (tmp_path / "stapel.log").read_text()


def test_log_settings_come_from_the_environment():
    assert Settings.from_env({}).log_dir is None
    assert Settings.from_env({"STAPEL_LOG_DIR": "var/log"}).log_dir == Path("var/log")
    assert Settings.from_env({"STAPEL_LOG_JSON": "1"}).log_json is True
    assert Settings.from_env({"STAPEL_LOG_JSON": "0"}).log_json is False
