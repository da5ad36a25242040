"""Slow request bodies hold no app thread another client needs (the Procfile's server)."""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from stapel.keys import create_key
from tests.conftest import free_port
from tests.workers_proc import web_process

pytestmark = pytest.mark.process  # the Procfile's web server in a process of its own

SLOW = 8
"""Connections announcing a 1 MB body and sending one byte of it."""


def request(port: int, head: bytes, timeout: float = 20) -> tuple[int, bytes]:
    """Send a bodyless request; return its status and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head + b"\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_part, _, body = data.partition(b"\r\n\r\n")
    return int(head_part.split(b" ", 2)[1]), body


@pytest.fixture
def web(app, settings_overrides, tmp_path):
    """app.server, one process of 4 app threads, a 2 s body deadline; and a key."""
    with app.extensions["stapel"].sessions() as s:
        key = create_key(s, "reader")[1]
    port = free_port()
    env = {
        "DATABASE_URL": settings_overrides["database_url"],
        "REDIS_URL": settings_overrides["redis_url"],
        "STAPEL_MODEL_ROOT": str(settings_overrides["model_root"]),
        "STAPEL_BIND": f"127.0.0.1:{port}",
        "STAPEL_WEB_WORKERS": "1",
        "STAPEL_WEB_THREADS": "4",
        "STAPEL_BODY_DEADLINE_S": "2",
        "STAPEL_BODY_MIN_RATE": str(10**9),
    }
    with web_process(env, port, tmp_path / "web.log"):
        yield port, key


def test_slow_bodies_without_a_key_do_not_stall_other_tenants(web):
    port, key = web
    slow = []
    for _ in range(SLOW):
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        sock.sendall(
            b"POST /libretranslate/translate HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
        )
        slow.append(sock)

    reads = [
        request(port, f"GET /v1/jobs HTTP/1.1\r\nAuthorization: Bearer {key}".encode())
        for _ in range(6)
    ]
    assert [status for status, _ in reads] == [200] * 6

    refused = 0
    for sock in slow:
        sock.settimeout(5)  # past the 2 s deadline: an admitted read may still hold its 408
        try:
            head, _, body = sock.recv(65536).partition(b"\r\n\r\n")
        except TimeoutError:
            continue
        status, code = int(head.split(b" ", 2)[1]), json.loads(body)["error"]["code"]
        assert (status, code) in ((429, "too_many_uploads"), (408, "body_timeout"))
        refused += code == "too_many_uploads"
    assert refused == SLOW - 2, "two bodies read at once from one address, the rest refused"
    for sock in slow:
        sock.close()


def test_a_batch_clients_concurrent_bodies_are_not_refused(web):
    """16 submissions at once from one address, each body sent whole: all accepted."""
    port, key = web
    body = json.dumps({"source_lang": "en", "target_lang": "de", "segments": ["Hello."]})

    def submit(_n: int) -> int:
        head = (
            f"POST /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}"
        )
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(head.encode())
            return int(sock.recv(65536).split(b" ", 2)[1])

    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(submit, range(16)))
    assert statuses == [202] * 16
