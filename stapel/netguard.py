"""Callback destinations: only public addresses, checked on the resolved IP we connect to.

A tenant chooses its callback URL, so without this a job could make a worker POST to
the cloud metadata service, Redis or anything else on the private network (SSRF).
`post` resolves the host once, refuses any address that is not globally routable
(unless the operator allowed the host in STAPEL_CALLBACK_ALLOW_HOSTS), and connects to
that very IP with the Host header and TLS SNI/certificate check set to the URL's host,
so a DNS answer that changes between check and connect (rebinding) cannot redirect it.

The whole exchange (DNS, connect, TLS handshake, request, status line, headers, answer)
ends by one wall-clock deadline: every socket operation waits at most for the time
left, and a timer shuts the socket down at the deadline, so a receiver that drips a
byte a second holds a delivery no longer than the deadline.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
"""Cloud metadata services (AWS, ECS, AWS IPv6, Alibaba), named for the docs and tests."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class BlockedDestination(Exception):
    """The callback URL points at an address Stapel must never send to; not retried."""


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip.sixtofour:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IPAddress) -> bool:
    """Return whether ip is a unicast, globally routable address (not private, loopback,
    link-local, multicast, reserved, unspecified or a metadata service)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None and not is_public(inner):
            return False
    return not (
        ip in METADATA_ADDRESSES
        or ip.is_multicast
        or ip.is_unspecified
        or ip.is_reserved
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_private
        or not ip.is_global
    )


def literal_ip(host: str) -> IPAddress | None:
    """Return host as an IP address if it is one (brackets and IPv6 zones stripped)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def check_literal(host: str, allow_hosts: tuple[str, ...]) -> None:
    """Refuse at submit time what needs no DNS: a non-public literal IP or `localhost`."""
    host = host.lower()
    if host in allow_hosts:
        return
    ip = literal_ip(host)
    if (ip is not None and not is_public(ip)) or host == "localhost" or host.endswith(".localhost"):
        raise BlockedDestination(f"{host} is not a public address")


class Deadline:
    """A point in monotonic time that an exchange must end by."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left; raise TimeoutError when none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"callback exchange passed its {self.seconds:g} s deadline")
        return left


def _getaddrinfo(host: str, port: int, deadline: Deadline | None) -> list:
    """getaddrinfo, given up at the deadline (the lookup's thread ends on its own later)."""
    if deadline is None:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    answer: list = []

    def lookup() -> None:
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            answer.append(exc)

    thread = threading.Thread(target=lookup, daemon=True, name="callback-dns")
    thread.start()
    thread.join(deadline.left())
    if not answer:
        raise TimeoutError(f"resolving {host} passed the {deadline.seconds:g} s deadline")
    if isinstance(answer[0], OSError):
        raise answer[0]
    return answer[0]


def resolve(
    host: str, port: int, allow_hosts: tuple[str, ...], deadline: Deadline | None = None
) -> IPAddress:
    """Resolve host once and return the address to connect to, or raise BlockedDestination."""
    host = host.lower()
    ip = literal_ip(host)
    if ip is not None:
        addresses = [ip]
    else:
        try:
            infos = _getaddrinfo(host, port, deadline)
        except socket.gaierror as exc:
            raise OSError(f"cannot resolve {host}: {exc}") from exc
        addresses = [ip for info in infos if (ip := literal_ip(str(info[4][0]))) is not None]
    if host in allow_hosts:
        return addresses[0]
    allowed = [a for a in addresses if a is not None and (str(a) in allow_hosts or is_public(a))]
    if len(allowed) != len(addresses) or not allowed:
        blocked = sorted({str(a) for a in addresses} - {str(a) for a in allowed})
        raise BlockedDestination(f"{host} resolves to a non-public address {', '.join(blocked)}")
    return allowed[0]


class _Reader(io.RawIOBase):
    """A socket's receiving side where every recv waits at most for the time left."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        self.sock.settimeout(self.deadline.left())
        return self.sock.recv_into(buffer)


class _DeadlineSocket:
    """What http.client needs of a socket, each operation bounded by the deadline."""

    def __init__(self, sock: socket.socket, deadline: Deadline) -> None:
        self.sock, self.deadline = sock, deadline

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self.deadline.left())
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb", *_args, **_kwargs) -> io.BufferedReader:
        return io.BufferedReader(_Reader(self.sock, self.deadline))

    def close(self) -> None:
        self.sock.close()


class _Exchange(http.client.HTTPConnection):
    """One HTTP(S) exchange with the checked IP, the URL's host as Host and TLS name."""

    def __init__(self, ip: IPAddress, port: int, host: str, tls: bool, deadline: Deadline):
        super().__init__(str(ip), port, timeout=deadline.left())
        self.server_name, self.tls, self.deadline = host, tls, deadline
        self.live: socket.socket | None = None

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.deadline.left())
        self.live = sock
        if self.tls:
            context = ssl.create_default_context()
            sock = context.wrap_socket(
                sock, server_hostname=self.server_name, do_handshake_on_connect=False
            )
            self.live = sock
            sock.settimeout(self.deadline.left())
            sock.do_handshake()
        self.sock = _DeadlineSocket(sock, self.deadline)

    def abort(self) -> None:
        """Shut the socket down from another thread: whatever waits on it returns now."""
        if self.live is not None:
            try:
                socket.socket.shutdown(self.live, socket.SHUT_RDWR)
            except OSError:
                pass


