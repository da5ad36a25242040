"""End to end: HTTP API -> Redis -> a real Celery worker process -> CTranslate2 -> DB."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import ctranslate2
import pytest
import requests
import sentencepiece as spm
from sqlalchemy import select

from app import create_app
from stapel import callbacks
from stapel.broker import send_chunk
from stapel.celery_config import CALLBACK_QUEUE
from stapel.dispatch import ChunkMessage
from stapel.keys import create_key
from stapel.tables import Chunk, new_id
from tests.factories import sentences, wait_for
from tests.faults.procs import GroupWorker
from tests.workers_proc import ServerThread, WorkerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture
def settings_overrides(settings_overrides):
    """The callback test posts to a receiver on 127.0.0.1: the operator allows it."""
    return {**settings_overrides, "callback_allow_hosts": ("127.0.0.1",)}


@pytest.fixture
def worker_env(settings_overrides):
    return {
        "STAPEL_CALLBACK_ALLOW_HOSTS": "127.0.0.1",
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_MAX_DECODING_LENGTH": "24",
        "STAPEL_BATCH_TOKENS": "512",
    }


@pytest.fixture
def worker(app, worker_env, tmp_path):
    proc = WorkerProcess(worker_env, tmp_path).start(app.extensions["stapel"].celery)
    yield proc
    proc.stop()


@pytest.fixture
def callback_worker(app, worker_env, tmp_path):
    """The Procfile's `worker_callbacks`: deliveries have a queue and a process of their own."""
    proc = GroupWorker(worker_env, tmp_path, name="callbacks", queues=CALLBACK_QUEUE)
    proc.start(app.extensions["stapel"].celery)
    yield proc
    proc.close()


@pytest.fixture
def server(app):
    with ServerThread(app) as srv:
        yield srv


