"""Stapel against raw CTranslate2 on the same model, data and threads, side by side.

    python -m bench.throughput --name cpu          # `make bench`
    python -m bench.throughput --name quick --big 2000 --docs 50 --rss-segments 20000

Rows: raw (one translate_batch over all segments in one process, asking for each
hypothesis's score as the worker does; --raw-plain: without), many small (HTTP jobs
of 1-5 segments sent at once), one big (one job), naive (one segment per call).
Also: POST /v1/jobs latency and throughput, submit-to-done of a one-segment job on an
idle worker, and the peak RSS of web and worker while a huge job is submitted and runs.
Writes bench/runs/<name>.json and prints a table.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import tempfile
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ctranslate2
import requests
import sentencepiece as spm
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from bench.stack import Stack, cpu_seconds, free_port, rss_peak_kib, thread_cpu_seconds, wait
from bench.stamp import run_path, write_run
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from training.random_model import build as build_tiny
from training.random_model import build_base, pseudo_corpus
from workers import allocator
from workers.engine import pick_batch_limits, pick_compute_type, pick_parallel

ROOT = Path(__file__).resolve().parent.parent
MODEL_DIR = ROOT / ".cache" / "models"
TINY_MODEL_DIR = ROOT / ".cache" / "models-tiny"
"""The tests' tiny random model (--tiny): translation costs almost nothing, so the rows
measure the rest of the pipeline, as a GPU's speed leaves it to."""
PAIR = "en-de"
SUBMITTERS = 32
"""Client threads sending the many-small jobs at once."""
SUBMIT_TRIES = 4
"""Sends of one POST on a kept-alive connection the server may have closed."""
POLL_S = 0.05
"""How often the client looks for finished jobs while translation runs (each look is a
query on the machine being measured, so not too often)."""
BIG_POLL_S = 0.25
"""How often it looks while the one big job runs: a look costs the machine about half a
millisecond (at POLL_S, 1.6 of the row's 292 core-seconds went to looking), and a
quarter second is under 0.2% of the row."""
LATENCY_POLL_S = 0.01
"""How often it looks while timing a one-segment job on an idle worker."""
BIG_SEGMENTS = 20_000
"""The one-big job's size (--big)."""
LATENCY_SAMPLES = 30
"""One-segment jobs timed on an idle worker (--latency-samples)."""
WARM_UP_DOCS = 64
"""Small jobs sent once before the rows are measured, as raw gets a warm-up call: the
worker's task threads, DB connections and caches start cold."""


def model_dir(args) -> Path:
    """The model root of a bench run: the tiny model's with --tiny, else the benchmark's."""
    return TINY_MODEL_DIR if getattr(args, "tiny", False) else MODEL_DIR


def bench_model(args) -> Path:
    """Build (once) the Transformer-base random model under .cache/models/en-de (the
    tiny one under .cache/models-tiny with --tiny)."""
    root = model_dir(args)
    path = root / PAIR
    if not (path / "model.bin").exists():
        print(f"building the benchmark model into {path} ...", flush=True)
        build_tiny(path, seed=1) if root == TINY_MODEL_DIR else build_base(path)
    return path


def raw_rate(path: Path, texts: list[str], args) -> float:
    """Segments/s of CTranslate2 alone (raw_run)."""
    return raw_run(path, texts, args)["segments_per_s"]


def raw_run(path: Path, texts: list[str], args) -> dict:
    """CTranslate2 alone: tokenize, one translate_batch, detokenize; its segments/s,
    seconds and the CPU seconds this process used meanwhile (all its threads: CTranslate2's
    translators do the work).

    The translator has the worker's threads, split the worker's way (batches at once x
    threads each), and the worker's compute type: CTranslate2 cuts the one call into
    token-budget batches and runs them on its parallel translators itself.
    """
    sp = spm.SentencePieceProcessor(model_file=str(path / "source.spm"))
    translator = raw_translator(path, args, sp.encode("warm up", out_type=str))
    started, cpu_started = time.perf_counter(), time.process_time()
    results = one_call(translator, [t + ["</s>"] for t in sp.encode(texts, out_type=str)], args)
    sp.decode([r.hypotheses[0] for r in results])
    seconds = time.perf_counter() - started
    return {
        "segments_per_s": len(texts) / seconds,
        "seconds": seconds,
        "translate_cpu_s": time.process_time() - cpu_started,
    }


