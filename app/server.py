"""The web role's HTTP server: granian serving `app.serve()` over WSGI.

    python -m app.server                  # the Procfile's web role
    python -m app.server --print-config   # what it would run with, as JSON

Set from the environment: `STAPEL_BIND` (host:port, `[::]:8000` for IPv6; default
127.0.0.1:8000), `STAPEL_WEB_WORKERS` processes (2) of `STAPEL_WEB_THREADS` threads each
(4): a process runs at most that many requests in the app at once, the rest wait in
granian's queue. HTTP itself (parsing, keep-alive, sending) runs in granian's Rust
threads outside the GIL; every process accepts on the one listening socket. A process
that dies is started again; SIGTERM lets requests in flight finish for up to
`STAPEL_WEB_GRACE_S` seconds (30), after which the master kills what is left (a process
still making its app when SIGTERM comes does not see it, and is killed then too).
Request heads over 64 KiB, more than 100 header fields or a malformed request line are
refused by granian itself (431, 431, 400, with an empty body), and so is a head not in
within 10 s; the app refuses a request target over 4,094 bytes (414, JSON). Request
bodies are read before the app sees them, with a deadline (app.body_guard).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

HEAD_BYTES = 64 * 1024
"""granian's buffer for a request head (its minimum is 8 KiB, its default 408 KiB)."""
HEAD_TIMEOUT_MS = 10_000
"""How long granian waits for a request's head (its default is 30 s); the body's deadline
is app.body_guard's."""


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip() or str(default)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise SystemExit(f"{name} must be a whole number of at least 1, not {raw!r}")
    return value


def bind_address(bind: str) -> tuple[str, int]:
    """Split `host:port` (`[v6]:port`) into granian's address and port."""
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"STAPEL_BIND must be host:port, not {bind!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


def app_threads(env: Mapping[str, str] = os.environ) -> int:
    """The app threads of one web process (`STAPEL_WEB_THREADS`)."""
    return _positive(env, "STAPEL_WEB_THREADS", 4)


def options(env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The server's settings from the environment (the keywords of granian's Server)."""
    address, port = bind_address(env.get("STAPEL_BIND", "").strip() or "127.0.0.1:8000")
    return {
        "target": "app.factory:serve",
        "factory": True,
        "address": address,
        "port": port,
        "workers": _positive(env, "STAPEL_WEB_WORKERS", 2),
        "blocking_threads": app_threads(env),
        "workers_kill_timeout": _positive(env, "STAPEL_WEB_GRACE_S", 30),
        "respawn_failed_workers": True,
        "websockets": False,
        "max_head_bytes": HEAD_BYTES,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--print-config", action="store_true", help="print the settings, exit")
    args = parser.parse_args(argv)
    config = options()
    if args.print_config:
        json.dump(config, sys.stdout, indent=2)
        print()
        return

    from granian import Granian
    from granian.constants import Interfaces
    from granian.http import HTTP1Settings

    head_bytes = config.pop("max_head_bytes")
    Granian(
        interface=Interfaces.WSGI,
        http1_settings=HTTP1Settings(
            max_buffer_size=head_bytes, header_read_timeout=HEAD_TIMEOUT_MS
        ),
        **config,
    ).serve()


if __name__ == "__main__":
    main()
