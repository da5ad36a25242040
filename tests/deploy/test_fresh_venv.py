"""What the image promises, without Docker: the lock installs into a fresh virtualenv, and
web and a worker, run through the image's entry point by an unprivileged user from a
read-only copy of what the Dockerfile copies, translate a job writing only var/ and a
temporary directory (the two paths deploy/ mounts emptyDirs on).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import requests
from sqlalchemy import func, select

from stapel.db import make_engine
from stapel.embedded_redis import start_server, wait_until_reachable
from stapel.states import ACTIVE
from stapel.tables import Chunk, Job, Segment
from tests.conftest import free_port
from tests.factories import wait_for

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
IMAGE_UID = int(re.search(r"^ARG UID=(\d+)$", DOCKERFILE, re.M)[1])
NETWORK_ERRORS = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeout",
    "ReadTimeoutError",
)
SOURCES = ["The old man sees the small dog.", "We have bought a new car."]

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def image_paths() -> list[str]:
    """Return what the Dockerfile's runtime stage copies from the repository."""
    paths = []
    for line in re.findall(r"^COPY (?!--from)(.+)$", DOCKERFILE, re.M):
        *sources, _ = line.split()
        paths += [s for s in sources if not s.startswith("--")]
    return [p for p in paths if not p.startswith("requirements")]


def unprivileged_user() -> pwd.struct_passwd | None:
    """The image's uid as a local user (made if missing) when root; None when not root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwuid(IMAGE_UID)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--uid",
                str(IMAGE_UID),
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                "stapel",
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwuid(IMAGE_UID)


def world_reachable(path: Path) -> bool:
    """Return whether any user may run path (it and every directory above it open to all)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def base_python() -> Path:
    """A Python 3.11 (the image's) that an unprivileged user can run, or skip saying why.

    This venv's interpreter may live in a private home (pyenv under /root, mode 700).
    """
    candidates = [Path(sys._base_executable).resolve()]
    candidates += [Path(p) for p in ("/usr/local/bin/python3.11", "/usr/bin/python3.11")]
    for candidate in candidates:
        if candidate.exists() and world_reachable(candidate.resolve()):
            return candidate
    pytest.skip("no Python 3.11 that an unprivileged user can run (all in private dirs)")


def install_lock(venv: Path) -> None:
    """Install requirements.lock into a new virtualenv, as the image's build stage does."""
    subprocess.run([str(base_python()), "-m", "venv", "--without-pip", str(venv)], check=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--require-hashes",
            "--no-deps",
            "--only-binary=:all:",
            "-r",
            str(ROOT / "requirements.lock"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        if any(marker in done.stderr for marker in NETWORK_ERRORS):
            pytest.skip(f"the package registry is unreachable: {done.stderr.strip()[-300:]}")
        raise AssertionError(f"the lock does not install:\n{done.stderr[-3000:]}")
    # Readable by everyone, as a build under the usual umask 022 leaves it.
    subprocess.run(["chmod", "-R", "a+rX", str(venv)], check=True)


def read_only_copy(app: Path, python: Path) -> None:
    """Copy the image's files, compile them (the image cannot), and make them read-only."""
    for path in image_paths():
        source = ROOT / path
        if source.is_dir():
            shutil.copytree(source, app / path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, app / path)
    subprocess.run([str(python), "-m", "compileall", "-q", str(app)], check=True)
    (app / "var").mkdir()
    for directory, _, files in os.walk(app):
        if Path(directory) == app / "var":
            continue
        for name in [*files, "."]:
            target = Path(directory, name)
            mode = target.stat().st_mode
            target.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def snapshot(tree: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in tree.rglob("*")}


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[dict]:
    """A fresh venv, the read-only app tree, its writable var/ and tmp/, Redis, a user."""
    base_python()
    user = unprivileged_user()
    # Not under pytest's tmp (mode 700): the unprivileged user must reach these paths.
    base = Path(tempfile.mkdtemp(prefix="stapel-image-"))
    base.chmod(0o755)
    venv, app, tmp = base / "opt-stapel", base / "app", base / "tmp"
    install_lock(venv)
    app.mkdir()
    read_only_copy(app, venv / "bin" / "python")
    for path in (app / "var", tmp):
        path.mkdir(exist_ok=True)
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)
    redis_port = free_port()
    redis = start_server(redis_port, tmp_path_factory.mktemp("redis"), daemonize=False)
    url = f"redis://127.0.0.1:{redis_port}/0"
    wait_until_reachable(url)
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(app),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": str(tmp),
        "TMPDIR": str(tmp),
        "STAPEL_MODEL_ROOT": str(app / "models"),
        "REDIS_URL": url,
        "STAPEL_BATCH_WAIT_MS": "5",
    }
    try:
        yield {"app": app, "tmp": tmp, "env": env, "user": user, "venv": venv}
    finally:
        redis.terminate()
        redis.wait(10)
        for directory, _, _ in os.walk(base):
            Path(directory).chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def run_as(image: dict, role: list[str], env: dict | None = None, **popen) -> subprocess.Popen:
    """Start the entry point with a role, as the unprivileged user."""
    user = image["user"]
    ids = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
    return subprocess.Popen(
        [str(image["app"] / "bin" / "docker-entrypoint"), *role],
        cwd=image["tmp"],
        env={**image["env"], **(env or {})},
        **ids,
        **popen,
    )


