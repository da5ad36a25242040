"""The Kubernetes backend against the fake API server, through the real client."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from sqlalchemy import update
from sqlalchemy.orm import sessionmaker

from autoscaler.backends.base import BackendError
from autoscaler.backends.kubernetes import DELETION_COST, MERGE_PATCH, KubernetesBackend
from autoscaler.config import PoolLimits, PoolSettings
from autoscaler.loop import PoolLoop
from autoscaler.victims import BUSY_COST, WorkerView
from stapel.db import make_engine, make_session_factory
from stapel.metrics import AUTOSCALER_KEY
from stapel.presence import presence_key, publish
from stapel.tables import Chunk, db_now
from tests.autoscaler.conftest import api_client_for
from tests.autoscaler.rows import add_chunks
from tests.factories import wait_for

POOL = PoolSettings(
    "cpu",
    PoolLimits(min=1, max=5, standby=1, scale_down_delay_s=0),
    poll_s=0.05,
    deployment="stapel-worker-cpu",
)


def test_reads_replicas_and_workers(backend, kube):
    assert backend.replicas() == 3
    assert backend.workers() == [f"cpu@stapel-worker-cpu-{i}" for i in range(3)]
    listed = [r for r in kube.requests if r.path.endswith("/pods")]
    assert listed[0].query["labelSelector"] == [kube.selector("stapel-worker-cpu")]


def test_scale_up_sends_one_merge_patch(backend, kube):
    backend.scale(5, [])
    (patch,) = kube.patches()
    assert patch.path == "/apis/apps/v1/namespaces/stapel/deployments/stapel-worker-cpu/scale"
    assert (patch.content_type, patch.body) == (MERGE_PATCH, {"spec": {"replicas": 5}})
    assert backend.replicas() == 5


def test_scale_down_marks_idle_pods_cheapest_first(backend, kube):
    views = [
        WorkerView("cpu@stapel-worker-cpu-0", busy=1, models=1),
        WorkerView("cpu@stapel-worker-cpu-1", models=2),
        WorkerView("cpu@stapel-worker-cpu-2"),
    ]
    backend.scale(1, views)
    pod_patches = kube.patches("/pods/")
    assert [(p.path.rsplit("/", 1)[1], p.content_type, p.body) for p in pod_patches] == [
        (
            "stapel-worker-cpu-0",
            MERGE_PATCH,
            {"metadata": {"annotations": {DELETION_COST: str(BUSY_COST + 1001)}}},
        ),
        ("stapel-worker-cpu-1", MERGE_PATCH, {"metadata": {"annotations": {DELETION_COST: "2"}}}),
        ("stapel-worker-cpu-2", MERGE_PATCH, {"metadata": {"annotations": {DELETION_COST: "0"}}}),
    ]
    assert kube.patches()[-1].body == {"spec": {"replicas": 1}}, "marks come before the scale"
    assert list(kube.pods) == ["stapel-worker-cpu-0"], "the busy pod is the one kept"


def test_unchanged_costs_are_not_patched_again(backend, kube):
    views = [WorkerView(f"cpu@stapel-worker-cpu-{i}") for i in range(3)]
    backend.mark(views)
    assert backend.mark(views) == 0


@pytest.mark.parametrize("status", [500, 503, 403])
def test_api_errors_become_backend_errors(backend, kube, status):
    kube.fail_next = [status]
    with pytest.raises(BackendError, match=str(status)):
        backend.replicas()
    assert backend.replicas() == 3


def test_connection_refused_is_a_backend_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    api = api_client_for(f"http://127.0.0.1:{port}")
    with pytest.raises(BackendError):
        KubernetesBackend(api, "stapel", "stapel-worker-cpu", "cpu", timeout_s=2).replicas()


@pytest.fixture
def sessions(engine) -> sessionmaker:
    return make_session_factory(engine)


def test_loop_scales_the_deployment_from_db_load(backend, kube, sessions, session):
    loop = PoolLoop(POOL, backend, sessions, None)
    add_chunks(
        session,
        "cpu",
        [
            ("running", "cpu@stapel-worker-cpu-1"),
            ("queued", None),
            ("queued", None),
            ("succeeded", None),
        ],
    )
    add_chunks(session, "gpu", [("queued", None)] * 5)
    assert loop.tick().replicas == 4  # 1 running + 2 queued + 1 standby
    assert kube.deployments["stapel-worker-cpu"]["replicas"] == 4


def test_loop_survives_api_errors_and_acts_once_it_is_back(backend, kube, sessions, session):
    loop = PoolLoop(POOL, backend, sessions, None)
    add_chunks(session, "cpu", [("queued", None)] * 4)
    kube.fail_next = [500] * 4
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,))
    thread.start()
    try:
        wait_for(
            lambda: kube.deployments["stapel-worker-cpu"]["replicas"] == 5,
            timeout=10,
            what="the loop to scale once the API answers again",
        )
    finally:
        stop.set()
        thread.join()
    assert not kube.fail_next, "the loop went on calling through the errors"


def test_loop_skips_the_tick_when_the_db_is_down(backend, kube):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    down = make_session_factory(make_engine(f"postgresql://stapel@127.0.0.1:{port}/stapel"))
    loop = PoolLoop(POOL, backend, down, None)
    assert loop.tick() is None
    assert kube.requests == [], "no decision, and no call, on data it could not read"


def test_loop_adds_a_pod_when_the_pools_queued_work_has_no_live_consumer(
    backend, kube, sessions, session, redis_client
):
    """Three pods, one chunk queued a minute: its load wants three (1 + standby 2), but no
    live worker of the cpu pool is there (the pods' workers are wedged or gone). Once the
    grace is over the Deployment gets a fourth; a cpu worker's record keeps it at three."""
    limits = PoolLimits(min=1, max=5, standby=2, scale_down_delay_s=300, unserved_grace_s=30)
    pool = PoolSettings("cpu", limits, poll_s=0.05, deployment="stapel-worker-cpu")
    now = [0.0]
    loop = PoolLoop(pool, backend, sessions, redis_client, clock=lambda: now[0])
    add_chunks(session, "cpu", [("queued", None)])
    session.execute(update(Chunk).values(created_at=db_now(-60)))
    session.commit()
    publish(redis_client, "control@a", {"pool": "", "busy": 0})
    publish(redis_client, "cpu@stapel-worker-cpu-0", {"pool": "cpu", "busy": 0})

    for now[0] in (0.0, 30.0, 60.0):
        assert loop.tick().replicas == 3  # served: the load's three
    redis_client.delete(presence_key("cpu@stapel-worker-cpu-0"))  # its worker died
    assert loop.tick().replicas == 3  # at 60: the grace starts
    now[0] = 89.0
    assert loop.tick().replicas == 3
    now[0] = 90.0
    decision = loop.tick()
    assert (decision.replicas, decision.reason) == (4, "unserved")
    assert kube.deployments["stapel-worker-cpu"]["replicas"] == 4
    published = json.loads(redis_client.get(AUTOSCALER_KEY + "cpu"))
    assert published["unserved_starts"] == 1
    now[0] = 100.0
    assert loop.tick().replicas == 4  # the new pod has its grace to show up


def test_a_pool_at_zero_with_unserved_work_is_patched_to_one_and_says_so(
    kube, sessions, session, redis_client, caplog
):
    """A gpu pool scaled to zero: its first chunk waits with nobody to serve it. The
    Deployment goes to one at once, with the warning and the count of such starts."""
    kube.add_deployment("stapel-worker-gpu", 0, {"app.kubernetes.io/component": "worker-gpu"})
    api = api_client_for(kube.url)
    backend = KubernetesBackend(api, kube.namespace, "stapel-worker-gpu", "gpu", timeout_s=5)
    limits = PoolLimits(min=0, max=2, standby=0, scale_down_delay_s=300)
    loop = PoolLoop(PoolSettings("gpu", limits, deployment="stapel-worker-gpu"), backend,
                    sessions, redis_client)  # fmt: skip
    add_chunks(session, "gpu", [("queued", None)])
    session.execute(update(Chunk).values(created_at=db_now(-60)))
    session.commit()
    caplog.set_level("WARNING", logger="autoscaler.loop")
    try:
        assert loop.tick().replicas == 1
    finally:
        api.close()
    assert kube.deployments["stapel-worker-gpu"]["replicas"] == 1
    assert json.loads(redis_client.get(AUTOSCALER_KEY + "gpu"))["unserved_starts"] == 1
    assert "queued work has no live consumer, adding workers pool=gpu chunks=1" in caplog.text
