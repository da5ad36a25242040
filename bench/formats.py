"""A 2,000-unit XLIFF file against the same sentences sent as plain segments.

    python -m bench.formats --model base      # bench/runs/formats-base.json
    python -m bench.formats --model demo      # bench/runs/formats-demo.json

One stack (the web, one cpu worker) on either the Transformer-base sized model of
`make bench` (random weights, 40 output tokens a segment: the cost of a real model, so
the figure the service is held to) or the committed demo model en-de (1.65M parameters,
about a hundred times cheaper a segment than a real model, with real translations, so
the tags really are placed by alignment: the worst case for the per-segment cost of
placing tags). Each round sends the same
2,000 sentences twice, in alternating order: as one JSON job of plain segments, and as
one XLIFF 1.2 file whose units carry the tags of training/tagged.py (`<g>` around
phrases, `<x/>` before them). Each is timed from the POST to the downloaded result
(the JSON result, or the rebuilt XLIFF file), in wall-clock seconds and in CPU seconds
of the web and worker processes (the figure to trust on a shared machine: it does not
count other programs' time); the figures are the ratios of their rates.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

import requests

from bench.stack import Stack, wait
from bench.stamp import run_path, write_run
from bench.throughput import bench_model
from stapel.db import make_engine, make_session_factory
from stapel.formats import inline
from stapel.keys import create_key
from training.tagged import tagged_pairs

ROOT = Path(__file__).resolve().parent.parent
UNITS = 2000
ROUNDS = 3
POLL_S = 0.05


def xliff(sources: list[str]) -> bytes:
    """An XLIFF 1.2 file with one trans-unit per tagged source (markers as g and x)."""
    units = []
    for i, source in enumerate(sources, 1):
        out, at = [], 0
        for match in inline.MARKER.finditer(source):
            out.append(escape(source[at : match.start()]))
            kind, n = inline.KINDS[match.group(1)], match.group(2)
            out.append({"open": f'<g id="{n}">', "close": "</g>", "point": f'<x id="{n}"/>'}[kind])
            at = match.end()
        out.append(escape(source[at:]))
        units.append(f'<trans-unit id="{i}"><source>{"".join(out)}</source></trans-unit>')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
        '<file original="bench" source-language="en" datatype="plaintext"><body>\n'
        + "\n".join(units)
        + "\n</body></file></xliff>\n"
    ).encode()


def run_job(
    stack: Stack, headers: dict, *, plain: list[str] | None = None, xlf: bytes = b""
) -> dict:
    """Submit one job, wait for it, download its result; return the seconds each step took
    and the CPU seconds the web and the worker spent on it all."""
    url = stack.url
    cpu_before = stack.cpu()
    started = time.monotonic()
    if plain is not None:
        body = {"source_lang": "en", "target_lang": "de", "segments": plain}
        job = requests.post(f"{url}/v1/jobs", json=body, headers=headers, timeout=60).json()
    else:
        files = {"files": ("bench.xlf", xlf, "application/xliff+xml")}
        data = {"source_lang": "en", "target_lang": "de"}
        job = requests.post(
            f"{url}/v1/jobs", files=files, data=data, headers=headers, timeout=60
        ).json()
    link = f"{url}/v1/jobs/{job['id']}"
    posted = time.monotonic()
    wait(
        lambda: requests.get(link, headers=headers, timeout=10).json()["status"] == "succeeded",
        600,
        "job done",
        POLL_S,
    )
    done = time.monotonic()
    query = "" if plain is not None else "?format=file"
    result = requests.get(f"{link}/result{query}", headers=headers, timeout=60)
    result.raise_for_status()
    end = time.monotonic()
    cpu = {k: v - cpu_before.get(k, 0.0) for k, v in stack.cpu().items()}
    return {
        "cpu_seconds": round(cpu.get("web", 0.0) + cpu.get("worker", 0.0), 3),
        "seconds": round(end - started, 3),
        "post": round(posted - started, 3),
        "translate": round(done - posted, 3),
        "result": round(end - done, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.formats")
    parser.add_argument("--units", type=int, default=UNITS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", choices=("base", "demo"), default="base")
    args = parser.parse_args(argv)
    sentences = [en for en, _ in tagged_pairs(args.units * (args.rounds + 1), held_out=False)]
    tags = sum(len(inline.split(s)[1]) for s in sentences)
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "STAPEL_MODEL_ROOT": str(ROOT / "models"),
            "STAPEL_THREADS": str(args.threads),
            "STAPEL_RATE_READ": "off",  # the client polls faster than an API key may
            "STAPEL_RATE_SUBMIT": "off",
        }
        if args.model == "base":
            env["STAPEL_MODEL_ROOT"] = str(bench_model(None).parent)
            env["STAPEL_MIN_DECODING_LENGTH"] = env["STAPEL_MAX_DECODING_LENGTH"] = "40"
        stack = Stack(Path(tmp), env)
        try:
            stack.start_web()
            stack.start_worker("cpu", 8)
            with make_session_factory(make_engine(stack.env["DATABASE_URL"]))() as session:
                headers = {"Authorization": f"Bearer {create_key(session, 'bench')[1]}"}
            rows = measure(stack, headers, sentences, args)
        finally:
            stack.stop()
    plain = statistics.median(r["plain"]["seconds"] for r in rows)
    tagged = statistics.median(r["xliff"]["seconds"] for r in rows)
    plain_cpu = statistics.median(r["plain"]["cpu_seconds"] for r in rows)
    tagged_cpu = statistics.median(r["xliff"]["cpu_seconds"] for r in rows)
    report = {
        "machine": f"{platform.machine()} {args.threads} threads",
        "model": args.model,
        "units": args.units,
        "tags_per_unit": round(tags / len(sentences), 2),
        "rounds": rows,
        "plain_segments_per_s": round(args.units / plain, 1),
        "xliff_units_per_s": round(args.units / tagged, 1),
        "ratio": round(plain / tagged, 3),
        "plain_segments_per_cpu_s": round(args.units / plain_cpu, 1),
        "xliff_units_per_cpu_s": round(args.units / tagged_cpu, 1),
        "cpu_ratio": round(plain_cpu / tagged_cpu, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    write_run(run_path(f"formats-{args.model}"), report)
    print(json.dumps({k: v for k, v in report.items() if k != "rounds"}, indent=2))


def measure(stack: Stack, headers: dict, sentences: list[str], args) -> list[dict]:
    """Warm up once, then time each round's two jobs (alternating which goes first)."""
    n = args.units
    run_job(stack, headers, plain=[inline.strip(s) for s in sentences[-n:]])  # warm-up
    rows = []
    for r in range(args.rounds):
        batch = sentences[r * n : (r + 1) * n]
        plain, xlf = [inline.strip(s) for s in batch], xliff(batch)
        order = ("plain", "xliff") if r % 2 == 0 else ("xliff", "plain")
        row = {}
        for kind in order:
            if kind == "plain":
                row["plain"] = run_job(stack, headers, plain=plain)
            else:
                row["xliff"] = run_job(stack, headers, xlf=xlf)
        rows.append(row)
        print(f"round {r + 1}: {row}", flush=True)
    return rows


if __name__ == "__main__":
    main()
