"""The Procfile's web role spreads connections over every web process.

Under gunicorn, the server before granian, processes sharing the master's listening socket let
whichever was in accept() first take a burst of new connections: a 32-connection load
went to one of two processes, which then served it on one core (the GIL) while the
other idled. granian's processes (app.server) accept in Rust, outside the GIL, on the
one socket: this checks that the connections still land on every process.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port
from tests.factories import wait_for

pytestmark = pytest.mark.process

CONNECTIONS = 16
"""All 16 on one of 2 processes by chance: 2 x 2^-16."""
ACCESS_LINE = re.compile(
    r'^127\.0\.0\.1 - - \[[^]]+\] "GET /healthz HTTP/1\.1" 200 \d+ "-" "-"$',
    re.M,
)
FROZEN = re.compile(r"start-up objects frozen out of the garbage collector: (\d+)")


def procfile_web_line() -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith("web:"):
            return line.removeprefix("web:").strip()
    raise AssertionError("the Procfile has no web role")


def web_env(database_url: str, redis_url: str, **values: str) -> dict[str, str]:
    """The environment the Procfile's web line runs in here, with values added."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        **values,
    }


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except FileNotFoundError:  # a thread that ended while the tasks were listed
            continue
    return found


def established_inodes(port: int) -> set[str]:
    """Socket inodes of established IPv4 TCP connections whose local port is `port`."""
    inodes = set()
    for row in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = row.split()
        local_port, state = int(fields[1].rsplit(":", 1)[1], 16), fields[3]
        if local_port == port and state == "01":  # TCP_ESTABLISHED
            inodes.add(fields[9])
    return inodes


def socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if m := re.fullmatch(r"socket:\[(\d+)\]", target):
            inodes.add(m.group(1))
    return inodes


def web_processes(master: int) -> set[int]:
    """The web server's worker processes (the shell line runs its master as its child)."""
    workers: set[int] = set()
    for pid in children(master):
        workers |= children(pid) or {pid}
    return workers


def test_connections_are_spread_over_every_web_process(database_url, redis_url, tmp_path):
    port = free_port()
    env = web_env(database_url, redis_url, STAPEL_BIND=f"127.0.0.1:{port}", STAPEL_WEB_WORKERS="2")
    log = open(tmp_path / "web.log", "wb")
    # the Procfile's own line, in a scratch directory (it makes var/ where it runs)
    shell = subprocess.Popen(
        ["bash", "-c", procfile_web_line()],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    conns: list[http.client.HTTPConnection] = []
    try:
        wait_for(
            lambda: (
                len(web_processes(shell.pid)) == 2
                and (tmp_path / "web.log").read_text().count("Started worker-") == 2
                and _answers(port)
            ),
            timeout=60,
            what="the web role's two processes to serve (granian's log) and answer",
        )
        for _ in range(CONNECTIONS):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert response.status == 200
            response.read()  # the connection stays open (keep-alive)
            conns.append(conn)
        open_conns = established_inodes(port)
        served = {pid: len(socket_inodes(pid) & open_conns) for pid in web_processes(shell.pid)}
        assert sum(served.values()) == CONNECTIONS, served
        assert all(served.values()), f"a web process got no connection: {served}"
        # the access log: a combined-format line per request (app.access_log.AccessLog)
        wait_for(
            lambda: len(ACCESS_LINE.findall((tmp_path / "web.log").read_text())) > CONNECTIONS,
            timeout=10,
            what="an access log line per request",
        )
        # each process froze its start-up objects (app.serve): a full collection skips them
        frozen = FROZEN.findall((tmp_path / "web.log").read_text())
        assert len(frozen) == 2 and all(int(n) > 50_000 for n in frozen), frozen
        # a web process that dies is started again (app.server: respawn_failed_workers)
        before = web_processes(shell.pid)
        os.kill(min(before), 9)
        wait_for(
            lambda: (
                len(web_processes(shell.pid) - before) == 1
                and (tmp_path / "web.log").read_text().count("Started worker-") == 3
            ),
            timeout=60,
            what="the killed web process to be replaced by one that serves (granian's log)",
        )
        wait_for(lambda: _answers(port), timeout=30, what="the web to answer again")
        assert shell.poll() is None, "the server stayed up"
    finally:
        for conn in conns:
            conn.close()
        os.killpg(shell.pid, 15)
        shell.wait(timeout=30)
        log.close()


def test_the_web_roles_processes_and_threads_are_set_from_the_environment(
    database_url, redis_url, tmp_path
):
    """STAPEL_WEB_WORKERS and STAPEL_WEB_THREADS reach the server (its resolved config)."""
    env = web_env(database_url, redis_url, STAPEL_WEB_WORKERS="3", STAPEL_WEB_THREADS="5")
    printed = subprocess.run(
        ["bash", "-c", procfile_web_line() + " --print-config"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    config = json.loads(printed)
    assert (config["workers"], config["blocking_threads"]) == (3, 5)
    assert (config["address"], config["port"]) == ("127.0.0.1", 8000)


def test_a_bad_setting_stops_the_web_with_its_name(database_url, redis_url, tmp_path):
    env = web_env(database_url, redis_url, STAPEL_WEB_THREADS="0")
    done = subprocess.run(
        ["bash", "-c", procfile_web_line()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "STAPEL_WEB_THREADS must be a whole number of at least 1, not '0'" in done.stderr


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/healthz")
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False
