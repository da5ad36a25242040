"""bench/autoscale_sim.py's replay at a large pool: 1,000 workers and a day's trace.

    python -m bench.autoscale_scale                     # max 1000, trace x100, 24 h
    python -m bench.autoscale_scale --max 8 --scale 1   # the small pool, to compare

The trace is autoscale_sim's (bursty even hours, a steady trickle) with every burst and
the trickle `scale` times denser. The same policy (autoscaler.policy.decide) runs every
poll; workers are counted, not listed (idle, starting, busy in a heap), so a day at
1,000 workers takes seconds. Scale-down removes idle workers first, then starting ones,
then busy ones (marking), or victims drawn at random (no marking).
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections import deque
from dataclasses import replace

from autoscaler.config import PoolLimits
from autoscaler.policy import Load, PolicyState, decide
from bench.autoscale_sim import LIMITS, POLL_S, STARTUP_S, Chunk, Result, p95, trace


class Pool:
    """Workers by state: ready and idle (a count), starting (ready times), busy (a heap)."""

    def __init__(self, size: int) -> None:
        self.idle, self.starting, self.busy = size, deque[int](), []
        self.seq = 0

    def __len__(self) -> int:
        return self.idle + len(self.starting) + len(self.busy)

    def remove_busy(self, index: int, t: int, queue: deque, result: Result) -> None:
        _end, _seq, chunk = self.busy[index]
        self.busy[index] = self.busy[-1]
        self.busy.pop()
        heapq.heapify(self.busy)
        result.killed += 1
        result.lost_s += t - chunk.started
        queue.appendleft(chunk)


def _scale_down(pool: Pool, excess: int, marking: bool, rng, t, queue, result) -> None:
    for _ in range(excess):
        n = len(pool)
        pick = 0 if marking else rng.randrange(n)
        if marking:
            pick = 0 if pool.idle else pool.idle + (0 if pool.starting else len(pool.starting))
        if pick < pool.idle:
            pool.idle -= 1
        elif pick < pool.idle + len(pool.starting):
            pool.starting.pop()
        else:
            pool.remove_busy(rng.randrange(len(pool.busy)), t, queue, result)


def simulate(
    chunks: list[Chunk], limits: PoolLimits, *, fixed: int | None = None, marking: bool = True,
    backlog: bool = True, seed: int = 0,
) -> Result:  # fmt: skip
    """Run one strategy over the trace; return its cost and the chunks' queue waits."""
    rng, result = random.Random(seed), Result()
    pending = deque(Chunk(c.arrival, c.service) for c in chunks)
    queue: deque[Chunk] = deque()
    pool, state, done, t = Pool(fixed if fixed is not None else limits.min), PolicyState(), 0, 0
    while done < len(chunks):
        while pending and pending[0].arrival <= t:
            queue.append(pending.popleft())
        while pool.busy and pool.busy[0][0] <= t:
            _end, _seq, chunk = heapq.heappop(pool.busy)
            result.waits.append(chunk.started - chunk.arrival)
            pool.idle, done = pool.idle + 1, done + 1
        while pool.starting and pool.starting[0] <= t:
            pool.starting.popleft()
            pool.idle += 1
        while pool.idle and queue:
            chunk = queue.popleft()
            chunk.started, pool.idle, pool.seq = t, pool.idle - 1, pool.seq + 1
            heapq.heappush(pool.busy, (t + chunk.service, pool.seq, chunk))
        if fixed is None and t % POLL_S == 0:
            busy = len(pool.busy)
            load = Load(running=busy, queued=len(queue) if backlog else 0, busy_workers=busy)
            decision = decide(load, len(pool), limits, t, state)
            state = decision.state
            pool.starting.extend([t + STARTUP_S] * max(0, decision.replicas - len(pool)))
            _scale_down(pool, len(pool) - decision.replicas, marking, rng, t, queue, result)
        result.worker_seconds += len(pool)
        result.peak = max(result.peak, len(pool))
        t += 1
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--max", type=int, default=1000, help="the pool's max workers")
    parser.add_argument("--scale", type=int, default=100, help="trace density multiplier")
    args = parser.parse_args(argv)
    limits = replace(LIMITS, max=args.max)
    chunks = trace(args.seed, args.hours, args.scale)
    work = sum(c.service for c in chunks)
    print(
        f"trace: seed={args.seed} hours={args.hours} scale={args.scale} chunks={len(chunks)} "
        f"work={work} worker-s; limits min={limits.min} max={limits.max} "
        f"standby={limits.standby} delay={limits.scale_down_delay_s:g}s poll={POLL_S}s "
        f"startup={STARTUP_S}s\n"
    )
    print(
        "| strategy | worker-seconds | vs work | p95 queue wait (s) | max wait (s) "
        "| peak workers | busy workers killed | work lost (s) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    strategies = {
        "policy + deletion-cost marking": {},
        "policy, no marking (random victims)": {"marking": False},
        "policy without the backlog term": {"backlog": False},
        f"fixed at max ({limits.max})": {"fixed": limits.max},
        f"fixed at a quarter of max ({limits.max // 4})": {"fixed": max(1, limits.max // 4)},
    }
    for name, options in strategies.items():
        r = simulate(chunks, limits, seed=args.seed, **options)
        print(
            f"| {name} | {r.worker_seconds} | {r.worker_seconds / work:.2f}x | {p95(r.waits)} "
            f"| {max(r.waits)} | {r.peak} | {r.killed} | {r.lost_s} |"
        )


if __name__ == "__main__":
    main()
