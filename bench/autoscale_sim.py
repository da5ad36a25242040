"""Replay a seeded arrival trace against the autoscaling policy on a simulated clock.

    python bench/autoscale_sim.py [--seed 7] [--hours 24]

Chunks arrive in bursts and quiet spells; each worker runs one chunk at a time and is
ready startup_s after it is started. Every poll_s the policy decides; a scale-down
removes idle workers first (deletion-cost marking) or random ones (what a ReplicaSet
does with no marking). A busy worker removed loses its chunk, which is queued again.
Prints worker-seconds, queue waits and busy workers killed for each strategy.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autoscaler.config import PoolLimits
from autoscaler.policy import Load, PolicyState, decide

LIMITS = PoolLimits(min=1, max=8, standby=1, scale_down_delay_s=300)
POLL_S, STARTUP_S = 15, 30


@dataclass
class Chunk:
    arrival: int
    service: int
    started: int = -1


@dataclass
class Worker:
    ready_at: int
    chunk: Chunk | None = None
    ends_at: int = 0


@dataclass
class Result:
    worker_seconds: int = 0
    waits: list[int] = field(default_factory=list)
    killed: int = 0
    lost_s: int = 0
    peak: int = 0


def trace(seed: int, hours: int, scale: int = 1) -> list[Chunk]:
    """Return chunks sorted by arrival: bursty hours alternate with quiet ones.

    `scale` makes every burst and the trickle that many times denser.
    """
    rng, chunks = random.Random(seed), []
    for hour in range(hours):
        start = hour * 3600
        if hour % 2 == 0:
            for _ in range(3):
                at = start + rng.randrange(0, 3000)
                chunks += [
                    Chunk(at + rng.randrange(60), rng.randint(30, 90))
                    for _ in range(rng.randint(10, 30) * scale)
                ]
        t = start
        while (t := t + int(rng.expovariate(scale / 300)) + 1) < start + 3600:
            chunks.append(Chunk(t, rng.randint(30, 90)))
    return sorted(chunks, key=lambda c: c.arrival)


def simulate(
    chunks: list[Chunk],
    *,
    fixed: int | None = None,
    marking: bool = True,
    backlog: bool = True,
    seed: int = 0,
) -> Result:
    """Run one strategy over the trace; return what it cost and how long chunks waited."""
    rng, result = random.Random(seed), Result()
    pending = deque(Chunk(c.arrival, c.service) for c in chunks)
    queue: deque[Chunk] = deque()
    workers = [Worker(0) for _ in range(fixed if fixed is not None else LIMITS.min)]
    state, done, t = PolicyState(), 0, 0
    while done < len(chunks):
        while pending and pending[0].arrival <= t:
            queue.append(pending.popleft())
        for w in workers:
            if w.chunk is not None and w.ends_at <= t:
                result.waits.append(w.chunk.started - w.chunk.arrival)
                w.chunk, done = None, done + 1
            if w.chunk is None and w.ready_at <= t and queue:
                w.chunk = queue.popleft()
                w.chunk.started, w.ends_at = t, t + w.chunk.service
        if fixed is None and t % POLL_S == 0:
            busy = sum(w.chunk is not None for w in workers)
            load = Load(running=busy, queued=len(queue) if backlog else 0, busy_workers=busy)
            decision = decide(load, len(workers), LIMITS, t, state)
            state = decision.state
            workers += [Worker(t + STARTUP_S) for _ in range(decision.replicas - len(workers))]
            excess = len(workers) - decision.replicas
            if excess > 0:
                order = (
                    sorted(workers, key=lambda w: w.chunk is not None)
                    if marking
                    else rng.sample(workers, len(workers))
                )
                for victim in order[:excess]:
                    workers.remove(victim)
                    if victim.chunk is not None:
                        result.killed += 1
                        result.lost_s += t - victim.chunk.started
                        queue.appendleft(victim.chunk)
        result.worker_seconds += len(workers)
        result.peak = max(result.peak, len(workers))
        t += 1
    return result


def p95(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(0.95 * len(ordered)) - 1, 0)]


STRATEGIES = {
    "policy + deletion-cost marking": {},
    "policy, no marking (random victims)": {"marking": False},
    "policy without the backlog term": {"backlog": False},
    f"fixed at max ({LIMITS.max})": {"fixed": LIMITS.max},
    f"fixed at min ({LIMITS.min})": {"fixed": LIMITS.min},
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hours", type=int, default=24)
    args = parser.parse_args(argv)
    chunks = trace(args.seed, args.hours)
    print(
        f"trace: seed={args.seed} hours={args.hours} chunks={len(chunks)} "
        f"work={sum(c.service for c in chunks)} worker-s; limits min={LIMITS.min} "
        f"max={LIMITS.max} standby={LIMITS.standby} delay={LIMITS.scale_down_delay_s:g}s "
        f"poll={POLL_S}s startup={STARTUP_S}s\n"
    )
    print(
        "| strategy | worker-seconds | p95 queue wait (s) | max wait (s) | peak workers "
        "| busy workers killed | work lost (s) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, options in STRATEGIES.items():
        r = simulate(chunks, seed=args.seed, **options)
        print(
            f"| {name} | {r.worker_seconds} | {p95(r.waits)} | {max(r.waits)} | {r.peak} "
            f"| {r.killed} | {r.lost_s} |"
        )


if __name__ == "__main__":
    main()
