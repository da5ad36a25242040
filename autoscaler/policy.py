"""The scaling decision: a pure function of load, replicas, limits, clock and last state.

wanted = ceil(running / chunks_per_worker) + ceil(queued / queued_per_worker) + standby,
clamped to [min, max]. Up at once; down only to the highest value wanted during a whole
scale_down_delay_s in which every tick wanted less than now, and never below the busy
workers. docs/autoscaling.md explains the rule and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.config import PoolLimits


@dataclass(frozen=True)
class Load:
    """What one pool is doing now: running and queued chunks (DB), busy workers."""

    running: int = 0
    queued: int = 0
    busy_workers: int = 0


@dataclass(frozen=True)
class PolicyState:
    """Memory between ticks: since when fewer replicas were wanted, and the most wanted since."""

    below_since: float | None = None
    window_peak: int = 0


@dataclass(frozen=True)
class Decision:
    """What to set the pool to (equal to current when nothing changes), and why."""

    replicas: int
    wanted: int
    reason: str
    state: PolicyState

    def changes(self, current: int) -> bool:
        return self.replicas != current


def wanted_replicas(load: Load, limits: PoolLimits) -> int:
    """Return active + backlog + standby workers, clamped to [min, max]."""
    active = math.ceil(load.running / limits.chunks_per_worker)
    backlog = math.ceil(load.queued / limits.queued_per_worker)
    return max(limits.min, min(limits.max, active + backlog + limits.standby))


def decide(
    load: Load, current: int, limits: PoolLimits, now: float, state: PolicyState
) -> Decision:
    """Return the replicas to set now and the state to pass to the next call."""
    wanted = wanted_replicas(load, limits)
    if wanted > current:
        return Decision(wanted, wanted, "scale_up", PolicyState())
    if wanted == current:
        return Decision(current, wanted, "steady", PolicyState())
    if state.below_since is None:
        since, peak = now, wanted
    else:
        since, peak = state.below_since, max(state.window_peak, wanted)
    state = PolicyState(since, peak)
    if now - since < limits.scale_down_delay_s:
        return Decision(current, wanted, "waiting_delay", state)
    target = max(state.window_peak, load.busy_workers)
    if target >= current:
        return Decision(current, wanted, "held_by_busy_workers", state)
    return Decision(target, wanted, "scale_down", PolicyState())
