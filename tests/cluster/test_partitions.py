"""Network partitions on a cluster of namespaces: a worker host cut off, the web cut from Redis.

Each scenario ends with the invariant check: every accepted job succeeded, no segment
lost, none written twice (a trigger logs every write), every translation the clean run's.
The figures go to var/cluster-report.json (git-ignored; STAPEL_CLUSTER_REPORT moves it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
from sqlalchemy import func, select

from stapel.broker import make_celery
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from stapel.settings import Settings
from stapel.tables import Chunk, Job, Segment
from tests.cluster.netns import Cluster, why_not
from tests.factories import sentences, wait_for
from tests.faults.harness import (
    SHORT_ENV,
    Reference,
    duplicated_writes,
    install_write_counter,
    stuck_jobs,
)
from workers.command import worker_command

pytestmark = [pytest.mark.slow, pytest.mark.fault]

CUT_S = 30.0
"""How long a link stays cut: longer than the heartbeat's staleness, so the watchdog acts."""
REPORT = Path(
    os.environ.get("STAPEL_CLUSTER_REPORT")
    or Path(__file__).resolve().parents[2] / "var" / "cluster-report.json"
)
"""Where the scenarios' figures are written (var/ is git-ignored): never a tracked file."""
ENV = {**SHORT_ENV, "STAPEL_HEARTBEAT_TIMEOUT_S": "5", "STAPEL_CHUNK_SEGMENTS": "50"}
MIGRATE = (
    "from alembic import command; from alembic.config import Config; "
    "c = Config('alembic.ini'); c.attributes['database_url'] = {url!r}; "
    "command.upgrade(c, 'head')"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, model_root):
    reason = why_not()
    if reason:
        pytest.skip(f"no cluster of namespaces: {reason}")
    workdir = tmp_path_factory.mktemp("cluster")
    os.chmod(workdir, 0o755)
    net = Cluster(workdir).build()
    try:
        db_url, redis_url = net.start_services()
        env = {**os.environ, **ENV, "DATABASE_URL": db_url, "REDIS_URL": redis_url}
        wait_for(lambda: _migrated(net, env, db_url), timeout=60, interval=0.5, what="PostgreSQL")
        for host in ("web", "w1", "w2"):  # each host its own model root: no shared files
            shutil.copytree(model_root, workdir / host / "models")
        _start(net, env)
        net.env, net.db_url, net.redis_url = env, db_url, redis_url
        net.run_in(_connect, net)
        yield net
    finally:
        net.close()


def _migrated(net: Cluster, env: dict, url: str) -> bool:
    try:
        net.python("svc", MIGRATE.format(url=url), env)
    except RuntimeError as exc:
        net.last_error = str(exc)[-500:]
        return False
    return True


def _start(net: Cluster, env: dict) -> None:
    web = net.workdir / "web" / "models"
    net.spawn(
        "web",
        "web",
        [sys.executable, "-m", "app.server"],
        {**env, "STAPEL_MODEL_ROOT": str(web), "STAPEL_RATE_SUBMIT": "off",
         "STAPEL_BIND": f"{net.ip('web')}:8000", "STAPEL_WEB_WORKERS": "1",
         "STAPEL_WEB_THREADS": "8"},
    )  # fmt: skip
    for host in ("w1", "w2"):
        models = net.workdir / host / "models"
        net.spawn(
            host,
            host,
            worker_command("cpu", f"{host}@{host}", 4) + ["--without-gossip", "--without-mingle"],
            {**env, "STAPEL_MODEL_ROOT": str(models), "STAPEL_POOL": "cpu"},
        )
    # As deploy/beat.yaml: a control worker beside beat, so the watchdog runs however
    # busy the pool workers' task threads are (their waiting chunks can hold them all).
    net.spawn(
        "control",
        "svc",
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "control",
         "-n", "control@svc", "-P", "threads", "-c", "2", "--without-gossip",
         "--without-mingle"],
        {**env, "STAPEL_MODEL_ROOT": str(web)},
    )  # fmt: skip
    net.spawn(
        "beat",
        "svc",
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat", "--schedule",
         str(net.workdir / "beat-schedule")],
        {**env, "STAPEL_MODEL_ROOT": str(web)},
    )  # fmt: skip


