"""Callback destinations: non-public addresses refused on the resolved IP, at send time."""

from __future__ import annotations

import http.server
import ipaddress
import logging
import socket
import threading

import pytest
from sqlalchemy import select

from stapel import callbacks, jobs, netguard
from stapel import chunks as ch
from stapel.keys import get_or_create_tenant
from stapel.tables import Chunk, Job
from tests.factories import job_body

BLOCKED = [
    "127.0.0.1",
    "127.1.2.3",
    "0.0.0.0",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",
    "169.254.169.254",
    "169.254.170.2",
    "100.100.100.200",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "198.18.0.1",
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd00:ec2::254",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "2002:7f00:1::1",
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"]


@pytest.mark.parametrize("address", BLOCKED)
def test_non_public_addresses_are_blocked(address):
    assert not netguard.is_public(ipaddress.ip_address(address))
    with pytest.raises(netguard.BlockedDestination):
        netguard.resolve(address, 80, ())


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address):
    assert netguard.resolve(address, 443, ()) == ipaddress.ip_address(address)


def test_a_name_resolving_to_loopback_is_blocked_at_send_time():
    with pytest.raises(netguard.BlockedDestination, match=r"127\.0\.0\.1|::1"):
        netguard.post("http://localhost:9/hook", b"{}", {})


def test_the_allowlist_admits_a_host_by_name_or_ip():
    assert netguard.resolve("localhost", 80, ("localhost",)).is_loopback
    assert str(netguard.resolve("127.0.0.1", 80, ("127.0.0.1",))) == "127.0.0.1"


class _Hook(http.server.BaseHTTPRequestHandler):
    seen: list = []
    answer = (204, b"")

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.seen.append((self.headers["Host"], self.client_address[0]))
        status, body = _Hook.answer
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    _Hook.seen, _Hook.answer = [], (204, b"")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_port
    server.shutdown()
    server.server_close()


def test_delivery_connects_to_the_checked_ip_with_the_url_host(hook, monkeypatch):
    """DNS is asked once; the POST goes to that answer with Host set to the URL's name."""
    asked = []

    def fake_getaddrinfo(host, port, *args, **kwargs):
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    status = netguard.post(
        f"http://hooks.example.com:{hook}/done", b"{}", {}, allow_hosts=("127.0.0.1",)
    )
    assert status == 204
    assert asked[0] == "hooks.example.com"
    assert set(asked[1:]) <= {"127.0.0.1"}, "the connection used the checked IP, no new DNS"
    assert _Hook.seen == [(f"hooks.example.com:{hook}", "127.0.0.1")]


def test_redirects_are_not_followed_and_answers_are_read_bounded(hook):
    _Hook.answer = (302, b"")
    assert netguard.post(f"http://127.0.0.1:{hook}/", b"{}", {}, allow_hosts=("127.0.0.1",)) == 302
    assert len(_Hook.seen) == 1, "the redirect to the metadata service was not followed"
    _Hook.answer = (200, b"x" * 5_000_000)
    assert (
        netguard.post(
            f"http://127.0.0.1:{hook}/",
            b"{}",
            {},
            allow_hosts=("127.0.0.1",),
            max_response_bytes=1024,
        )
        == 200
    )


def _finished_job(session, url):
    tenant = get_or_create_tenant(session, "acme").id
    job, _ = jobs.create_job(
        session,
        tenant,
        jobs.JobSpec("en", "de", [jobs.DocumentSpec(None, ["a"])], callback_url=url),
        gpu_threshold=100,
        chunk_segments=10,
    )
    claim = ch.claim_chunk(
        session, session.scalar(select(Chunk.id).where(Chunk.job_id == job.id)), "w"
    )
    ch.record_batch(session, claim, [(0, "A")])
    ch.finish_chunk(session, claim)
    return job.id


def test_a_blocked_callback_fails_at_once_without_retries(session, hook):
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("stapel.callbacks").addHandler(handler)
    job_id = _finished_job(session, f"http://127.0.0.1:{hook}/done")
    try:
        outcome, delay = callbacks.deliver(
            session, job_id, lambda url, body, headers: netguard.post(url, body, headers)
        )
    finally:
        logging.getLogger("stapel.callbacks").removeHandler(handler)
    assert (outcome, delay) == ("failed", 0.0)
    session.expire_all()
    job = session.get(Job, job_id)
    assert (job.callback_status, job.callback_attempts) == ("failed", 1)
    assert _Hook.seen == [], "nothing reached the private address"
    assert any("blocked" in r.getMessage() and r.levelname == "WARNING" for r in records)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/x",
        "http://[::1]:8080/x",
        "http://169.254.169.254/latest/meta-data/",
        "https://localhost/x",
        "http://10.1.2.3/x",
        "http://[fd00:ec2::254]/x",
        "http://example.com:99999/x",
    ],
)
def test_literal_private_callbacks_are_refused_at_submit(client, auth, url):
    response = client.post("/v1/jobs", headers=auth, json=job_body(callback_url=url))
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_callback_url"


def test_an_allowed_host_is_accepted_at_submit(engine, redis_client, settings_overrides):
    from app import create_app
    from stapel.keys import create_key

    app = create_app({**settings_overrides, "callback_allow_hosts": "127.0.0.1, hooks.local"})
    with app.extensions["stapel"].sessions() as s:
        key = create_key(s, "acme")[1]
    response = app.test_client().post(
        "/v1/jobs",
        headers={"Authorization": f"Bearer {key}"},
        json=job_body(callback_url="http://127.0.0.1:8080/x"),
    )
    assert response.status_code == 202
    app.extensions["stapel"].dispose()
