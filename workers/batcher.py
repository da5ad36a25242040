"""Auto-batching across jobs: one batcher thread per loaded model.

Tasks running at once on a worker submit their segments here; the batcher merges them
into shared batches. A batch runs when the waiting segments fill the token budget or
when the oldest of them has waited `wait_s`, whichever comes first (the `batch_size` /
`auto_batching_timeout` pair of serving pipelines). Segments are served by priority
(higher first), then in arrival order, so an old low-priority job is overtaken only by
higher-priority work, never by newer work of its own priority. Each request gets back
exactly its own segments, batch by batch, with their indexes.

How a batch is cut: every batch holds the head, the oldest segment of the highest
priority waiting, so each batch serves the head and nothing waits behind work of its own
priority that came later. Around the head, the batch takes segments of the same
priority from a window of the next WINDOW_BUDGETS budgets' worth, sorted by length, the
way CTranslate2 sorts its own input: a batch of similar lengths wastes little on
padding (docs/design/batch-limits.md has the figures).
Room left over is filled with lower-priority segments that fit.

Identical pieces (the same tokens: stapel.mtcache.piece_key) are translated once: a
piece that arrives while an identical one waits or translates rides on it (dedup in
flight), and so does one that arrives after that one was delivered but before the
request that holds it has written it (Submission.release), the window in which the MT
cache does not have it yet. What rides gets the translation, never another request's text.

Long segments: each segment enters as pieces of at most the model's input limit in
tokens (its sentences, cut further where needed: workers/submission.py) and comes back
whole. A batch that raises is bisected until the pieces that fail alone are found; the
rest are delivered as if nothing happened, and each piece that failed alone fails its
segment with a SegmentError. Only when every piece of a batch fails alone is the
engine itself at fault: then the batch's tasks see the error raised.

The interactive lane (stapel.broker.INTERACTIVE_PRIORITY, above every job) waits only
INTERACTIVE_WAIT_S for company instead of `wait_s`: its segments are the head of the
next batch a thread cuts, a batch of a fraction of the budget (INTERACTIVE_BUDGET_DIV)
whose room left is filled with other work as usual. A small request of priority 9
(stapel.broker.URGENT_UP_TO segments at most) takes the same short cuts, below the lane.

On a GPU (`in_flight`, workers/engine.py's PIPELINE_DEPTH) one thread cuts batches and
queues them on the device without waiting, up to `in_flight` at once, and another
delivers each batch's results as they come: the device decodes one batch while the next
waits queued behind it, and Python's work between two batches overlaps their decoding.

Parallel batches: with `parallel` above one (CTranslate2's `inter_threads`), as many
threads each cut a batch by the rules above and translate it, so that many batches run
at once; each of them still waits for a full budget or for its oldest segment to have
waited `wait_s`.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ctranslate2
import sentencepiece as spm

from stapel import metrics
from stapel.broker import fast_lane
from stapel.mtcache import piece_key
from workers.families import Codec, decode_items, target_prefixes
from workers.isolation import hand_out, isolate, logids
from workers.submission import Item, Planned, Result, Submission, plan, with_scores

log = logging.getLogger(__name__)

Known = Callable[[list[tuple[str, str]]], dict[str, tuple[str, str]]]
"""Looks pieces up before they queue: (key, text) of each -> key -> (translation, origin)."""


@dataclass(frozen=True)
class Request:
    """One caller's segments for a batcher, with how they go in (Batcher.submit's)."""

    items: list[tuple[int, str]]
    priority: int = 5
    job_id: str | None = None
    tick_s: float | None = None
    split_sentences: bool = True
    known: Known | None = None
    codec: Codec | None = None


WINDOW_BUDGETS = 32
"""How many token budgets of waiting segments one batch is chosen from, sorted by length:
enough to span the chunks a worker holds (STAPEL_WORKER_SEGMENTS; docs/design/batch-limits.md)."""


INTERACTIVE_WAIT_S = 0.002
"""How long a segment of the interactive lane waits for company instead of `wait_s`: a
caller is waiting, and an idle thread should start on it at once."""
INTERACTIVE_BUDGET_DIV = 8
"""A batch headed by the interactive lane holds at most 1/INTERACTIVE_BUDGET_DIV of the
token budget (the lane's segments, then what fits beside them): it takes a fraction of a
full batch's time, so a caller on a busy worker waits for about one batch, not two."""


MIN_SHARE_DIV = 8
"""A batch split to share the last work among parallel threads keeps at least
1/MIN_SHARE_DIV of the token budget: tiny batches cost nearly a full batch's time."""


MAX_DELIVERED = 1 << 16
"""At most this many delivered translations wait for their requests' release (a caller
that never releases cannot grow the map without bound: the oldest go first)."""


EXPECTED_OUTPUT = (2, 16)
"""A source of n tokens is expected to translate into at most 2n + 16 tokens (the batch
memory bound counts that, within the model's minimum and maximum decoding lengths)."""


@dataclass
class BatchStats:
    """Counters a batcher keeps (for logs and metrics)."""

    batches: int = 0
    segments: int = 0
    padded_tokens: int = 0
    real_tokens: int = 0
    failed_batches: int = 0
    failed_pieces: int = 0
    deduplicated: int = 0
    """Pieces that rode on an identical piece in flight instead of being translated
    (waiting, translating, or delivered and not yet released)."""
    cached: int = 0
    """Distinct pieces answered at submit (by a memory or the MT cache)."""


class Batcher:
    """Merges segments of concurrent requests for one model into token-budget batches.

    `options` are passed to `Translator.translate_batch` (beam size, decoding lengths);
    `suffix` tokens end every source (`</s>` for Marian/OPUS-MT style models).
    """

    def __init__(
        self,
        translator: ctranslate2.Translator,
        source: spm.SentencePieceProcessor,
        target: spm.SentencePieceProcessor,
        *,
        budget: int,
        wait_s: float,
        options: dict,
        suffix: tuple[str, ...] = (),
        name: str = "",
        parallel: int = 1,
        max_input_tokens: int = 512,
        lang: str = "en",
        memory_tokens: int = 0,
        fingerprint: str = "",
        in_flight: int = 0,
    ) -> None:
        self.translator, self.source, self.target = translator, source, target
        self.in_flight = in_flight
        """Batches queued on the device at once (0: one at a time, each waited for)."""
        self.fingerprint = fingerprint
        """The model's fingerprint (stapel.mtcache.fingerprint): what keys its cache."""
        self.budget, self.wait_s = budget, wait_s
        self.memory_tokens = memory_tokens
        """Rows x (longest source + expected output) a batch may reach (0: no bound)."""
        self.out_tokens = max(int(options.get("max_decoding_length") or 0), 1)
        self.min_out_tokens = int(options.get("min_decoding_length") or 0)
        self.options = options
        self.suffix = list(suffix)
        self.name = name
        self.max_input_tokens = max_input_tokens
        """The model's input limit in tokens, suffix included: longer pieces are cut."""
        self.lang = lang
        """The source language, for sentence splitting."""
        self.codec = Codec(source, target, tuple(suffix), lang)
        """How pieces are encoded and decoded unless a request brings its pair's codec."""
        self.parallel = max(parallel, 1)
        self.stats = BatchStats()
        self.last_progress = time.monotonic()
        self._lanes: dict[int, deque[Item]] = {}
        """Waiting segments per priority, in arrival order (taken ones leave lazily)."""
        self._pending_tokens = 0
        self._inflight: dict[str, Item] = {}
        """Piece key -> the piece waiting or translating that identical pieces ride on."""
        self._delivered: dict[str, tuple[str, Submission]] = {}
        """Piece key -> (translation, request) for a piece delivered to a request that has
        not released it yet (not written to the cache yet): identical pieces ride on it."""
        self._running: dict[int, float] = {}
        """When each batch now translating (or queued on the device) started, by id."""
        self._seq = itertools.count()
        self._closed = False
        self._cond = threading.Condition()
        self._threads = [
            threading.Thread(target=self._run, name=f"batcher-{name}-{n}", daemon=True)
            for n in range(self.parallel)
        ]
        for thread in self._threads:
            thread.start()

    def submit(
        self,
        items: list[tuple[int, str]],
        *,
        priority: int = 5,
        job_id: str | None = None,
        tick_s: float | None = None,
        split_sentences: bool = True,
        known: Known | None = None,
        codec: Codec | None = None,
    ) -> Submission:
        """Queue (index, text) items; blank texts come back at once, untranslated.

        `codec` is the pair's (workers/families.py) when the model serves several pairs:
        its pieces carry it into shared batches, and their keys hold its target prefix.

        Each text goes in as pieces (its sentences with split_sentences, each cut to the
        model's input limit) and comes back whole, its pieces joined. `known(pieces)`
        takes every piece's (key, text) and returns key -> (translation, origin) for
        those a memory or the MT cache holds (one lookup for the whole request): they
        are answered at once and never reach the model.
        """
        request = Request(items, priority, job_id, tick_s, split_sentences, known, codec)
        return self.submit_many([request])[0]

    def submit_many(self, requests: Sequence[Request]) -> list[Submission]:
        """`submit` for several requests at once: their texts encoded in one call per
        codec, their pieces queued under one lock (a worker's many small chunks pay the
        tokenizer's call and the batcher's wake-up once)."""
        subs = [Submission(r.job_id, len(r.items), self, r.tick_s) for r in requests]
        for request, sub in zip(requests, subs, strict=True):
            sub.deliver([(i, t) for i, t in request.items if not t.strip()])
        encode_started = time.monotonic()
        planned = self._plan(requests)
        metrics.observe_stage("tokenize", time.monotonic() - encode_started)
        now = time.monotonic()
        queued: list[tuple[Request, Submission, list[Item]]] = []
        for request, sub, segments in zip(requests, subs, planned, strict=True):
            if segments:
                queued.append((request, sub, self._pieces(request, sub, segments, now)))
        answered: list[tuple[Submission, list[tuple[Item, Result]], int, int]] = []
        with self._cond:
            for request, sub, pieces in queued:
                lane = self._lanes.setdefault(request.priority, deque())
                rides = 0
                done: list[tuple[Item, Result]] = []
                for item in pieces:
                    item.seq = next(self._seq)
                    sub.items.append(item)
                    if self._ride(item):
                        rides += 1
                        continue
                    if (delivered := self._delivered.get(item.key)) is not None:
                        item.taken = True
                        done.append((item, delivered[0]))
                        continue
                    self._inflight[item.key] = item
                    lane.append(item)
                    self._pending_tokens += item.size
                self.stats.deduplicated += len(done)
                answered.append((sub, done, rides, len(pieces)))
            self._cond.notify()
        for sub, done, rides, count in answered:
            if done:
                sub.receive(done)
            metrics.observe_lookup("dedup", rides + len(done), count)
        return subs

    def _plan(self, requests: Sequence[Request]) -> list[list[Planned]]:
        """Each request's non-blank segments cut into pieces and encoded: one encode call
        for the requests that share a codec and a sentence split."""
        planned: list[list[Planned]] = [[] for _ in requests]
        alike: dict[tuple[int, bool], list[int]] = {}
        for n, request in enumerate(requests):
            codec = request.codec or self.codec
            alike.setdefault((id(codec), request.split_sentences), []).append(n)
        for numbers in alike.values():
            first = requests[numbers[0]]
            codec = first.codec or self.codec
            owners = [(n, i) for n in numbers for i, t in requests[n].items if t.strip()]
            texts = [t for n in numbers for _, t in requests[n].items if t.strip()]
            if not texts:
                continue
            work = list(enumerate(texts))  # positions: owners maps them back
            cut = plan(
                work,
                lang=codec.lang,
                split_sentences=first.split_sentences,
                encode=codec.encode,
                limit=self.max_input_tokens,
            )
            for segment in cut:
                n, segment.index = owners[segment.index]
                planned[n].append(segment)
        return planned

    def _pieces(
        self, request: Request, sub: Submission, planned: list[Planned], now: float
    ) -> list[Item]:
        """The request's pieces to queue, each keyed; those a memory or the MT cache
        answers (`known`) are delivered at once instead."""
        codec = request.codec or self.codec
        fast = fast_lane(request.priority, len(planned))
        due = now + (INTERACTIVE_WAIT_S if fast else self.wait_s)
        pieces, looked = [], []
        for seg in planned:
            sub.expect(seg)
            for slot, tokens in enumerate(seg.tokens):
                if tokens is not None:
                    item = Item(0, now, sub, seg.index, slot, tokens, due=due)
                    item.fast, item.priority, item.codec = fast, request.priority, codec
                    item.key = piece_key(codec.keyed(tokens))
                    pieces.append(item)
                    looked.append((item.key, seg.parts[slot].text))
        known = request.known
        hits = known(looked) if known is not None and pieces else {}
        if hits:
            for origin in ("memory", "cache"):
                answered: list[tuple[Item, Result]] = [
                    (i, hits[i.key][0]) for i in pieces if hits.get(i.key, ("", ""))[1] == origin
                ]
                if answered:
                    sub.receive(answered, origin)
            pieces = [item for item in pieces if item.key not in hits]
            with self._cond:
                self.stats.cached += len(hits)
        pieces.sort(key=lambda item: item.size)
        return pieces

    def _ride(self, item: Item) -> bool:
        """Attach item to an identical piece in flight, if that one is served no later.

        Called under the lock. A piece waiting at a lower priority is no ride (the new
        one would wait longer); a piece already translating is, whatever its priority.
        """
        primary = self._inflight.get(item.key)
        if primary is None or (not primary.taken and primary.priority < item.priority):
            return False
        item.taken = True  # never in a lane: withdrawals and token counts skip it
        primary.followers.append(item)
        self.stats.deduplicated += 1
        return True

    def _followers(
        self, batch: list[Item], outputs: list[str] | None = None
    ) -> list[tuple[Item, Item]]:
        """(primary, follower) for each piece riding on the batch's pieces; they leave
        the in-flight index. With their outputs (a batch translated), each stays in
        flight as delivered until its request releases it; without (a failed batch), a
        piece arriving later is translated anew."""
        with self._cond:
            out: list[tuple[Item, Item]] = []
            for n, item in enumerate(batch):
                if self._inflight.get(item.key) is item:
                    del self._inflight[item.key]
                    if outputs is not None and isinstance(outputs[n], str):
                        self._hold(item, outputs[n])
                out.extend((item, follower) for follower in item.followers)
                item.followers = []
            return out

    def _hold(self, item: Item, text: str) -> None:
        """Keep item's translation for identical pieces until its request releases it
        (called under the lock)."""
        if len(self._delivered) >= MAX_DELIVERED:
            del self._delivered[next(iter(self._delivered))]
        self._delivered[item.key] = (text, item.request)
        item.request.held.append(item.key)

    def release(self, request: Submission) -> None:
        """Forget the translations delivered to request (it has written them to the MT
        cache, or ended): a piece arriving now is looked up there, or translated anew."""
        with self._cond:
            for key in request.held:
                if (entry := self._delivered.get(key)) is not None and entry[1] is request:
                    del self._delivered[key]
            request.held = []

    def _encode(self, texts: list[str]) -> list[list[str]]:
        return self.codec.encode(texts)

    def withdraw_job(self, job_id: str) -> int:
        """Withdraw every request of job_id that has segments waiting; return how many."""
        with self._cond:
            found = {
                id(item.request): item.request
                for lane in self._lanes.values()
                for item in lane
                if not item.taken and item.request.job_id == job_id
            }
            for primary in self._inflight.values():
                for item in primary.followers:
                    if item.request.job_id == job_id:
                        found[id(item.request)] = item.request
        for request in found.values():
            request.withdraw()
        return len(found)

    def withdraw(self, request: Submission) -> None:
        """Take a request's waiting pieces out of the lanes (a cancelled or lost chunk)."""
        with self._cond:
            gone = [
                item
                for item in request.items
                if not item.taken and not any(not f.request.withdrawn for f in item.followers)
            ]  # a waiting piece others ride on stays, translated for them
            for item in gone:
                item.taken = True
                self._pending_tokens -= item.size
                if self._inflight.get(item.key) is item:
                    del self._inflight[item.key]
            if gone:
                for priority, lane in self._lanes.items():
                    self._lanes[priority] = deque(i for i in lane if not i.taken)
        if gone:
            log.info(
                "withdrawn from batcher model=%s logid=%s pieces=%d",
                self.name,
                request.job_id,
                len(gone),
            )

    def progressing(self, within_s: float) -> bool:
        """Return whether the batcher is getting through its work.

        True when nothing waits, or when a batch finished within within_s and no batch
        has been translating for longer than that (a hung batch in any of the parallel
        threads stops the heartbeats of the tasks waiting here, so the watchdog acts).
        """
        now = time.monotonic()
        with self._cond:
            idle = self._pending_tokens == 0 and not self._running
            stuck = any(now - started >= within_s for started in self._running.values())
        return idle or (not stuck and now - self.last_progress < within_s)

    def close(self) -> None:
        """Let the batcher threads exit once the queued segments are translated."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _waiting(self) -> list[deque[Item]]:
        """The lanes with a waiting segment, highest priority first (taken ones dropped)."""
        lanes = []
        for priority in sorted(self._lanes, reverse=True):
            lane = self._lanes[priority]
            while lane and lane[0].taken:
                lane.popleft()
            if lane:
                lanes.append(lane)
        return lanes

    def _window(self, lane: deque[Item]) -> list[Item]:
        """The lane's first waiting segments, up to WINDOW_BUDGETS budgets of tokens."""
        window: list[Item] = []
        tokens = 0
        for item in lane:
            if item.taken:
                continue
            window.append(item)
            tokens += item.size
            if tokens >= WINDOW_BUDGETS * self.budget:
                break
        return window

    def _share(self) -> int:
        """The token budget of the next batch (called under the lock, by a free thread).

        The full budget while enough waits; when the waiting tokens fill less than one
        budget per free thread, an even share of them among the free threads (at least
        1/MIN_SHARE_DIV of a budget), so that the last batches of a burst run side by
        side instead of one after the other.
        """
        free = max(self.parallel - len(self._running), 1)
        share = -(-self._pending_tokens // free)
        return min(self.budget, max(share, self.budget // MIN_SHARE_DIV))

    def _cut(self, head: Item, window: list[Item], budget: int) -> list[Item]:
        """The largest run of length-sorted window segments that holds head and fits the budget.

        A run [lo, hi] of sorted sizes costs (hi - lo + 1) * size[hi] padded tokens; for
        each hi from the head up, the run reaches as far down as the budget allows.
        """
        ordered = sorted(window, key=lambda item: (item.size, item.seq))
        at = ordered.index(head)
        best = (at, at)
        for hi in range(at, len(ordered)):
            fits = max(min(budget // ordered[hi].size, self._rows(ordered[hi].size)), 1)
            lo = max(hi + 1 - fits, 0)
            if lo > at:
                break
            if hi - lo >= best[1] - best[0]:  # on a tie, the longer run: less padding later
                best = (lo, hi)
        return ordered[best[0] : best[1] + 1]

    def _rows(self, size: int) -> int:
        """The most rows a batch of sources up to size tokens may have within memory_tokens.

        A translator's working memory grows with rows x (source + output) tokens (the
        decoder keeps every step's keys and values for every row), so at a long output
        length a batch of short sources is what costs gigabytes, not its source tokens.
        The output counted is the expected one (EXPECTED_OUTPUT: a translation is rarely
        more than twice its source), within the decoding lengths: bounding by the
        maximum length alone would cut every batch of an ordinary model to a fifth.
        """
        if not self.memory_tokens:
            return 1 << 30
        ratio, margin = EXPECTED_OUTPUT
        out = min(self.out_tokens, max(self.min_out_tokens, ratio * size + margin))
        return max(self.memory_tokens // (size + out), 1)

    def _fill(self, batch: list[Item], lanes: list[deque[Item]], budget: int) -> None:
        """Add lower-priority segments, in priority then arrival order, while they fit."""
        longest = max(item.size for item in batch)
        for lane in lanes:
            for item in self._window(lane):
                size = max(longest, item.size)
                if (len(batch) + 1) * size <= budget and len(batch) < self._rows(size):
                    batch.append(item)
                    longest = size
                elif item.size <= longest:
                    return  # full: nothing more fits without going over the budget

    def _next_batch(self) -> list[Item] | None:
        with self._cond:
            while True:
                lanes = self._waiting()
                due = min((lane[0].due for lane in lanes), default=None)
                if due is None and self._closed:
                    return None
                if due is not None:
                    early = due - time.monotonic()
                    if self._pending_tokens >= self.budget or early <= 0 or self._closed:
                        break
                    self._cond.wait(early)
                else:
                    self._cond.wait()
            top, *lower = lanes
            budget = self._share()
            if top[0].fast:
                budget = min(budget, self.budget // INTERACTIVE_BUDGET_DIV)
            batch = self._cut(top[0], self._window(top), budget)
            self._fill(batch, lower, budget)
            for item in batch:
                item.taken = True
                self._pending_tokens -= item.size
            self._running[id(batch)] = time.monotonic()
            if self._pending_tokens:
                self._cond.notify()  # a free thread may take what is left
            return batch

    def _run(self) -> None:
        if self.in_flight:
            self._run_pipelined()
            return
        while (batch := self._next_batch()) is not None:
            try:
                self._run_batch(batch)
                self.last_progress = time.monotonic()
            finally:
                self._ended(batch)

    def _ended(self, batch: list[Item]) -> None:
        with self._cond:
            self._running.pop(id(batch), None)

    def _run_batch(self, batch: list[Item]) -> None:
        try:
            outputs = self._translate(batch)
        except Exception as exc:  # isolate what fails alone; the rest is delivered
            self._failed(batch, exc)
            return
        self._deliver(batch, outputs)

    def _failed(self, batch: list[Item], exc: Exception) -> None:
        """Find the pieces of a batch that raised which fail alone; deliver the rest."""
        failures = (
            isolate(batch, self._translate, self._deliver) if len(batch) > 1 else [(batch[0], exc)]
        )
        with self._cond:
            self.stats.failed_batches += 1
            self.stats.failed_pieces += len(failures)
        # what rode on a failed piece fails with it (what rode on the rest was delivered)
        riders = [(f, error) for item, error in failures for _, f in self._followers([item])]
        hand_out(self.name, batch, failures, exc, riders)

    def _run_pipelined(self) -> None:
        """Cut batches and queue them on the device without waiting for their results.

        Up to `in_flight` batches are queued at once (CTranslate2's asynchronous
        translate_batch, the pattern of its translate_iterable): while one decodes, the
        next is already queued behind it, and this thread cuts the one after. A second
        thread waits for each batch's results, detokenizes and delivers them, so the
        device never waits for Python between two batches.
        """
        slots = threading.BoundedSemaphore(self.in_flight)
        started: queue.Queue[tuple[list[Item], list | Exception, float] | None] = queue.Queue()
        deliverer = threading.Thread(
            target=self._deliver_started,
            args=(started, slots),
            name=f"batcher-{self.name}-deliver",
            daemon=True,
        )
        deliverer.start()
        while True:
            slots.acquire()
            batch = self._next_batch()
            if batch is None:
                started.put(None)
                return
            at = time.monotonic()
            try:
                pending: list | Exception = self.translator.translate_batch(
                    [item.tokens for item in batch],
                    asynchronous=True,
                    **target_prefixes(batch),
                    **self.options,
                )
            except Exception as exc:  # raised at once (a bad input): isolated when delivered
                pending = exc
            started.put((batch, pending, at))

    def _deliver_started(
        self,
        started: queue.Queue[tuple[list[Item], list | Exception, float] | None],
        slots: threading.BoundedSemaphore,
    ) -> None:
        """Wait for each queued batch in turn; deliver its results, or isolate its failure."""
        while (entry := started.get()) is not None:
            batch, pending, at = entry
            try:
                try:
                    if isinstance(pending, Exception):
                        raise pending
                    results = [result.result() for result in pending]
                    texts = decode_items(batch, [r.hypotheses[0] for r in results], self.codec)
                    outputs = with_scores(texts, results)
                except Exception as exc:  # isolate what fails alone; the rest is delivered
                    self._failed(batch, exc)
                else:
                    metrics.observe_stage("translate", time.monotonic() - at)
                    self._count(batch)
                    self._deliver(batch, outputs)
                self.last_progress = time.monotonic()
            finally:
                self._ended(batch)
                slots.release()

    def _translate(self, batch: list[Item]) -> list[str]:
        started = time.monotonic()
        results = self.translator.translate_batch(
            [item.tokens for item in batch], **target_prefixes(batch), **self.options
        )
        texts = decode_items(batch, [r.hypotheses[0] for r in results], self.codec)
        outputs = with_scores(texts, results)
        metrics.observe_stage("translate", time.monotonic() - started)
        self._count(batch)
        return outputs

    def _deliver(self, batch: list[Item], outputs: list[str]) -> None:
        parts: dict[int, tuple[Submission, list]] = {}
        by_item = dict(zip(map(id, batch), outputs, strict=True))
        riders = [
            (follower, by_item[id(primary)])
            for primary, follower in self._followers(batch, outputs)
        ]
        for item, text in [*zip(batch, outputs, strict=True), *riders]:
            parts.setdefault(id(item.request), (item.request, []))[1].append((item, text))
        jobs = logids(batch)
        level = logging.INFO if "," in jobs else logging.DEBUG
        log.log(
            level,
            "batch model=%s segments=%d jobs=%d logids=%s",
            self.name,
            len(batch),
            jobs.count(",") + 1,
            jobs,
        )
        for request, pieces in parts.values():
            request.receive(pieces)

    def _count(self, batch: list[Item]) -> None:
        longest = max(i.size for i in batch)
        real = sum(i.size for i in batch)
        with self._cond:
            self.stats.batches += 1
            self.stats.segments += len(batch)
            self.stats.padded_tokens += longest * len(batch)
            self.stats.real_tokens += real
        metrics.observe_batch(self.name, len(batch), real, longest * len(batch))