def raw_translator(path: Path, args, warm_up: list[str]) -> ctranslate2.Translator:
    """Raw's translator: the worker's threads split the worker's way, its compute type,
    one short call made (its first call pays for setting up)."""
    parallel, intra = pick_parallel(args.device, args.threads, args.parallel_batches)
    translator = ctranslate2.Translator(
        str(path),
        device=args.device,
        compute_type=pick_compute_type(args.device, "auto"),
        inter_threads=parallel,
        intra_threads=intra,
    )
    translator.translate_batch([warm_up], max_decoding_length=4)
    return translator


def one_call(translator: ctranslate2.Translator, tokens: list[list[str]], args) -> list:
    """Raw's translate_batch: every source at once, cut by the token budget, fixed length."""
    return translator.translate_batch(
        tokens,
        max_batch_size=args.batch_tokens,
        batch_type="tokens",
        beam_size=1,
        max_decoding_length=args.decode,
        min_decoding_length=args.decode,
        return_scores=not getattr(args, "raw_plain", False),
    )


def bench_texts(docs: int, big: int, singles: int) -> tuple[list[list[str]], list[str], list[str]]:
    """Return the seeded sources of the rows: small documents, the big job, one-segment jobs."""
    rng = random.Random(5)
    lines = pseudo_corpus(big + 5 * docs + singles + 1000, seed=5)
    small = [[lines.pop() for _ in range(rng.randint(1, 5))] for _ in range(docs)]
    return small, [lines.pop() for _ in range(big)], [lines.pop() for _ in range(singles)]


def naive_rate(path: Path, texts: list[str], args) -> float:
    """Segments/s translating one segment per call, as per-request servers do (one
    translator using all the threads for each call: the fastest way to run one)."""
    sp = spm.SentencePieceProcessor(model_file=str(path / "source.spm"))
    translator = ctranslate2.Translator(
        str(path),
        device=args.device,
        compute_type=pick_compute_type(args.device, "auto"),
        intra_threads=args.threads,
    )
    started = time.perf_counter()
    for t in texts:
        r = translator.translate_batch(
            [[*sp.encode(t, out_type=str), "</s>"]],
            beam_size=1,
            max_decoding_length=args.decode,
            min_decoding_length=args.decode,
            return_scores=not getattr(args, "raw_plain", False),
        )
        sp.decode(r[0].hypotheses[0])
    return len(texts) / (time.perf_counter() - started)


