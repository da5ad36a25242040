"""The scaling policy, as tables: wanted replicas, and decisions over time."""

from __future__ import annotations

import pytest

from autoscaler.config import PoolLimits
from autoscaler.policy import Load, PolicyState, decide, wanted_replicas

LIMITS = PoolLimits(min=1, max=5, standby=1, scale_down_delay_s=10)


@pytest.mark.parametrize(
    "running, queued, limits, wanted",
    [
        (0, 0, LIMITS, 1),  # idle: min (= standby)
        (2, 0, LIMITS, 3),  # active + standby
        (4, 0, LIMITS, 5),
        (9, 0, LIMITS, 5),  # clamped to max
        (0, 3, LIMITS, 4),  # backlog counts at once
        (1, 2, LIMITS, 4),
        (0, 0, PoolLimits(min=0, max=3, standby=0), 0),  # scale to zero
        (0, 1, PoolLimits(min=0, max=3, standby=0), 1),  # first chunk wakes it
        (0, 0, PoolLimits(min=2, max=3, standby=0), 2),  # min holds
        (3, 0, PoolLimits(max=8, standby=1, chunks_per_worker=2), 3),  # ceil(3/2) + 1
        (0, 5, PoolLimits(max=8, standby=0, queued_per_worker=2), 3),  # ceil(5/2)
        (2, 7, PoolLimits(max=8, standby=2, queued_per_worker=4), 6),  # 2 + 2 + 2
    ],
)
def test_wanted_replicas(running, queued, limits, wanted):
    assert wanted_replicas(Load(running, queued), limits) == wanted


@pytest.mark.parametrize(
    "load, current, replicas, reason",
    [
        (Load(running=2), 1, 3, "scale_up"),
        (Load(queued=10), 1, 5, "scale_up"),  # a backlog jumps, not one per poll
        (Load(running=2), 3, 3, "steady"),
        (Load(), 3, 3, "waiting_delay"),  # lower wanted: the delay starts
        (Load(), 0, 1, "scale_up"),  # below min: up at once
    ],
)
def test_single_decision(load, current, replicas, reason):
    decision = decide(load, current, LIMITS, now=100.0, state=PolicyState())
    assert (decision.replicas, decision.reason) == (replicas, reason)


def run(start: int, steps: list[tuple[float, Load]], limits: PoolLimits = LIMITS) -> list[int]:
    """Feed (time, load) steps to decide, applying each decision; return the replicas set."""
    current, state, out = start, PolicyState(), []
    for now, load in steps:
        decision = decide(load, current, limits, now, state)
        current, state = decision.replicas, decision.state
        out.append(current)
    return out


IDLE, BUSY3 = Load(), Load(running=3)


@pytest.mark.parametrize(
    "start, steps, expected, limits",
    [
        pytest.param(
            4,
            [(0, IDLE), (5, IDLE), (9.9, IDLE), (10, IDLE)],
            [4, 4, 4, 1],
            LIMITS,
            id="down only after the whole delay",
        ),
        pytest.param(
            4,
            [
                (0, IDLE),
                (4, BUSY3),
                (8, IDLE),
                (12, BUSY3),
                (16, IDLE),
                (20, IDLE),
                (25.9, IDLE),
                (26, IDLE),
            ],
            [4, 4, 4, 4, 4, 4, 4, 1],
            LIMITS,
            id="flapping load restarts the delay every time",
        ),
        pytest.param(
            5,
            [(0, IDLE), (5, Load(running=2)), (10, IDLE), (15, IDLE), (25, IDLE)],
            [5, 5, 3, 3, 1],
            LIMITS,
            id="down to the highest value wanted during the delay",
        ),
        pytest.param(
            4,
            [(0, IDLE), (5, Load(running=10)), (9, IDLE), (18, IDLE), (19, IDLE)],
            [4, 5, 5, 5, 1],
            LIMITS,
            id="up at once inside a delay, which then starts again",
        ),
        pytest.param(
            4,
            [(0, Load(busy_workers=3)), (10, Load(busy_workers=3))],
            [4, 3],
            LIMITS,
            id="never below the busy workers",
        ),
        pytest.param(
            3,
            [(0, Load(busy_workers=3)), (10, Load(busy_workers=3)), (11, Load(busy_workers=1))],
            [3, 3, 1],
            LIMITS,
            id="busy workers hold; down as soon as they finish",
        ),
        pytest.param(
            4,
            [(0, IDLE)],
            [1],
            PoolLimits(min=1, max=5, standby=1, scale_down_delay_s=0),
            id="zero delay: down at once",
        ),
        pytest.param(
            0,
            [(0, Load(queued=2)), (1, Load(running=2)), (2, IDLE), (62, IDLE)],
            [2, 2, 2, 0],
            PoolLimits(min=0, max=4, standby=0, scale_down_delay_s=60),
            id="scale from zero and back to zero",
        ),
    ],
)
def test_decisions_over_time(start, steps, expected, limits):
    assert run(start, steps, limits) == expected


UNSERVED = PoolLimits(min=1, max=4, standby=1, scale_down_delay_s=10, unserved_grace_s=30)
WAITING = Load(queued=1, unserved=1)  # wants 2: one queued + the standby


@pytest.mark.parametrize(
    "start, steps, expected",
    [
        pytest.param(
            2,
            [(0, WAITING), (29, WAITING), (30, WAITING), (59, WAITING), (60, WAITING)],
            [2, 2, 3, 3, 4],
            id="workers that serve nobody: one more after each grace",
        ),
        pytest.param(
            4,
            [(0, Load(queued=4, unserved=4)), (30, Load(queued=4, unserved=4))],
            [4, 4],
            id="never past max",
        ),
        pytest.param(
            0,
            [(0, WAITING), (29, WAITING), (30, WAITING)],
            [2, 2, 3],
            id="a scale-up starts the grace again: the new workers get their time",
        ),
        pytest.param(
            2,
            [(0, WAITING), (20, Load(queued=1)), (40, WAITING), (69, WAITING), (70, WAITING)],
            [2, 2, 2, 2, 3],
            id="a consumer seen restarts the grace",
        ),
        pytest.param(
            2,
            [(0, Load(queued=1)), (300, Load(queued=1))],
            [2, 2],
            id="served work needs nothing more",
        ),
    ],
)
def test_unserved_work_adds_a_worker(start, steps, expected):
    assert run(start, steps, UNSERVED) == expected


def test_the_unserved_decision_names_its_reason():
    first = decide(WAITING, 2, UNSERVED, now=0.0, state=PolicyState())
    assert (first.replicas, first.reason) == (2, "steady")
    second = decide(WAITING, 2, UNSERVED, now=30.0, state=first.state)
    assert (second.replicas, second.reason) == (3, "unserved")