def listening(pid: int) -> set[tuple[str, int]]:
    """Return (address, port) of every TCP socket a process and its children listen on."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return {
        (c.laddr.ip, c.laddr.port)
        for p in procs
        for c in p.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    }


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_image_runs_web_and_worker_unprivileged_read_only_and_translates(image):
    if image["user"] is None:
        print("not root: running as the current (unprivileged) user; no uid switch needed")
    before = snapshot(image["app"] / "models")
    code = snapshot(image["app"])
    migrate = run_as(image, ["migrate"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert migrate.wait(120) == 0, migrate.stdout.read().decode()
    flask = [str(image["venv"] / "bin" / "flask"), "--app", "app", "keys", "create"]
    made = subprocess.run(
        [*flask, "--tenant", "fresh", "--quiet"],
        cwd=image["app"],
        env=image["env"],
        capture_output=True,
        text=True,
        **(
            {}
            if image["user"] is None
            else {"user": image["user"].pw_uid, "group": image["user"].pw_gid}
        ),
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    web_port, metrics_port = free_port(), free_port()
    web = run_as(
        image, ["web"], {"STAPEL_BIND": f"127.0.0.1:{web_port}", "STAPEL_WEB_WORKERS": "1"}
    )
    worker = run_as(
        image,
        ["worker", "--without-gossip", "--without-mingle"],
        {"STAPEL_WORKER_CONCURRENCY": "4", "STAPEL_METRICS_PORT": str(metrics_port)},
    )
    api = f"http://127.0.0.1:{web_port}"
    auth = {"Authorization": f"Bearer {key}"}
    try:
        wait_for(lambda: ready(api) or web.poll() is not None, 90, 0.5, "the web")
        assert web.poll() is None, "web exited"
        job = requests.post(
            f"{api}/v1/jobs",
            headers=auth,
            json={"source_lang": "en", "target_lang": "de", "segments": SOURCES},
            timeout=10,
        ).json()
        done = wait_for(
            lambda: finished(api, job["id"], auth) or worker.poll() is not None,
            120,
            0.5,
            "the job to end",
        )
        assert done is not True and done["status"] == "succeeded", done
        result = requests.get(f"{api}/v1/jobs/{job['id']}/result", headers=auth, timeout=10)
        targets = result.json()["documents"][0]["segments"]
        assert len(targets) == len(SOURCES) and all(targets) and targets != SOURCES
        for proc in (web, worker):
            uids = {p.uids().real for p in [psutil.Process(proc.pid)]}
            assert uids == {os.geteuid() if image["user"] is None else IMAGE_UID}
        # Defaults of the image's roles: every listener on loopback unless told otherwise.
        assert ("127.0.0.1", metrics_port) in listening(worker.pid)
        assert all(ip == "127.0.0.1" for ip, _ in listening(worker.pid) | listening(web.pid))
    finally:
        stop(web)
        stop(worker)
    assert snapshot(image["app"] / "models") == before
    written = set(snapshot(image["app"])) - set(code)
    assert written and all("/app/var/" in p for p in written), sorted(written)[:5]
    assert_no_work_left(image["app"] / "var" / "stapel.db")


def assert_no_work_left(db: Path) -> None:
    """The fault-test invariant: nothing queued or running, every segment written."""
    engine = make_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Job).where(Job.status.in_(ACTIVE))) == 0
        assert (
            conn.scalar(select(func.count()).select_from(Chunk).where(Chunk.status.in_(ACTIVE)))
            == 0
        )
        targets = conn.scalars(select(Segment.target)).all()
        assert len(targets) == len(SOURCES) and all(targets)
    engine.dispose()


def ready(api: str) -> bool:
    try:
        return requests.get(f"{api}/readyz", timeout=2).ok
    except requests.RequestException:
        return False


def finished(api: str, job_id: str, auth: dict) -> dict | None:
    state = requests.get(f"{api}/v1/jobs/{job_id}", headers=auth, timeout=5).json()
    return state if state["status"] in ("succeeded", "failed", "cancelled") else None