def progress(what: str, values: list[float]) -> None:
    """Print a figure as soon as it is measured: a run cut off by a time limit (a GPU
    machine held for minutes) still reports what it reached."""
    print(f"  {what}: " + ", ".join(f"{v:.1f}" for v in values), flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class Client:
    """Submits jobs over HTTP and watches them finish in the DB.

    The POSTs go out on one kept-alive http.client connection per submitting thread:
    the client shares the machine's cores with the stack it measures, and requests'
    session costs several times the CPU per call (its adapters, hooks and cookie jar).
    """

    def __init__(self, stack: Stack, key: str) -> None:
        self.url, self.auth = stack.url, {"Authorization": f"Bearer {key}"}
        self.db = create_engine(stack.env["DATABASE_URL"])
        self.http = requests.Session()  # the odd call (a cancel); not the submissions
        address = urllib.parse.urlsplit(self.url)
        self._address = (address.hostname or "127.0.0.1", address.port or 80)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.refused = 0
        """POSTs answered 429 or 503 and sent again after Retry-After."""

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(*self._address, timeout=300)
        return conn

    def submit(self, body: dict) -> tuple[str, float]:
        started = time.perf_counter()
        payload = json.dumps(body).encode()
        headers = {
            **self.auth,
            "Content-Type": "application/json",
            "Idempotency-Key": uuid.uuid4().hex,
        }
        for attempt in range(SUBMIT_TRIES):
            conn = self._connection()
            try:
                conn.request("POST", "/v1/jobs", payload, headers)
                response = conn.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException):
                # A kept-alive connection that the server closed just as the request
                # went out; the Idempotency-Key makes sending it again safe.
                conn.close()
                self._local.conn = None
                if attempt == SUBMIT_TRIES - 1:
                    raise
                continue
            if response.status not in (429, 503) or attempt == SUBMIT_TRIES - 1:
                break
            # the web's flow control (a client address's body reads at its cap, every
            # reader busy): sent again after Retry-After, as a client should, and counted
            with self._lock:
                self.refused += 1
            time.sleep(float(response.getheader("Retry-After") or 1))
        if response.status >= 400:
            raise RuntimeError(f"POST /v1/jobs: {response.status} {data[:300]!r}")
        return json.loads(data)["id"], time.perf_counter() - started

    def unfinished(self) -> int:
        """Count the jobs not ended yet: the rows run one after another, so these are the
        current row's (a cheap query: it runs on the machine being measured)."""
        with self.db.connect() as conn:
            return conn.execute(
                text("SELECT count(*) FROM jobs WHERE status IN ('queued','running')")
            ).scalar()

    def wait_done(self, ids: list[str], timeout: float, interval: float = POLL_S) -> None:
        wait(lambda: self.unfinished() == 0, timeout, f"{len(ids)} jobs done", interval=interval)
        with self.db.connect() as conn:
            failed = conn.execute(
                text(
                    "SELECT count(*) FROM jobs WHERE status != 'succeeded' AND id IN ("
                    + ",".join(f"'{i}'" for i in ids)
                    + ")"
                )
            ).scalar()
        if failed:
            raise RuntimeError(f"{failed} benchmark jobs did not succeed")


class WorkerProbe:
    """Reads the worker's Prometheus exporter (batches, batched segments, translate time)
    and the CPU time of every process of the stack and of this client.

    The worker's CPU is split by thread: its `translators` busiest threads in a row are
    CTranslate2's parallel translators (each runs one batch at a time, at 40-100% of a
    core, where a task thread uses well under 1%); the rest is the worker's own
    bookkeeping (tasks, claims, writes, the broker). What nobody used is `idle`.
    """

    def __init__(self, url: str, stack: Stack, translators: int = 1) -> None:
        self.url, self.stack, self.translators = url, stack, translators

    def read(self) -> dict:
        totals = {"batches": 0.0, "batched_segments": 0.0, "translate_s": 0.0, "taken": 0.0}
        text_ = requests.get(self.url, timeout=10).text
        for family in text_string_to_metric_families(text_):
            for sample in family.samples:
                if sample.name == "stapel_taken_along_total":
                    totals["taken"] += sample.value
                elif sample.name == "stapel_batch_size_count":
                    totals["batches"] += sample.value
                elif sample.name == "stapel_batch_size_sum":
                    totals["batched_segments"] += sample.value
                elif (
                    sample.name == "stapel_stage_seconds_sum"
                    and sample.labels.get("stage") == "translate"
                ):
                    totals["translate_s"] += sample.value
        return totals

    def during(self, run, *args) -> dict:
        """Run run(*args); add the mean batch size and the translator's busy share."""
        worker = self.stack.pids("cpu")[0]
        before, cpu_before, threads = self.read(), self.cpu(), thread_cpu_seconds(worker)
        row = run(*args)
        after, cpu_after = self.read(), self.cpu()
        spent = sorted(
            (used - threads.get(tid, 0.0) for tid, used in thread_cpu_seconds(worker).items()),
            reverse=True,
        )
        delta = {k: after[k] - before[k] for k in before}
        row["batches"] = int(delta["batches"])
        row["taken_along"] = int(delta["taken"])
        row["mean_batch_segments"] = delta["batched_segments"] / max(delta["batches"], 1)
        row["translator_busy"] = delta["translate_s"] / row["seconds"]
        row["cpu_s"] = {k: round(cpu_after[k] - cpu_before.get(k, 0.0), 2) for k in cpu_after}
        row["cpu_s"]["worker_translators"] = round(sum(spent[: self.translators]), 2)
        row["cpu_s"]["worker_other"] = round(sum(spent[self.translators :]), 2)
        used = sum(v for k, v in row["cpu_s"].items() if not k.startswith("worker_"))
        row["cpu_s"]["idle"] = round(max(0.0, (os.cpu_count() or 1) * row["seconds"] - used), 2)
        return row

    def cpu(self) -> dict[str, float]:
        return {**self.stack.cpu(), "client": cpu_seconds(os.getpid())}