def _connect(net: Cluster) -> None:
    """On the cli host: the DB, a key, the web's URL, and every process ready."""
    net.engine = make_engine(net.db_url)
    net.sessions = make_session_factory(net.engine)
    install_write_counter(net.engine)
    with net.sessions() as s:
        net.auth = {"Authorization": f"Bearer {create_key(s, 'cluster')[1]}"}
    net.url = f"http://{net.ip('web')}:8000"
    wait_for(lambda: _ok(net.url + "/readyz"), timeout=90, interval=0.5, what="the web")
    celery = net.celery = make_celery(Settings.from_env(net.env))
    for name in ("w1@w1", "w2@w2"):
        wait_for(
            lambda n=name: celery.control.ping(destination=[n], timeout=1),
            timeout=120,
            what=f"worker {name}",
        )


def _ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:
        return False


def _post(net: Cluster, texts: list[str]) -> requests.Response:
    body = {"source_lang": "en", "target_lang": "de", "segments": texts}
    headers = {**net.auth, "Idempotency-Key": uuid.uuid4().hex}
    return requests.post(f"{net.url}/v1/jobs", json=body, headers=headers, timeout=30)


def _running_on(net: Cluster, worker: str) -> int:
    with net.sessions() as s:
        query = select(func.count()).where(Chunk.worker == worker, Chunk.status == "running")
        return s.scalar(query)


def _all_ended(net: Cluster, ids: list[str]) -> bool:
    with net.sessions() as s:
        rows = s.execute(select(Job.status).where(Job.id.in_(ids))).scalars().all()
        return len(rows) == len(ids) and all(r in ("succeeded", "failed") for r in rows)


def _verify(net: Cluster, texts: dict[str, list[str]], reference: Reference) -> dict:
    """The invariant check; returns the figures."""
    ids = list(texts)
    with net.sessions() as s:
        statuses = dict(s.execute(select(Job.id, Job.status).where(Job.id.in_(ids))).all())
        lost = wrong = 0
        for job_id, sources in texts.items():
            rows = dict(
                s.execute(select(Segment.idx, Segment.target).where(Segment.job_id == job_id)).all()
            )
            expected = reference.translate(sources)
            lost += sum(rows.get(i) is None for i in range(len(sources)))
            wrong += sum(rows.get(i) not in (None, expected[i]) for i in range(len(sources)))
        duplicated = duplicated_writes(s, ids)
        stuck = stuck_jobs(s)  # anywhere in the database, not only these jobs
        unfinished = {
            job_id: [
                (c.idx, c.status, c.attempts, c.worker, c.done)
                for c in s.scalars(select(Chunk).where(Chunk.job_id == job_id))
            ]
            for job_id, status in statuses.items()
            if status != "succeeded"
        }
    return {
        "unfinished": {j: [statuses[j], *rows] for j, rows in unfinished.items()},
        "jobs": len(ids),
        "succeeded": sum(v == "succeeded" for v in statuses.values()),
        "segments": sum(map(len, texts.values())),
        "lost": lost,
        "wrong": wrong,
        "duplicated": duplicated,
        "stuck": len(stuck),
    }