def raw_translate(model_dir, texts, max_len=24):
    """Translate with CTranslate2 directly, one batch, as the reference."""
    sp_src = spm.SentencePieceProcessor(model_file=str(model_dir / "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=str(model_dir / "target.spm"))
    translator = ctranslate2.Translator(str(model_dir), device="cpu", compute_type="int8")
    out = translator.translate_batch(
        [t + ["</s>"] for t in sp_src.encode(texts, out_type=str)],
        max_decoding_length=max_len,
        beam_size=1,
    )
    return sp_tgt.decode([r.hypotheses[0] for r in out])


def test_job_over_http_is_translated_by_a_real_worker(server, worker, auth, model_root):
    texts = sentences(23) + ["", "   "]
    body = {
        "source_lang": "en",
        "target_lang": "de",
        "documents": [{"id": "a", "segments": texts[:10]}, {"segments": texts[10:]}],
        "metadata": {"ticket": 7},
    }
    created = requests.post(f"{server.url}/v1/jobs", json=body, headers=auth, timeout=10)
    assert created.status_code == 202, created.text
    job = created.json()
    assert job["status"] == "queued" and job["pool"] == "cpu" and job["segments_total"] == 25

    def finished():
        state = requests.get(f"{server.url}{job['links']['self']}", headers=auth, timeout=10).json()
        return state if state["status"] in ("succeeded", "failed") else None

    done = wait_for(finished, timeout=90, what="the job to finish")
    assert done["status"] == "succeeded", (done, worker.log())
    assert done["segments_done"] == 25 and done["attempts"] == 1
    assert done["started_at"] and done["finished_at"] and done["metadata"] == {"ticket": 7}

    result = requests.get(f"{server.url}{job['links']['result']}", headers=auth, timeout=10)
    assert result.headers["X-Stapel-Complete"] == "true"
    payload = result.json()
    assert payload["complete"] is True
    assert [d["id"] for d in payload["documents"]] == ["a", None]
    got = payload["documents"][0]["segments"] + payload["documents"][1]["segments"]
    expected = raw_translate(model_root / "en-de", texts[:23])
    assert got[:23] == expected, worker.log()  # same output as CTranslate2 alone, in order
    assert got[23:] == ["", "   "]  # blank segments pass through untouched


def test_upload_round_trip_and_txt_result(server, worker, auth, model_root):
    content = "First line.\n\nThird line here.\n"
    files = {"file": ("doc.txt", content.encode(), "text/plain")}
    data = {"source_lang": "de", "target_lang": "en", "priority": "8"}
    created = requests.post(
        f"{server.url}/v1/jobs", files=files, data=data, headers=auth, timeout=10
    )
    assert created.status_code == 202, created.text
    job = created.json()
    assert job["priority"] == 8 and job["documents_total"] == 1 and job["segments_total"] == 3
    wait_for(
        lambda: (
            requests.get(f"{server.url}{job['links']['self']}", headers=auth, timeout=10).json()[
                "status"
            ]
            == "succeeded"
        ),
        timeout=90,
        what="upload job",
    )
    txt = requests.get(f"{server.url}{job['links']['result']}?format=txt", headers=auth, timeout=10)
    lines = txt.text.split("\n")
    expected = raw_translate(model_root / "de-en", ["First line.", "Third line here."])
    assert lines == [expected[0], "", expected[1], ""]
    assert txt.headers["Content-Type"].startswith("text/plain")


def test_duplicate_delivery_translates_once(app, worker, auth, client):
    """The same chunk task delivered twice at once is translated and written once."""
    job = client.post(
        "/v1/jobs",
        json={"source_lang": "en", "target_lang": "de", "segments": sentences(5)},
        headers=auth,
    ).get_json()
    ext = app.extensions["stapel"]
    with ext.sessions() as s:
        (chunk,) = s.scalars(select(Chunk).where(Chunk.job_id == job["id"])).all()
    message = ChunkMessage(chunk.id, job["id"], "cpu", 5, "cpu", 1)
    for _ in range(2):  # two more copies of the same task
        assert send_chunk(ext.celery, message, new_id())
    wait_for(
        lambda: worker.log().count("chunk not claimable") == 2,
        timeout=60,
        what="both duplicates to be skipped",
    )
    wait_for(
        lambda: client.get(job["links"]["self"], headers=auth).get_json()["status"] == "succeeded",
        timeout=60,
        what="job",
    )
    assert client.get(job["links"]["self"], headers=auth).get_json()["attempts"] == 1
    assert worker.log().count(f"chunk claimed logid={job['id']}") == 1


class Hook(http.server.BaseHTTPRequestHandler):
    """Records callback POSTs."""

    received: list[tuple[bytes, dict]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Hook.received.append((body, dict(self.headers)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args):
        pass


def test_callback_is_posted_once_and_signed(app, worker, callback_worker, auth, client, runner):
    Hook.received = []
    hook = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{hook.server_port}/done"
        job = client.post(
            "/v1/jobs",
            headers=auth,
            json={
                "source_lang": "en",
                "target_lang": "de",
                "segments": sentences(3),
                "callback_url": url,
                "metadata": {"order": "A-1"},
            },
        ).get_json()
        wait_for(lambda: Hook.received, timeout=60, what="the callback")
    finally:
        hook.shutdown()
    ((body, headers),) = Hook.received
    secret = runner.invoke(args=["tenants", "secret", "acme"]).output.strip()
    assert callbacks.verify(secret, body, headers[callbacks.SIGNATURE_HEADER])
    sent = json.loads(body)
    assert sent["id"] == job["id"] and sent["status"] == "succeeded"
    assert sent["segments_done"] == 3 and sent["metadata"] == {"order": "A-1"}


REAL = {
    ("en", "de"): [
        ("The old man sees the small dog.", "Der alte Mann sieht den kleinen Hund."),
        ("We have bought a new car.", "Wir haben ein neues Auto gekauft."),
        ("Does the woman read the book?", "Liest die Frau das Buch?"),
    ],
    ("de", "en"): [
        ("Der kleine Hund schläft im Garten.", "The small dog sleeps in the garden."),
        ("Wir haben das Buch gelesen.", "We have read the book."),
    ],
}


def test_committed_models_translate_real_german_end_to_end(
    settings_overrides, engine, redis_client, tmp_path
):
    """The demo pair under models/ through HTTP, Redis, a worker and back."""
    root = Path(__file__).resolve().parent.parent / "models"
    app = create_app({**settings_overrides, "model_root": root})
    with app.extensions["stapel"].sessions() as s:
        headers = {"Authorization": f"Bearer {create_key(s, 'acme')[1]}"}
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(root),
    }
    worker = WorkerProcess(env, tmp_path).start(app.extensions["stapel"].celery)
    try:
        with ServerThread(app) as server:
            for (src, tgt), pairs in REAL.items():
                job = requests.post(
                    f"{server.url}/v1/jobs",
                    headers=headers,
                    timeout=10,
                    json={
                        "source_lang": src,
                        "target_lang": tgt,
                        "segments": [s for s, _ in pairs],
                    },
                ).json()
                wait_for(
                    lambda j=job: (
                        requests.get(
                            server.url + j["links"]["self"], headers=headers, timeout=10
                        ).json()["status"]
                        == "succeeded"
                    ),
                    timeout=90,
                    what=f"{src}-{tgt} job",
                )
                result = requests.get(
                    server.url + job["links"]["result"], headers=headers, timeout=10
                ).json()
                assert result["documents"][0]["segments"] == [t for _, t in pairs]
    finally:
        worker.stop()
        app.extensions["stapel"].dispose()
