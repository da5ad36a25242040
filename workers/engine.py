"""The translation engine: loaded CTranslate2 models, each fed by a batcher.

Segments are tokenized with the pair's SentencePiece model, sorted by length, merged
with other tasks' segments into batches whose padded size stays within a token budget
(see workers/batcher.py), translated, decoded and handed back with their original
indexes, batch by batch, so callers can write as they go.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import ctranslate2
import sentencepiece as spm

from stapel.exceptions import ModelUnavailable
from stapel.model_bin import ModelFileError, limits
from stapel.model_dirs import ModelDir, problems
from stapel.model_families import MULTILINGUAL, FamilyError, detect
from stapel.pivot import legs, served
from workers import families, markup, pivoting
from workers.batcher import Batcher, Known, Request
from workers.pivoting import PivotSubmission
from workers.submission import Result, Submission

log = logging.getLogger(__name__)

BROKEN_RETRY_S = 60.0
"""How long a pair whose model failed to load is refused before it is tried again (a
model directory may be repaired or synced meanwhile)."""


@dataclass
class LoadedModel:
    """A translator, its two SentencePiece processors and the batcher that feeds it.

    A multilingual model is loaded once for all its pairs: `pair` is then the model's
    key (its folder name), and each pair gets its codec (workers/families.py).
    """

    pair: str
    translator: ctranslate2.Translator
    source: spm.SentencePieceProcessor
    target: spm.SentencePieceProcessor
    batcher: Batcher
    aligner: Batcher | None = None
    """Made on first use for segments with inline codes (workers/markup.py)."""
    languages: list[str] = field(default_factory=list)
    """A multilingual model's language tokens."""
    codes: list[str] = field(default_factory=list)
    """A multilingual model's languages by public code."""
    codecs: dict[str, families.Codec] = field(default_factory=dict)
    """Pair -> its codec, made on first use."""

    def codec(self, found: ModelDir) -> families.Codec:
        """Return the codec of one of this model's pairs."""
        made = self.codecs.get(found.pair)
        if made is None:
            made = families.codec(
                found, self.source, self.target, tuple(self.batcher.suffix), self.languages
            )
            self.codecs[found.pair] = made
        return made


def source_suffix(path: Path) -> tuple[str, ...]:
    """Return the tokens to end each source with: `</s>`, as OPUS-MT models expect.

    Converted Marian/OPUS-MT models (and Stapel's own) were trained on sources ending in
    `</s>` and their config leaves `add_source_eos` false, so the caller adds it; a model
    whose config adds it itself gets nothing extra.
    """
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        config = {}
    if config.get("add_source_eos"):
        return ()
    return (config.get("eos_token", "</s>"),)


def pick_device(device: str) -> str:
    """Resolve "auto" to cuda when a GPU is visible, else cpu."""
    if device != "auto":
        return device
    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


BATCH_LIMITS = {"cpu": (4096, 6144), "cuda": (16384, 65536)}
"""(token budget, memory bound) of a batch by device, where STAPEL_BATCH_TOKENS and
STAPEL_BATCH_MEMORY_TOKENS are unset. The CPU's bound keeps a Transformer-base worker's
RSS under 1 GiB. On a GPU a batch's time grows far less than its rows, so it takes four
budgets, and its bound (on the GPU's memory, four output tokens per budget token) binds
only forced long outputs: with the CPU's limits a GPU worker's batches stayed small and
the GPU mostly waited (docs/design/batch-limits.md)."""


PIPELINE_DEPTH = 3
"""Batches a GPU worker keeps queued on its translator at once (CTranslate2's
asynchronous translate_batch): one decoding, the next ones waiting, so that the device
never waits while Python delivers one batch and cuts the next. A CPU worker's threads
each run one batch at a time, as before: there the translators are the cores."""


def pick_in_flight(device: str) -> int:
    """Return how many batches the batcher keeps queued on the device (0: one at a time)."""
    return PIPELINE_DEPTH if device == "cuda" else 0


