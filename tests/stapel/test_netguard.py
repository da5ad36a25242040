"""A callback exchange ends by one hard deadline, whatever part of it the receiver drips."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from stapel import netguard

ALLOW = ("127.0.0.1",)
DEADLINE_S = 1.0


class Dripper:
    """A TCP receiver on loopback that sends `prefix` at once, then one byte per tick."""

    def __init__(self, prefix: bytes, drip: bytes, tick_s: float = 0.2) -> None:
        self.prefix, self.drip, self.tick_s = prefix, drip, tick_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            try:
                conn.settimeout(0.05)
                try:
                    conn.recv(65536)  # the request (http), or a TLS hello
                except TimeoutError:
                    pass
                conn.sendall(self.prefix)
                for byte in self.drip * 1000:
                    conn.sendall(bytes([byte]))
                    time.sleep(self.tick_s)
            except OSError:
                self.closed.set()  # the client shut the connection down

    def close(self) -> None:
        self.listener.close()


STATUS = b"HTTP/1.1 204 No Content\r\n"


@pytest.mark.parametrize(
    ("scheme", "prefix", "drip"),
    [
        ("http", b"", b"H"),  # the status line, a byte at a time
        ("http", STATUS, b"X-Slow: 1\r\n"),  # endless headers
        # a TLS handshake whose first record (16 KiB announced) never completes
        ("https", b"\x16\x03\x03\x40\x00", b"\x00"),
    ],
    ids=["status-line", "headers", "tls-handshake"],
)
def test_a_dripping_receiver_is_cut_at_the_deadline(scheme, prefix, drip):
    receiver = Dripper(prefix, drip)
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError, match="deadline"):
            netguard.post(
                f"{scheme}://127.0.0.1:{receiver.port}/hook",
                b"{}",
                {},
                allow_hosts=ALLOW,
                timeout_s=DEADLINE_S,
            )
        took = time.monotonic() - started
        assert receiver.closed.wait(5), "the connection stayed open after the deadline"
    finally:
        receiver.close()
    assert took >= DEADLINE_S  # it was the deadline that ended it, not an early error


def test_a_dripping_answer_after_the_status_still_counts_the_status():
    body = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"
    receiver = Dripper(body, b".")
    try:
        status = netguard.post(
            f"http://127.0.0.1:{receiver.port}/hook",
            b"{}",
            {},
            allow_hosts=ALLOW,
            timeout_s=DEADLINE_S,
        )
        assert receiver.closed.wait(5)
    finally:
        receiver.close()
    assert status == 200


def test_dns_counts_against_the_deadline(monkeypatch):
    release = threading.Event()

    def slow_getaddrinfo(*_args, **_kwargs):
        release.wait(10)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80))]

    monkeypatch.setattr(socket, "getaddrinfo", slow_getaddrinfo)
    try:
        with pytest.raises(TimeoutError, match="resolving"):
            netguard.post("http://hooks.example.com/x", b"{}", {}, timeout_s=0.3)
    finally:
        release.set()
