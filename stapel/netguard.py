"""Callback destinations: only public addresses, checked on the resolved IP we connect to.

A tenant chooses its callback URL, so without this a job could make a worker POST to
the cloud metadata service, Redis or anything else on the private network (SSRF).
`post` resolves the host once, refuses any address that is not globally routable
(unless the operator allowed the host in STAPEL_CALLBACK_ALLOW_HOSTS), and connects to
that very IP with the Host header and TLS SNI/certificate check set to the URL's host,
so a DNS answer that changes between check and connect (rebinding) cannot redirect it.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from urllib.parse import urlsplit

import urllib3

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


def resolve(host: str, port: int, allow_hosts: tuple[str, ...]) -> IPAddress:
    """Resolve host once and return the address to connect to, or raise BlockedDestination."""
    host = host.lower()
    ip = literal_ip(host)
    if ip is not None:
        addresses = [ip]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
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
    at most max_response_bytes of the answer are read, the whole exchange ends within
    about connect + timeout_s. Raises BlockedDestination or OSError."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BlockedDestination("callback_url must be an http or https URL")
    if parts.username or parts.password:
        raise BlockedDestination("callback_url must not carry credentials")
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ip = resolve(host, port, allow_hosts)
    timeout = urllib3.Timeout(connect=3.05, read=timeout_s)
    if parts.scheme == "https":
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
            str(ip),
            port,
            timeout=timeout,
            retries=False,
            server_hostname=host,
            assert_hostname=host,
            cert_reqs="CERT_REQUIRED",
        )
    else:
        pool = urllib3.HTTPConnectionPool(str(ip), port, timeout=timeout, retries=False)
    netloc = host if parts.port is None else f"{host}:{port}"
    if ":" in host:
        netloc = f"[{host}]" if parts.port is None else f"[{host}]:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    deadline = time.monotonic() + timeout_s
    try:
        response = pool.urlopen(
            "POST",
            path,
            body=body,
            headers={**headers, "Host": netloc},
            redirect=False,
            preload_content=False,
            assert_same_host=False,
        )
        read = 0
        while read < max_response_bytes and time.monotonic() < deadline:
            data = response.read(min(8192, max_response_bytes - read))
            if not data:
                break
            read += len(data)
        status = response.status
        response.release_conn()
    except urllib3.exceptions.HTTPError as exc:
        raise OSError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        pool.close()
    return status