def body(segments: list[str]) -> dict:
    return {"source_lang": "en", "target_lang": "de", "segments": segments}


def many_small(client: Client, docs: list[list[str]]) -> dict:
    refused = client.refused
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        submitted = list(pool.map(lambda d: client.submit(body(d)), docs))
    submit_s = time.perf_counter() - started
    ids = [job_id for job_id, _ in submitted]
    client.wait_done(ids, timeout=3600)
    elapsed = time.perf_counter() - started
    latencies = [lat for _, lat in submitted]
    return {
        "segments": sum(map(len, docs)),
        "jobs": len(docs),
        "seconds": elapsed,
        "submit_jobs_per_s": len(docs) / submit_s,
        "post_p50_ms": 1000 * percentile(latencies, 50),
        "post_p99_ms": 1000 * percentile(latencies, 99),
        "posts_sent_again": client.refused - refused,
    }


def one_big(client: Client, texts: list[str]) -> dict:
    started = time.perf_counter()
    job_id, _ = client.submit(body(texts))
    client.wait_done([job_id], timeout=7200, interval=BIG_POLL_S)
    return {"segments": len(texts), "seconds": time.perf_counter() - started}


def idle_latency(client: Client, texts: list[str]) -> dict:
    times = []
    for t in texts:
        started = time.perf_counter()
        job_id, _ = client.submit(body([t]))
        client.wait_done([job_id], timeout=120, interval=LATENCY_POLL_S)
        times.append(time.perf_counter() - started)
    return {
        "p50_ms": 1000 * percentile(times, 50),
        "p99_ms": 1000 * percentile(times, 99),
        "samples": len(times),
    }


def rss_during_huge_job(client: Client, stack: Stack, texts: list[str], chunks: int) -> dict:
    job_id, post_s = client.submit(body(texts))
    with client.db.connect() as conn:
        total = conn.execute(
            text("SELECT chunks_total FROM jobs WHERE id = :j"), {"j": job_id}
        ).scalar()
        chunks = min(chunks, total)
        wait(
            lambda: (
                conn.execute(
                    text("SELECT count(*) FROM chunks WHERE job_id = :j AND status = 'succeeded'"),
                    {"j": job_id},
                ).scalar()
                >= chunks
            ),
            3600,
            f"{chunks} chunks of the huge job",
        )
    client.http.post(f"{stack.url}/v1/jobs/{job_id}/cancel", headers=client.auth, timeout=60)
    return {
        "segments": len(texts),
        "chunks_translated": chunks,
        "post_seconds": post_s,
        "web_peak_rss_mib": max(map(rss_peak_kib, stack.pids("web"))) / 1024,
        "worker_peak_rss_mib": max(map(rss_peak_kib, stack.pids("cpu"))) / 1024,
    }


