"""Stapel as a multi-host system on one machine: network namespaces as hosts.

Hosts (one namespace each, all on a bridge in a switch namespace, a private /24 that
exists only inside these namespaces): `svc` (PostgreSQL on its own cluster, and Redis
on a second address, so one host's route to Redis alone can be cut), `web`
(`python -m app.server`), `w1` and `w2` (one Celery worker each, with its own copy of
the model root), and `cli`
(where the test's own HTTP and DB calls run, from a thread that joined that namespace).
Each process binds its host's address; nothing is shared through loopback, and the
worker hosts share no files with the web. Needs root (namespaces, setns, runuser).
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stapel.embedded_redis import server_binary

ROOT = Path(__file__).resolve().parents[2]
CLONE_NEWNET = 0x40000000
HOSTS = {"svc": 2, "web": 3, "w1": 11, "w2": 12, "cli": 20}
IDLE_TX_S = 5
"""PostgreSQL's idle_in_transaction_session_timeout on the cluster (docs/reliability.md)."""
REDIS_HOST_NUMBER = 4  # Redis's address on the svc host
PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))


def why_not() -> str | None:
    """Return why namespaces cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    if shutil.which("ip") is None or shutil.which("runuser") is None:
        return "needs iproute2 and runuser"
    if not PG_BIN:
        return "needs PostgreSQL's server binaries (initdb, postgres)"
    probe = f"s22probe{secrets.token_hex(2)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=False)
    return None


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True)


class Cluster:
    """The namespaces, their links, and the processes started in them."""

    def __init__(self, workdir: Path) -> None:
        self.tag = secrets.token_hex(2)
        self.net = f"10.{200 + int(self.tag[:1], 16)}.{int(self.tag[1:], 16) % 250}"
        self.workdir = workdir
        self.procs: dict[str, subprocess.Popen] = {}
        self.client: ThreadPoolExecutor | None = None

    def ns(self, host: str) -> str:
        return f"s22{self.tag}{host}"

    def ip(self, host: str) -> str:
        return f"{self.net}.{HOSTS[host]}"

    @property
    def redis_ip(self) -> str:
        return f"{self.net}.{REDIS_HOST_NUMBER}"

    def build(self) -> Cluster:
        """Make the switch, the hosts and their links."""
        switch = self.ns("sw")
        sh("ip", "netns", "add", switch)
        sh("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", switch, "link", "set", "br0", "up")
        for host in HOSTS:
            ns = self.ns(host)
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "v" + host)
            sh("ip", "-n", ns, "link", "set", "v" + host, "netns", switch)
            sh("ip", "-n", switch, "link", "set", "v" + host, "master", "br0", "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.ip(host)}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", self.ns("svc"), "addr", "add", f"{self.redis_ip}/24", "dev", "eth0")
        return self

    def cut(self, host: str) -> None:
        """Take a host's link down at the switch: no packet in or out until heal."""
        sh("ip", "-n", self.ns("sw"), "link", "set", "v" + host, "down")

    def heal(self, host: str) -> None:
        sh("ip", "-n", self.ns("sw"), "link", "set", "v" + host, "up")

    def cut_route(self, host: str, address: str) -> None:
        """Make one address unreachable from a host (its other traffic flows)."""
        sh("ip", "-n", self.ns(host), "route", "add", "unreachable", f"{address}/32")

    def heal_route(self, host: str, address: str) -> None:
        sh("ip", "-n", self.ns(host), "route", "del", "unreachable", f"{address}/32")

    def spawn(self, name: str, host: str, args: list[str], env: dict) -> subprocess.Popen:
        """Start a process on a host, its output in workdir/<name>.log."""
        log = open(self.workdir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns(host), *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[name] = proc
        return proc

    def start_services(self) -> tuple[str, str]:
        """Start PostgreSQL and Redis on the svc host; return (database URL, Redis URL)."""
        # Outside the test's (private) tmp folder: the postgres user must reach it.
        self.pg_dir = Path(tempfile.mkdtemp(prefix="stapel-cluster-pg-"))
        data = self.pg_dir / "data"
        data.mkdir()
        os.chmod(self.pg_dir, 0o755)
        shutil.chown(data, "postgres")
        bin_ = PG_BIN[-1]
        sh("runuser", "-u", "postgres", "--", str(bin_ / "initdb"), "-D", str(data),
           "-U", "postgres", "--auth=trust", "-E", "UTF8")  # fmt: skip
        with open(data / "pg_hba.conf", "a") as hba:  # the cluster's hosts, no password
            hba.write(f"host all all {self.net}.0/24 trust\n")
        self.spawn(
            "postgres",
            "svc",
            ["runuser", "-u", "postgres", "--", str(bin_ / "postgres"), "-D", str(data),
             "-k", str(data), "-h", self.ip("svc"), "-p", "5432", "-c", "fsync=off",
             # A worker cut off mid-transaction keeps its row locks (the job's row, which
             # every chunk of the job updates) until the server drops its session.
             "-c", f"idle_in_transaction_session_timeout={IDLE_TX_S}s",
             "-c", "tcp_keepalives_idle=5", "-c", "tcp_keepalives_interval=2",
             "-c", "tcp_keepalives_count=2",
             # keepalives probe only a connection with nothing unacknowledged in flight
             "-c", "tcp_user_timeout=5000",
             # who waited on whom, and which host each backend serves, in postgres.log
             "-c", "log_lock_waits=on", "-c", "log_connections=on"],
            dict(os.environ),
        )  # fmt: skip
        self.spawn(
            "redis",
            "svc",
            [server_binary(), "--bind", self.redis_ip, "--port", "6379", "--save", "",
             "--appendonly", "no", "--protected-mode", "no"],
            dict(os.environ),
        )  # fmt: skip
        return (
            f"postgresql://postgres@{self.ip('svc')}:5432/postgres",
            f"redis://{self.redis_ip}:6379/0",
        )

    def run_in(self, fn, *args):
        """Run fn(*args) on the cli host (a thread that joined its network namespace)."""
        if self.client is None:
            self.client = ThreadPoolExecutor(
                max_workers=1, initializer=self._join, initargs=("cli",)
            )
        return self.client.submit(fn, *args).result()

    def _join(self, host: str) -> None:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        fd = os.open(f"/var/run/netns/{self.ns(host)}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns failed")
        finally:
            os.close(fd)

    def python(self, host: str, code: str, env: dict) -> str:
        """Run a Python snippet on a host and return its output."""
        proc = subprocess.run(
            ["ip", "netns", "exec", self.ns(host), sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        return proc.stdout

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def close(self) -> None:
        """Stop every process, then remove the namespaces."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        if self.client is not None:
            self.client.shutdown()
        for host in [*HOSTS, "sw"]:
            subprocess.run(["ip", "netns", "del", self.ns(host)], check=False)
        if getattr(self, "pg_dir", None) is not None:
            shutil.rmtree(self.pg_dir, ignore_errors=True)