def _record(scenario: str, figures: dict) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[scenario] = {**figures, "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    REPORT.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _worker_cut(net: Cluster) -> tuple[dict, dict]:
    texts = {}
    for seed in range(4):
        sources = sentences(200, seed=seed)
        response = _post(net, sources)
        assert response.status_code == 202, response.text
        texts[response.json()["id"]] = sources
    wait_for(lambda: _running_on(net, "w1@w1"), timeout=60, what="a chunk running on w1")
    held = _running_on(net, "w1@w1")
    net.cut("w1")
    cut_at = time.monotonic()
    try:  # healed whatever happens: the next scenario runs on the same cluster
        wait_for(lambda: not _running_on(net, "w1@w1"), timeout=CUT_S, what="w1's chunks requeued")
        moved_s = time.monotonic() - cut_at
        time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))  # the cut's length is the fault
    finally:
        net.heal("w1")
    wait_for(lambda: _all_ended(net, list(texts)), timeout=120, what="every job ended")
    done_s = time.monotonic() - cut_at

    # After healing w1 finds its claims gone at its next write and stops those chunks (a
    # claim whose answer the cut held back finds them ended and skips them); a task whose
    # database retries ran out during the cut (about 15 s of them) has failed instead, its
    # chunk left to the watchdog (docs/reliability.md, database outages). Its chunks taken
    # along run inside its task: a worker with no task running writes nothing more.
    wait_for(lambda: _idle(net, "w1@w1"), timeout=90, what="w1 to end every task it ran")
    return texts, {
        "cut_s": CUT_S,
        "chunks_on_w1_at_cut": held,
        "cut_to_requeued_s": round(moved_s, 1),
        "cut_to_all_done_s": round(done_s, 1),
    }


def _idle(net: Cluster, worker: str) -> bool:
    """Whether worker answers and runs no task."""
    replies = net.celery.control.inspect(destination=[worker], timeout=1).active() or {}
    return replies.get(worker) == []


def _unexpected(log: str) -> list[str]:
    """The task failures in a worker's log other than the database's being away."""
    return [
        line
        for line in log.splitlines()
        if "raised unexpected" in line and "OperationalError" not in line
    ]


def test_a_worker_host_cut_off_for_30_s_loses_nothing_and_writes_nothing_twice(cluster, model_root):
    texts, figures = cluster.run_in(_worker_cut, cluster)
    figures |= cluster.run_in(_verify, cluster, texts, Reference(model_root))
    figures["w1_unexpected"] = _unexpected(cluster.log("w1"))
    _record("worker_host_cut", figures)
    assert figures["w1_unexpected"] == [], "a failure other than the database's absence"
    assert figures["succeeded"] == figures["jobs"]
    assert (figures["lost"], figures["wrong"], figures["duplicated"]) == (0, 0, 0)
    assert figures["stuck"] == 0, "a job queued or running with all its chunks ended"


def _redis_cut(net: Cluster) -> tuple[dict, dict]:
    texts, refused, retry_after = {}, 0, set()
    net.cut_route("web", net.redis_ip)
    cut_at = time.monotonic()
    try:
        seed = 100
        while time.monotonic() - cut_at < CUT_S:
            seed += 1
            sources = sentences(20, seed=seed)
            response = _post(net, sources)
            if response.status_code == 202:
                texts[response.json()["id"]] = sources
            else:
                assert response.status_code == 503, response.text
                refused += 1
                retry_after.add(response.headers.get("Retry-After"))
    finally:
        net.heal_route("web", net.redis_ip)
    accepted_during = len(texts)
    for seed in range(200, 203):  # after healing the web accepts again
        sources = sentences(20, seed=seed)
        response = wait_for(
            lambda s=sources: (r := _post(net, s)).status_code == 202 and r,
            timeout=30,
            interval=0.5,
            what="the web to accept again",
        )
        texts[response.json()["id"]] = sources
    wait_for(lambda: _all_ended(net, list(texts)), timeout=120, what="every accepted job ended")
    return texts, {
        "cut_s": CUT_S,
        "refused_503": refused,
        "retry_after": sorted(r for r in retry_after if r),
        "accepted_during_cut": accepted_during,
        "accepted_total": len(texts),
    }


def test_the_web_cut_from_redis_answers_503_and_loses_nothing_it_accepted(cluster, model_root):
    texts, figures = cluster.run_in(_redis_cut, cluster)
    figures |= cluster.run_in(_verify, cluster, texts, Reference(model_root))
    _record("web_redis_cut", figures)
    assert figures["refused_503"] > 0 and figures["retry_after"]
    assert figures["succeeded"] == figures["jobs"]
    assert (figures["lost"], figures["wrong"], figures["duplicated"]) == (0, 0, 0)
    assert figures["stuck"] == 0, "a job queued or running with all its chunks ended"