def stack_env(args) -> dict:
    """The settings every benchmark stack runs with: the bench model, threads, lengths.

    One tenant sends everything, so the per-tenant guards are off or out of reach: the
    benchmarks measure the pipeline. Every job goes to the cpu pool's one worker.
    """
    return {
        "STAPEL_MODEL_ROOT": str(model_dir(args)),
        "STAPEL_THREADS": str(args.threads),
        "STAPEL_PARALLEL_BATCHES": str(args.parallel_batches),
        "STAPEL_DEVICE": args.device,
        "STAPEL_MAX_DECODING_LENGTH": str(args.decode),
        "STAPEL_MIN_DECODING_LENGTH": str(args.decode),
        "STAPEL_BATCH_TOKENS": str(args.batch_tokens),
        "STAPEL_LOG_LEVEL": "WARNING",
        "STAPEL_GPU_THRESHOLD": str(10**9),
        "STAPEL_PRELOAD": PAIR,
        "STAPEL_RATE_SUBMIT": "off",
        "STAPEL_RATE_READ": "off",
        "STAPEL_QUOTA_SEGMENTS_PER_DAY": str(10**9),
        # every client of a bench runs on this host: one address for all of them
        "STAPEL_BODY_READS_PER_ADDRESS": "1000",
        # The rows send the same jobs several times: each run must translate them anew
        # (bench.reuse measures the MT cache, with its own corpus).
        "STAPEL_CACHE": "off",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="cpu")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--parallel-batches",
        type=int,
        default=0,
        help="STAPEL_PARALLEL_BATCHES for the worker and raw (0: the "
        "worker's default, one batch per thread on CPU, one on GPU)",
    )
    parser.add_argument("--decode", type=int, default=40, help="output tokens per segment")
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument(
        "--batch-memory-tokens",
        type=int,
        default=None,
        help="STAPEL_BATCH_MEMORY_TOKENS for the worker (default: the device's; raw has "
        "no such bound)",
    )
    parser.add_argument(
        "--web-processes", type=int, default=None, help="web processes (the Procfile's)"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="the tests' tiny model instead of Transformer-base: what the pipeline "
        "takes when translation is nearly free (a GPU's regime)",
    )
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--big", type=int, default=BIG_SEGMENTS)
    parser.add_argument("--naive", type=int, default=200)
    parser.add_argument("--latency-samples", type=int, default=LATENCY_SAMPLES)
    parser.add_argument("--rss-segments", type=int, default=200_000)
    parser.add_argument(
        "--concurrency",
        type=int,
        default=128,
        help="worker task threads (the Procfile and deploy/ default)",
    )
    parser.add_argument(
        "--small-only",
        action="store_true",
        help="only raw and many small (for sweeps of --concurrency)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="many-small runs, and raw runs on their segments; the median "
        "of each is the row, all are kept",
    )
    parser.add_argument(
        "--raw-malloc-tuning",
        action="store_true",
        help="raw runs with the worker's allocator thresholds (workers/allocator.py); "
        "by default raw keeps glibc's, as CTranslate2 alone runs",
    )
    parser.add_argument(
        "--raw-plain",
        action="store_true",
        help="raw translates only, without the hypotheses' scores the worker asks for (its "
        "confidence scores); by default raw asks for them too, so both do the same work",
    )
    args = parser.parse_args(argv)
    if args.raw_malloc_tuning:
        allocator.tune(True)  # this process: raw runs here, the stack in its own processes

    path = bench_model(args)
    docs, big, singles = bench_texts(args.docs, args.big, args.latency_samples)
    warm_up = [[t] for t in pseudo_corpus(WARM_UP_DOCS, seed=11)]
    small_texts = [t for d in docs for t in d]

    memory_tokens = pick_batch_limits(args.device, args.batch_tokens, args.batch_memory_tokens)[1]
    results: dict = {
        "name": args.name,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "device": args.device,
        "threads": args.threads,
        "parallel_batches": pick_parallel(args.device, args.threads, args.parallel_batches)[0],
        "decode_tokens": args.decode,
        "model": "tiny" if args.tiny else "transformer-base",
        "batch_tokens": args.batch_tokens,
        "batch_memory_tokens": memory_tokens,
        "ctranslate2": ctranslate2.__version__,
        "raw_malloc_tuning": args.raw_malloc_tuning,
        "raw_scores": not args.raw_plain,
        "rows": {},
    }
    print(
        "raw CTranslate2 ..." if args.raw_plain else "raw CTranslate2 (with the scores) ...",
        flush=True,
    )
    raw_small_all = sorted(
        (raw_run(path, small_texts, args) for _ in range(args.repeat)),
        key=lambda run: run["segments_per_s"],
    )
    raw_small_runs = [run["segments_per_s"] for run in raw_small_all]
    raw_small_median = raw_small_all[len(raw_small_all) // 2]
    raw_small = raw_small_median["segments_per_s"]
    progress("raw on the small-job segments, segments/s", raw_small_runs)
    if not args.small_only:
        raw_big = raw_rate(path, big, args)
        naive = naive_rate(path, big[: args.naive], args)
        progress("raw on the big job, naive, segments/s", [raw_big, naive])

    workdir = Path(tempfile.mkdtemp(prefix="stapel-bench-"))
    stack = Stack(
        workdir,
        {
            **stack_env(args),
            "STAPEL_MAX_SEGMENTS": str(max(args.rss_segments, args.big)),
            "STAPEL_MAX_BODY_BYTES": str(512 * 1024 * 1024),
            "STAPEL_FAIR_SHARE_STEP": "0",
            "STAPEL_QUOTA_JOBS_IN_FLIGHT": "100000",
            "STAPEL_BATCH_MEMORY_TOKENS": str(memory_tokens),
        },
    )
    try:
        results["web_processes"] = stack.start_web(workers=args.web_processes)[0]
        metrics_port = free_port()
        stack.start_worker("cpu", args.concurrency, {"STAPEL_METRICS_PORT": str(metrics_port)})
        probe = WorkerProbe(
            f"http://127.0.0.1:{metrics_port}/metrics", stack, results["parallel_batches"]
        )
        with make_session_factory(make_engine(stack.env["DATABASE_URL"]))() as session:
            key = create_key(session, "bench")[1]
        client = Client(stack, key)
        print("warm-up ...", flush=True)
        many_small(client, warm_up)
        print("many small ...", flush=True)
        runs = sorted(
            (probe.during(many_small, client, docs) for _ in range(args.repeat)),
            key=lambda run: run["seconds"],
        )
        small = runs[len(runs) // 2]
        progress("many small, segments/s", [r["segments"] / r["seconds"] for r in runs])
        if not args.small_only:
            print("one big ...", flush=True)
            large = probe.during(one_big, client, big)
            progress("one big, segments/s", [large["segments"] / large["seconds"]])
            print("idle latency ...", flush=True)
            latency = idle_latency(client, singles)
            progress("idle one-segment p50/p99 ms", [latency["p50_ms"], latency["p99_ms"]])
            print("peak RSS during a huge job ...", flush=True)
            rss = rss_during_huge_job(client, stack, pseudo_corpus(args.rss_segments, seed=9), 3)
    finally:
        stack.stop()

    results["concurrency"] = args.concurrency
    rows = results["rows"]
    rows["raw (small-job segments)"] = {
        **raw_small_median,
        "ratio": 1.0,
        "runs_segments_per_s": raw_small_runs,
    }
    rows["many small"] = {
        "segments_per_s": small["segments"] / small["seconds"],
        "ratio": small["segments"] / small["seconds"] / raw_small,
        **small,
        "ratios_of_runs": [r["segments"] / r["seconds"] / raw_small for r in runs],
    }
    results["submit"] = {
        k: small[k] for k in ("submit_jobs_per_s", "post_p50_ms", "post_p99_ms", "posts_sent_again")
    }
    if not args.small_only:
        big_rows(results, raw_big, large, naive, latency, rss)
    out = write_run(run_path(args.name), results)
    print_table(results, out)


def big_rows(
    results: dict, raw_big: float, large: dict, naive: float, latency: dict, rss: dict
) -> None:
    """Add the rows and figures of the one-big, naive, latency and RSS measurements."""
    rows = results["rows"]
    rows["raw (big-job segments)"] = {"segments_per_s": raw_big, "ratio": 1.0}
    rows["one big"] = {
        "segments_per_s": large["segments"] / large["seconds"],
        "ratio": large["segments"] / large["seconds"] / raw_big,
        **large,
    }
    rows["naive (one per call)"] = {"segments_per_s": naive, "ratio": naive / raw_big}
    results["one_segment_idle"] = latency
    results["huge_job_rss"] = rss


def many_small_gap(raw: dict, small: dict) -> str:
    """Where many small's time beyond raw's goes, in CPU seconds of the machine's cores:
    its translators against raw's (the same segments: more means smaller or worse-placed
    batches), the rest of the stack (web, the worker's own threads, Redis, this client,
    which raw does not have: all of the worker's CPU but its translators'), and cores
    nobody used, raw's idle beside it (medians)."""
    cores = os.cpu_count() or 1
    cpu, raw_cpu = small["cpu_s"], raw["translate_cpu_s"]
    stack = cpu["web"] + cpu["redis"] + cpu["client"] + cpu["worker"] - cpu["worker_translators"]
    return (
        f"many small against raw: {small['seconds']:.2f} s against {raw['seconds']:.2f} s; "
        f"translators {cpu['worker_translators']:.1f} core-s against raw's {raw_cpu:.1f}, "
        f"the rest of the stack {stack:.1f}, idle {cpu['idle']:.1f} against raw's "
        f"{max(cores * raw['seconds'] - raw_cpu, 0.0):.1f} ({cores} cores)"
    )


def print_table(results: dict, out: Path) -> None:
    print(
        f"\nworker concurrency {results['concurrency']}\n"
        "| row | segments/s | ratio to raw | mean batch | translator busy |\n"
        "|---|---:|---:|---:|---:|"
    )
    for name, row in results["rows"].items():
        extra = (
            f"{row['mean_batch_segments']:.0f} | {row['translator_busy']:.0%}"
            if "batches" in row
            else "|"
        )
        print(f"| {name} | {row['segments_per_s']:.1f} | {row['ratio']:.2f} | {extra} |")
    for name, row in results["rows"].items():
        if "cpu_s" in row:
            print(
                f"CPU seconds during {name} ({row['seconds']:.1f} s wall): "
                + ", ".join(f"{k} {v:.1f}" for k, v in row["cpu_s"].items())
            )
        if "jobs" in row:
            print(
                f"{name}: {row['taken_along']} of {row['jobs']} jobs' messages taken along "
                "by a task, the rest delivered by Celery one at a time"
            )
    print(
        many_small_gap(results["rows"]["raw (small-job segments)"], results["rows"]["many small"])
    )
    runs = results["rows"]["many small"]["ratios_of_runs"]
    if len(runs) > 1:
        print("many small, each run (fastest first): " + ", ".join(f"{r:.2f}" for r in runs))
        raw_runs = results["rows"]["raw (small-job segments)"]["runs_segments_per_s"]
        print(
            "raw on those segments, each run (segments/s): "
            + ", ".join(f"{r:.1f}" for r in raw_runs)
        )
    submit = results["submit"]
    print(
        f"\nPOST /v1/jobs: {submit['submit_jobs_per_s']:.0f} jobs/s, p50 "
        f"{submit['post_p50_ms']:.0f} ms, p99 {submit['post_p99_ms']:.0f} ms"
        + (
            f" ({submit['posts_sent_again']} answered 429/503 and sent again)"
            if submit["posts_sent_again"]
            else ""
        )
    )
    if "one_segment_idle" in results:
        latency, rss = results["one_segment_idle"], results["huge_job_rss"]
        print(
            f"one-segment job on an idle worker, submit to done: p50 "
            f"{latency['p50_ms']:.0f} ms, p99 {latency['p99_ms']:.0f} ms "
            f"({latency['samples']} samples)"
        )
        print(
            f"{rss['segments']}-segment job: POST took {rss['post_seconds']:.1f} s; peak "
            f"RSS web {rss['web_peak_rss_mib']:.0f} MiB, worker "
            f"{rss['worker_peak_rss_mib']:.0f} MiB"
        )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
