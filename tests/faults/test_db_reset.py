"""PostgreSQL backends are terminated under API load: no empty 500, no short document.

The Procfile's web (granian serving the app) runs on the suite's PostgreSQL database;
clients read a job's status and stream its result while the test terminates every
backend of that database again and again (a failover or an operator's reset looks the
same to the web). Each answer must be whole: a 200 with the full document or the API's
JSON 503 with Retry-After (a result longer than app.api.bodies.BUFFERED_ITEMS streams,
and a failure then breaks the chunked body, which the client sees fail). Never a 500
with an empty body after the view succeeded (a rollback in teardown), never a 200 whose
body stops early.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
import requests
from sqlalchemy import create_engine, select, text

from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from stapel.tables import Segment
from tests.conftest import free_port
from tests.factories import sentences, wait_for
from tests.faults.conftest import fresh_engine
from tests.faults.harness import stuck_jobs
from tests.workers_proc import web_process

pytestmark = [pytest.mark.fault, pytest.mark.slow]

RESETS = 20
RESET_EVERY_S = 0.5
SEGMENTS = 400


@pytest.fixture
def web(pg_fault_url, fault_redis_url, model_root, tmp_path):
    """(base URL, auth header) of app.server on the suite's PostgreSQL database."""
    engine = fresh_engine(pg_fault_url)
    with make_session_factory(engine)() as session:
        auth = {"Authorization": f"Bearer {create_key(session, 'reset')[1]}"}
        session.commit()
    engine.dispose()
    port = free_port()
    env = {
        "DATABASE_URL": pg_fault_url,
        "REDIS_URL": fault_redis_url,
        "STAPEL_MODEL_ROOT": str(model_root),
        "STAPEL_BIND": f"127.0.0.1:{port}",
        "STAPEL_WEB_WORKERS": "1",
        "STAPEL_RATE_READ": "100000/minute",
    }
    with web_process(env, port, tmp_path / "web.log"):
        yield f"http://127.0.0.1:{port}", auth


def classify(response: requests.Response, expect_segments: int | None) -> str:
    """Name one answer: ok, 503 (the API's shape), or what is wrong with it."""
    if response.status_code == 503:
        body = response.json()
        assert "code" in body["error"] and response.headers.get("Retry-After")
        return "503"
    if response.status_code != 200:
        return f"bad_{response.status_code}_{'empty' if not response.content else 'body'}"
    try:
        body = response.json()
    except ValueError:
        return "short_200"
    if expect_segments is not None:
        got = sum(len(d["segments"]) for d in body["documents"])
        if got != expect_segments:
            return "short_200"
    return "ok"


def test_backend_terminations_give_whole_answers(web, pg_fault_url):
    base, auth = web
    body = {"source_lang": "en", "target_lang": "de", "segments": sentences(SEGMENTS)}
    job = requests.post(base + "/v1/jobs", json=body, headers=auth, timeout=30).json()["id"]
    reads = [
        (f"{base}/v1/jobs/{job}", None),
        (f"{base}/v1/jobs/{job}/result", SEGMENTS),
        (f"{base}/v1/jobs", None),
    ]
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def load(n: int) -> None:
        with requests.Session() as http:
            while not stop.is_set():
                url, expect = reads[n % len(reads)]
                n += 1
                try:
                    got = classify(http.get(url, headers=auth, timeout=30), expect)
                except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError):
                    got = "client_saw_error"
                with lock:
                    outcomes[got] += 1

    threads = [threading.Thread(target=load, args=(n,), daemon=True) for n in range(4)]
    for thread in threads:
        thread.start()
    name = pg_fault_url.rsplit("/", 1)[1]
    admin = create_engine(pg_fault_url.rsplit("/", 1)[0] + "/postgres")
    terminated = 0
    try:
        for _ in range(RESETS):
            time.sleep(RESET_EVERY_S)  # the load runs between two resets
            with admin.connect() as conn:
                terminated += len(
                    conn.execute(
                        text(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                            "WHERE datname = :name AND pid <> pg_backend_pid()"
                        ),
                        {"name": name},
                    ).all()
                )
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        admin.dispose()

    wait_for(
        lambda: requests.get(f"{base}/v1/jobs/{job}", headers=auth, timeout=5).status_code == 200,
        timeout=30,
        what="the web to answer again",
    )
    print(f"terminated={terminated} outcomes={dict(outcomes)}")
    assert terminated >= RESETS and outcomes["ok"] > 0
    # the result is small enough to be read before its status: never a broken stream
    wrong = {k: v for k, v in outcomes.items() if k not in ("ok", "503")}
    assert not wrong, dict(outcomes)
    # the invariant: no job left active with all its chunks ended, every segment stored once
    engine = make_engine(pg_fault_url)
    try:
        with make_session_factory(engine)() as session:
            assert stuck_jobs(session) == []
            idxs = session.scalars(
                select(Segment.idx).where(Segment.job_id == job).order_by(Segment.idx)
            ).all()
    finally:
        engine.dispose()
    assert list(idxs) == list(range(SEGMENTS))