def pick_batch_limits(device: str, tokens: int | None, memory: int | None) -> tuple[int, int]:
    """Return (token budget, memory bound) per batch: the settings, or the device's."""
    default_tokens, default_memory = BATCH_LIMITS.get(device, BATCH_LIMITS["cpu"])
    return (
        default_tokens if tokens is None else tokens,
        default_memory if memory is None else memory,
    )


def pick_parallel(device: str, threads: int, parallel: int) -> tuple[int, int]:
    """Return (batches translated at once, threads per batch) for CTranslate2.

    On CPU the default is one batch per thread (`inter_threads` = threads, one intra-op
    thread each): faster than one batch on all threads, and a thread that the rest of
    the process preempts delays only its own batch instead of stalling its partners at
    every step (docs/design/threads.md has the figures). On a
    GPU the default is one batch at a time.
    """
    if device != "cpu":
        return max(parallel, 1), 0
    parallel = parallel or threads
    return parallel, max(threads // parallel, 1)


def pick_compute_type(device: str, compute_type: str) -> str:
    """Resolve "auto" to int8 weights with float16 math on GPU and int8 on CPU."""
    if compute_type != "auto":
        return compute_type
    return "int8_float16" if device == "cuda" else "int8"


class Engine:
    """Translates segments with models from a model root, keeping an LRU of loaded ones."""

    def __init__(
        self,
        model_root: Path,
        *,
        device: str = "auto",
        compute_type: str = "auto",
        threads: int = 0,
        parallel_batches: int = 0,
        max_loaded: int = 2,
        batch_tokens: int = 4096,
        batch_memory_tokens: int = 0,
        batch_wait_s: float = 0.05,
        max_decoding_length: int = 256,
        min_decoding_length: int = 1,
        beam_size: int = 1,
        max_input_tokens: int = 0,
        on_load: Callable[[str], None] | None = None,
        on_evict: Callable[[str], None] | None = None,
        family_options: dict[str, dict] | None = None,
        pivot: str = "",
    ) -> None:
        self.pivot = pivot
        """The language a pair no model serves is translated through ("" for none)."""
        self.model_root = Path(model_root)
        self.device = pick_device(device)
        self.compute_type = pick_compute_type(self.device, compute_type)
        self.threads = threads or (os.cpu_count() or 1)
        self.parallel, self.intra_threads = pick_parallel(
            self.device, self.threads, parallel_batches
        )
        self.max_loaded = max(1, max_loaded)
        self.batch_tokens = batch_tokens
        self.batch_memory_tokens = batch_memory_tokens
        """Rows x (longest source + output length) per batch at most (0: no bound)."""
        self.batch_wait_s = batch_wait_s
        self.options = {
            "beam_size": beam_size,
            "max_decoding_length": max_decoding_length,
            "min_decoding_length": min_decoding_length,
            # CTranslate2 would silently drop input past 1,024 tokens; the batcher cuts
            # pieces to the model's limit itself, so anything longer is an error, not a loss.
            "max_input_length": 0,
        }
        self.family_options = family_options or {}
        """Decoding options of one family over the engine's (Argos: its beam, length
        penalty, unknowns replaced)."""
        self.max_input_tokens = max_input_tokens
        """The input limit in tokens for every model (0: each model's own)."""
        self.on_load, self.on_evict = on_load, on_evict
        self._loaded: OrderedDict[str, LoadedModel] = OrderedDict()
        self._broken: dict[str, tuple[float, str]] = {}
        """Pairs whose model could not be loaded: when, and why."""
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        """Pair -> the lock its one load in progress holds (callers of the pair wait on it)."""

    def pairs(self) -> dict[str, ModelDir]:
        """Return the pairs the model root offers now."""
        return served(self.model_root, self.pivot)

    def loaded_pairs(self) -> list[str]:
        """Return the models currently loaded, least recently used first (a pair
        directory's key is its pair; a multilingual model's its folder name)."""
        return list(self._loaded)

    def is_loaded(self, pair: str) -> bool:
        """Return whether the model serving pair is loaded now."""
        found = self.pairs().get(pair)
        if found is not None and found.family == "pivot":
            return all(self.is_loaded(leg) for leg in legs(found))
        return found is not None and found.model in self._loaded

    def loaded_languages(self) -> dict[str, list[str]]:
        """Return model -> its languages' codes, for the multilingual models loaded now
        (presence: chunks of their pairs are routed to their model queue)."""
        with self._lock:
            return {key: model.codes for key, model in self._loaded.items() if model.codes}

    def loaded_fingerprints(self) -> dict[str, str]:
        """Return pair -> model fingerprint of the pairs loaded now (for presence)."""
        with self._lock:
            return {pair: model.batcher.fingerprint for pair, model in self._loaded.items()}

    def withdraw_job(self, job_id: str) -> int:
        """Take a cancelled job's waiting segments out of every loaded model's batcher."""
        with self._lock:
            batchers = [
                batcher
                for model in self._loaded.values()
                for batcher in (model.batcher, model.aligner)
                if batcher is not None
            ]
        return sum(batcher.withdraw_job(job_id) for batcher in batchers)

    def broken(self) -> dict[str, str]:
        """Return pair -> reason for the pairs this engine cannot load now."""
        with self._lock:
            return {pair: reason for pair, (_at, reason) in self._broken.items()}

    def check_root(self) -> dict[str, str]:
        """Mark the pair directories that cannot be loaded as broken (a cheap check)."""
        found = problems(self.model_root)
        with self._lock:
            for pair, reason in found.items():
                self._mark_broken(pair, reason)
        return found

    def _mark_broken(self, pair: str, reason: str) -> None:
        self._broken[pair] = (time.monotonic(), reason)
        log.error("model broken pair=%s reason=%s", pair, reason)

    def model(self, pair: str) -> LoadedModel:
        """Return the loaded model for pair, loading it (and evicting the oldest) if needed.

        A load runs outside the engine's lock, under a lock of its pair only: the chunks
        of pairs already loaded go on (and the presence record, which reads `broken`,
        stays fresh) while a large model loads; callers of the same pair wait for the one
        load. Raises ModelUnavailable when the pair has no model here or it fails to
        load; the pair is then refused for BROKEN_RETRY_S before it is tried again.
        `on_load(pair)` runs after a load and `on_evict(pair)` after an eviction, outside
        the lock (workers use them to join and leave the pair's model queue).
        """
        found = self.pairs().get(pair)
        if found is not None and found.family == "pivot":  # both steps loaded
            first, second = legs(found)
            self.model(first)
            return self.model(second)
        key = found.model if found is not None else pair
        with self._lock:
            if key in self._loaded:
                self._loaded.move_to_end(key)
                return self._loaded[key]
            loading = self._loading.setdefault(key, threading.Lock())
        with loading:
            with self._lock:
                if key in self._loaded:  # loaded by the caller this one waited for
                    self._loaded.move_to_end(key)
                    return self._loaded[key]
            try:
                model = self._load_or_refuse(pair, found)
            except BaseException:
                with self._lock:
                    self._done_loading(key, loading)
                raise
            with self._lock:  # loaded and no longer loading in one step: never loaded twice
                self._done_loading(key, loading)
                self._loaded[key] = model
                evicted = []
                while len(self._loaded) > self.max_loaded:
                    name, old = self._loaded.popitem(last=False)
                    old.batcher.close()
                    if old.aligner is not None:
                        old.aligner.close()
                    evicted.append(name)
                    log.info("model evicted pair=%s", name)
        for name in evicted:
            if self.on_evict:
                self.on_evict(name)
        if self.on_load:
            self.on_load(key)
        return model

    def _done_loading(self, pair: str, loading: threading.Lock) -> None:
        if self._loading.get(pair) is loading:
            del self._loading[pair]

    def wait_loaded(self, pair: str, tick_s: float, on_tick: Callable[[], bool]) -> bool:
        """Load pair (if it is not loaded), calling on_tick() every tick_s while it loads.

        A chunk waiting for its model heartbeats through on_tick, so a load longer than
        the heartbeat timeout does not get it requeued; on_tick returning False (the
        claim was lost) stops the wait, not the load. Returns whether the model is
        loaded; raises what the load raised (ModelUnavailable).
        """
        if self.is_loaded(pair):
            return True
        failed: list[BaseException] = []

        def load() -> None:
            try:
                self.model(pair)
            except BaseException as exc:  # handed to the waiting caller
                failed.append(exc)

        loader = threading.Thread(target=load, name=f"load-{pair}", daemon=True)
        loader.start()
        while loader.is_alive():
            loader.join(tick_s)
            if loader.is_alive() and not on_tick():
                return False
        if failed:
            raise failed[0]
        return True

    def refused(self, pair: str) -> str | None:
        """Why pair is refused now (broken, not tried again yet): its load raises at once."""
        with self._lock:
            broken = self._broken.get(pair)
        return broken[1] if broken and time.monotonic() - broken[0] < BROKEN_RETRY_S else None

    def _load_or_refuse(self, pair: str, found: ModelDir | None) -> LoadedModel:
        """Load pair's model (under its model's load lock), or raise ModelUnavailable."""
        if (reason := self.refused(pair)) is not None:
            raise ModelUnavailable(pair, reason)
        reason = None
        if found is None:
            reason = f"no complete model directory {pair} in {self.model_root}"
        else:
            try:
                model = self._load(found)
            except (RuntimeError, OSError, ValueError, ModelFileError, FamilyError) as exc:
                reason = f"{type(exc).__name__}: {exc}"[:300]
        with self._lock:
            if reason is not None:
                self._mark_broken(pair, reason)
                raise ModelUnavailable(pair, reason) from None
            self._broken.pop(pair, None)
        return model

    def _load(self, found: ModelDir) -> LoadedModel:
        compute_type = self.compute_type
        if self.device == "cpu" and compute_type == "int8_float16":
            compute_type = "int8"
        translator = ctranslate2.Translator(
            str(found.model_path),
            device=self.device,
            compute_type=compute_type,
            inter_threads=self.parallel,
            intra_threads=self.intra_threads,
        )
        log.info(
            "model loaded pair=%s model=%s family=%s device=%s compute_type=%s "
            "parallel_batches=%d threads_per_batch=%d",
            found.pair,
            found.model,
            found.family,
            self.device,
            compute_type,
            self.parallel,
            self.intra_threads,
        )
        # one thread per call: SentencePiece's default starts a thread per core for each
        # list it encodes or decodes, on cores the translators already fill
        names = ("source.spm", "target.spm") if found.family == "pair" else (found.spm,) * 2
        source, target = (
            spm.SentencePieceProcessor(model_file=str(found.path / name), num_threads=1)
            for name in names
        )
        found_limits = limits(found.model_path, found.max_input_tokens)
        options = {**self.options, **self.family_options.get(found.family, {})}
        prefixed = found.family in ("nllb", "m2m100") or (
            found.family == "argos" and found.target_token
        )
        if prefixed:  # CTranslate2 counts the target prefix in both decoding lengths
            options["max_decoding_length"] += 1
            if options["min_decoding_length"]:
                options["min_decoding_length"] += 1
        if found_limits.decoder_positions:  # longer outputs raise instead of stopping
            options["max_decoding_length"] = min(
                options["max_decoding_length"], found_limits.decoder_positions
            )
        # everything that changes output: the files, the options, how the math is done
        output_options = {**options, "compute_type": compute_type, "device": self.device}
        # each hypothesis's score is the segment's confidence (stapel.scores); it changes
        # no output, so it stays out of the fingerprint and the cache's entries stay valid
        options["return_scores"] = True
        batcher = Batcher(
            translator,
            source,
            target,
            fingerprint=families.model_fingerprint(found, output_options),
            budget=self.batch_tokens,
            memory_tokens=self.batch_memory_tokens,
            wait_s=self.batch_wait_s,
            options=options,
            suffix=() if found.family == "argos" else source_suffix(found.path),
            name=found.model,
            parallel=self.parallel,
            in_flight=pick_in_flight(self.device),
            max_input_tokens=self.max_input_tokens or found_limits.input_tokens,
            lang=found.source,
        )
        offered = detect(found.path).languages if found.family in MULTILINGUAL else {}
        return LoadedModel(
            found.model,
            translator,
            source,
            target,
            batcher,
            languages=list(offered.values()),
            codes=sorted(offered),
        )

    def _route(self, pair: str) -> tuple[LoadedModel, families.Codec]:
        model = self.model(pair)
        found = self.pairs().get(pair)
        if found is None or found.model != model.pair:
            raise ModelUnavailable(pair, f"no model for {pair} in {self.model_root}")
        return model, model.codec(found)

    def fingerprint(self, pair: str) -> str:
        """Return what keys pair's cache entries (loading its model if needed)."""
        found = self.pairs().get(pair)
        if found is not None and found.family == "pivot":
            steps = "\x1e".join([*map(self.fingerprint, legs(found)), found.via])
            return hashlib.sha256(steps.encode()).hexdigest()[:16]
        model = self.model(pair)
        fp = model.batcher.fingerprint
        return families.pair_fingerprint(fp, found) if found is not None else fp

    def translate_batches(
        self,
        pair: str,
        items: Iterable[tuple[int, str]],
        *,
        priority: int = 5,
        job_id: str | None = None,
        tick_s: float | None = None,
        split_sentences: bool = True,
        known: Known | None = None,
        cache_under: Callable[[str], Known] | None = None,
    ) -> Submission | markup.TaggedSubmission | PivotSubmission:
        """Return an iterable of lists of (index, translation), batch by batch.

        The model's batcher may merge these segments with other callers' into shared
        batches. Empty and whitespace-only segments come back unchanged; a segment the
        model cannot translate even alone comes back as a SegmentError. With tick_s, an
        empty list comes every tick_s seconds that nothing arrives (for heartbeats).
        Segments with inline codes are translated without them and get them back by
        alignment (workers/markup.py); they skip `known` (Batcher.submit): no sentence of
        theirs is looked up in memories or the cache. A pivot pair goes through its two
        steps (workers/pivoting.py), each looked up with `cache_under(its fingerprint)`.
        """
        items = list(items)
        found = self.pairs().get(pair)
        if found is not None and found.family == "pivot":
            options = {"priority": priority, "job_id": job_id, "tick_s": tick_s}
            return pivoting.submit(self, found, items, options, split_sentences, cache_under)
        if markup.has_codes(items):
            model, codec = self._route(pair)
            return markup.submit(
                model, items, priority=priority, job_id=job_id, tick_s=tick_s, codec=codec
            )
        request = Request(items, priority, job_id, tick_s, split_sentences, known)
        return self.submit_plain(pair, [request])[0]

    def plain(self, pair: str) -> bool:
        """Whether pair is served by one model (not a pivot through two)."""
        found = self.pairs().get(pair)
        return found is None or found.family != "pivot"

    def submit_plain(self, pair: str, requests: Sequence[Request]) -> list[Submission]:
        """Queue requests of a plain pair (no inline codes) in its model's batcher at once."""
        model, codec = self._route(pair)
        return model.batcher.submit_many([replace(r, codec=codec) for r in requests])

    def translate(self, pair: str, texts: list[str], split_sentences: bool = True) -> list[Result]:
        """Translate texts and return them in the same order."""
        out: list[Result] = [""] * len(texts)
        batches = self.translate_batches(pair, enumerate(texts), split_sentences=split_sentences)
        try:
            for batch in batches:
                for index, text in batch:
                    out[index] = text
        finally:
            batches.release()
        return out