_UNSENDABLE = re.compile(r"[\x00-\x20\x7f]")
_HOSTNAME = re.compile(r"[^\s/\\:@\[\]?#%]+")


@dataclass(frozen=True)
class Target:
    """Where a callback goes and what its request line and Host header say."""

    host: str
    port: int
    tls: bool
    netloc: str
    path: str


def target(url: str) -> Target:
    """Split url into what `post` sends, or raise BlockedDestination.

    The request line and Host header are built here by http.client itself (on a
    connection that never connects), so a URL it would refuse at send time (a space or
    a control character in the path, a non-ASCII path, a bad port) is refused here, at
    submit, rather than failing every delivery.
    """
    if _UNSENDABLE.search(url):  # urlsplit would drop a tab or newline without a word
        raise BlockedDestination("callback_url must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BlockedDestination(f"callback_url is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BlockedDestination("callback_url must be an http or https URL")
    if parts.username or parts.password:
        raise BlockedDestination("callback_url must not carry credentials")
    host = parts.hostname
    if literal_ip(host) is None and not _HOSTNAME.fullmatch(host):
        raise BlockedDestination(f"callback_url's host {host!r} is not a host name")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc = f"{netloc}:{port}"
    aim = Target(
        host=host,
        port=port or (443 if parts.scheme == "https" else 80),
        tls=parts.scheme == "https",
        netloc=netloc,
        path=(parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
    )
    try:
        dry = http.client.HTTPConnection("localhost")
        dry.putrequest("POST", aim.path, skip_host=True, skip_accept_encoding=True)
        dry.putheader("Host", aim.netloc)
    except (http.client.HTTPException, ValueError) as exc:
        raise BlockedDestination(f"callback_url cannot be sent as it is ({exc})") from None
    return aim


def post(
    url: str,
    body: bytes,
    headers: dict,
    *,
    allow_hosts: tuple[str, ...] = (),
    timeout_s: float = 10.0,
    max_response_bytes: int = 65536,
) -> int:
    """POST body to url on its checked IP; return the status. No redirects are followed,
    at most max_response_bytes of the answer are read, and the whole exchange ends
    within timeout_s (TimeoutError past it). Raises BlockedDestination or OSError."""
    aim = target(url)
    deadline = Deadline(timeout_s)
    ip = resolve(aim.host, aim.port, allow_hosts, deadline)
    exchange = _Exchange(ip, aim.port, aim.host, aim.tls, deadline)
    timer = threading.Timer(deadline.left(), exchange.abort)
    timer.daemon = True
    timer.start()
    try:
        exchange.request("POST", aim.path, body=body, headers={**headers, "Host": aim.netloc})
        response = exchange.getresponse()
    except (http.client.HTTPException, OSError) as exc:
        timer.cancel()
        exchange.close()
        deadline.left()  # past the deadline, say so (TimeoutError) rather than what broke
        if isinstance(exc, OSError):
            raise
        raise OSError(f"{type(exc).__name__}: {exc}") from exc
    try:  # the status decided the outcome; the answer is read only as far as it is quick
        read = 0
        while read < max_response_bytes and (data := response.read1(8192)):
            read += len(data)
    except (http.client.HTTPException, OSError):
        pass
    finally:
        timer.cancel()
        exchange.close()
    return response.status
