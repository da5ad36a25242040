"""Removal order and pod-deletion costs."""

from __future__ import annotations

import pytest

from autoscaler.victims import BUSY_COST, WorkerView, deletion_cost, idle_victims, removal_order


@pytest.mark.parametrize(
    "worker, cost",
    [
        (WorkerView("cpu@a"), 0),
        (WorkerView("cpu@a", models=2), 2),
        (WorkerView("cpu@a", busy=1), BUSY_COST + 1000),
        (WorkerView("cpu@a", busy=2, models=1), BUSY_COST + 2001),
    ],
)
def test_deletion_cost(worker, cost):
    assert deletion_cost(worker) == cost


def test_removal_order_idle_then_fewest_models_then_busy():
    workers = [
        WorkerView("cpu@busy", busy=1),
        WorkerView("cpu@two", models=2),
        WorkerView("cpu@none"),
        WorkerView("cpu@one", models=1),
    ]
    assert [w.pod for w in removal_order(workers)] == ["none", "one", "two", "busy"]


@pytest.mark.parametrize(
    "count, names",
    [(0, []), (1, ["cpu@idle"]), (2, ["cpu@idle", "cpu@warm"]), (5, ["cpu@idle", "cpu@warm"])],
)
def test_idle_victims_never_busy(count, names):
    workers = [
        WorkerView("cpu@busy", busy=1),
        WorkerView("cpu@warm", models=1),
        WorkerView("cpu@idle"),
    ]
    assert [w.name for w in idle_victims(workers, count)] == names
