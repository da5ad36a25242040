"""The scaling decision: a pure function of load, replicas, limits, clock and last state.

wanted = ceil(running / chunks_per_worker) + ceil(queued / queued_per_worker) + standby,
clamped to [min, max]. Up at once; down only to the highest value wanted during a whole
scale_down_delay_s in which every tick wanted less than now, and never below the busy
workers. A pool whose queued work no live worker consumes (stapel.unserved) gets one
replica more than it has once its workers have had unserved_grace_s to show up: the
ones it has serve nobody. docs/autoscaling.md explains the rule and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from autoscaler.config import PoolLimits


@dataclass(frozen=True)
class Load:
    """What one pool is doing now: running and queued chunks (DB), busy workers, and the
    queued chunks no live worker consumes (0 when presence could not be read)."""

    running: int = 0
    queued: int = 0
    busy_workers: int = 0
    unserved: int = 0


@dataclass(frozen=True)
class PolicyState:
    """Memory between ticks: since when fewer replicas were wanted, the most wanted since,
    and since when the pool's queued work has waited for a consumer it was given."""

    below_since: float | None = None
    window_peak: int = 0
    unserved_since: float | None = None


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
    decision = _by_load(load, current, limits, now, state)
    if load.unserved <= 0:
        return decision
    if decision.replicas > current:  # the new workers are its consumers: give them time
        return replace(decision, state=replace(decision.state, unserved_since=now))
    since = now if state.unserved_since is None else state.unserved_since
    if now - since < limits.unserved_grace_s or current >= limits.max:
        return replace(decision, state=replace(decision.state, unserved_since=since))
    return Decision(current + 1, decision.wanted, "unserved", PolicyState(unserved_since=now))


def _by_load(
    load: Load, current: int, limits: PoolLimits, now: float, state: PolicyState
) -> Decision:
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
