"""LibreTranslate beside Stapel and raw CTranslate2: same model, workloads, output length.

    python -m bench.peer --name peer          # `make bench-peer`
    python -m bench.peer --name peer-quick --docs 20 --big 40 --configs greedy-2x1

Makes .cache/peer-venv (LibreTranslate pinned, from the package registry), packages the
benchmark model as an Argos package (en->de, and de->en so that LibreTranslate does not
look for an index online), installs it under .cache/peer, then starts LibreTranslate
once per configuration (`--load-only en,de`, no API keys) and sends it the many-small
jobs (one POST /translate per job, `q` a list, 32 at once) and the one-big job (one POST
with every segment). A launcher pins every translate_batch to --decode output tokens,
as Stapel's bench pins its own. Raw CTranslate2 and Stapel run the same segments in the
same run. Writes bench/runs/<name>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import ctranslate2
import requests
import sentencepiece as spm

from bench.stack import Stack, cpu_seconds, free_port, wait
from bench.stamp import run_path, write_run
from bench.throughput import (
    ROOT,
    SUBMITTERS,
    Client,
    bench_model,
    bench_texts,
    many_small,
    one_big,
    raw_rate,
    stack_env,
)
from stapel.db import make_engine, make_session_factory
from stapel.keys import create_key
from training.random_model import pseudo_corpus

LIBRETRANSLATE = "1.9.6"
REQUIREMENTS = (
    f"libretranslate=={LIBRETRANSLATE}",
    f"ctranslate2=={ctranslate2.__version__}",
    "spacy==3.8.18",
    "rich==12.6.0",
)
"""The peer venv: CTranslate2 as Stapel's (LibreTranslate allows any 4.x), spaCy for the
sentence splitter that needs no download, rich as LibreTranslate's dependencies resolved
it here."""
VENV = ROOT / ".cache" / "peer-venv"
HOME = ROOT / ".cache" / "peer"
"""Argos's data, config, cache and package dirs, LibreTranslate's cwd and logs."""
LANGUAGES = {"en": "English", "de": "German"}
WARM_UP_REQUESTS = 8
"""One-segment requests sent before each configuration's rows: they load the translator
and the splitter (LibreTranslate loads both on the first request)."""

CONFIGS: dict[str, dict[str, str]] = {
    "defaults": {},
    "2x1": {"ARGOS_INTER_THREADS": "2", "ARGOS_INTRA_THREADS": "1"},
    "greedy-2x1": {
        "ARGOS_BEAM_SIZE": "1",
        "ARGOS_INTER_THREADS": "2",
        "ARGOS_INTRA_THREADS": "1",
    },
}
"""LibreTranslate's settings per row, over the environment every row has (below):
defaults are beam 4, one CTranslate2 replica on all cores, 4 waitress threads; 2x1 is two
replicas of one thread (argos's documented ARGOS_INTER/INTRA_THREADS); greedy-2x1 also
decodes greedily (ARGOS_BEAM_SIZE=1), the same search as Stapel's."""

LAUNCHER = '''\
"""Start LibreTranslate; with STAPEL_PEER_DECODE > 0 every translate_batch decodes
exactly that many tokens (argos passes no length, so CTranslate2's default 256 applies)."""
import os
import sys

import ctranslate2

length = int(os.environ.get("STAPEL_PEER_DECODE", "0"))
if length > 0:

    class PinnedTranslator(ctranslate2.Translator):
        def translate_batch(self, source, *args, **kwargs):
            kwargs.update(max_decoding_length=length, min_decoding_length=length)
            return super().translate_batch(source, *args, **kwargs)

    # argostranslate.translate builds its translator as ctranslate2.Translator(...).
    ctranslate2.Translator = PinnedTranslator

from libretranslate.main import main

sys.argv[0] = "libretranslate"
main()
'''


def package_name(from_code: str, to_code: str, version: str = "1.0") -> str:
    """Return the directory name argos gives an installed package."""
    return f"translate-{from_code}_{to_code}-{version.replace('.', '_')}"


def package_metadata(from_code: str, to_code: str, version: str = "1.0") -> dict:
    """Return an Argos package's metadata.json for the benchmark model."""
    return {
        "package_version": version,
        "argos_version": "1.12.1",
        "from_code": from_code,
        "from_name": LANGUAGES[from_code],
        "to_code": to_code,
        "to_name": LANGUAGES[to_code],
        "type": "translate",
    }


def package_members(model_dir: Path, spacy_dir: Path, root: str) -> list[tuple[str, Path]]:
    """Return (name in the archive, file) for an Argos package of a CTranslate2 model:
    model/ (the CTranslate2 files), sentencepiece.model (the shared vocabulary's
    SentencePiece model, which argos uses both ways), spacy/ (the splitter's pipeline)."""
    members = [
        (f"{root}/model/{p.name}", p)
        for p in sorted(model_dir.iterdir())
        if p.is_file() and p.suffix != ".spm"
    ]
    members.append((f"{root}/sentencepiece.model", model_dir / "source.spm"))
    members += [
        (f"{root}/spacy/{p.relative_to(spacy_dir).as_posix()}", p)
        for p in sorted(spacy_dir.rglob("*"))
        if p.is_file()
    ]
    return members


def peer_env() -> dict[str, str]:
    """The environment of every peer process: argos's dirs under HOME, never the user's."""
    return {
        **os.environ,
        "XDG_DATA_HOME": str(HOME / "data"),
        "XDG_CONFIG_HOME": str(HOME / "config"),
        "XDG_CACHE_HOME": str(HOME / "cache"),
        "ARGOS_PACKAGES_DIR": str(HOME / "packages"),
        # Its default splitter (MiniSBD) downloads an ONNX model; spaCy's rule-based
        # sentencizer on the package's blank pipeline needs nothing.
        "ARGOS_CHUNK_TYPE": "SPACY",
    }


INSTALL = "import sys; from argostranslate import package; package.install_from_path(sys.argv[1])"


def peer_python(code: str, *args: str) -> None:
    subprocess.run([str(VENV / "bin" / "python"), "-c", code, *args], env=peer_env(), check=True)


def ensure_venv() -> None:
    """Create .cache/peer-venv with REQUIREMENTS once (again when they change)."""
    marker = VENV / ".stapel-requirements"
    if marker.exists() and marker.read_text() == "\n".join(REQUIREMENTS):
        return
    print(f"installing {', '.join(REQUIREMENTS)} into {VENV} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, *REQUIREMENTS], check=True)
    marker.write_text("\n".join(REQUIREMENTS))


def ensure_packages(model_dir: Path) -> None:
    """Package the model (en->de, de->en) and install it with argos's own installer."""
    # argos looks for its multilingual spaCy model here when ARGOS_CHUNK_TYPE=SPACY and
    # downloads it if absent; our packages carry their own pipeline, so it is never used.
    (HOME / "cache" / "argos-translate" / "spacy" / "senter" / "model").mkdir(
        parents=True, exist_ok=True
    )
    spacy_dir = HOME / "spacy-blank"
    if not (spacy_dir / "config.cfg").exists():
        peer_python("import spacy, sys; spacy.blank('en').to_disk(sys.argv[1])", str(spacy_dir))
    stamp = f"{(model_dir / 'model.bin').stat().st_mtime_ns}"
    for from_code, to_code in (("en", "de"), ("de", "en")):
        root = package_name(from_code, to_code)
        installed = HOME / "packages" / root
        if (installed / "stamp").exists() and (installed / "stamp").read_text() == stamp:
            continue
        shutil.rmtree(installed, ignore_errors=True)
        archive = HOME / f"{root}.argosmodel"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr(f"{root}/metadata.json", json.dumps(package_metadata(from_code, to_code)))
            zf.writestr(f"{root}/stamp", stamp)
            for name, path in package_members(model_dir, spacy_dir, root):
                zf.write(path, name)
        peer_python(INSTALL, str(archive))
        archive.unlink()


class Peer:
    """One LibreTranslate server with one configuration; stop() ends it."""

    def __init__(self, config: str, decode: int) -> None:
        (HOME / "run").mkdir(parents=True, exist_ok=True)
        launcher = HOME / "launch.py"
        launcher.write_text(LAUNCHER)
        self.url = f"http://127.0.0.1:{free_port()}"
        log = open(HOME / f"{config}.log", "wb")
        self.proc = subprocess.Popen(
            [str(VENV / "bin" / "python"), str(launcher), "--host", "127.0.0.1"]
            + ["--port", self.url.rsplit(":", 1)[1], "--load-only", "en,de"],
            cwd=HOME / "run",
            env={**peer_env(), **CONFIGS[config], "STAPEL_PEER_DECODE": str(decode)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.http = requests.Session()
        self.http.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=SUBMITTERS))
        wait(self.ready, 300, f"LibreTranslate {config} ready", interval=0.5)

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"LibreTranslate exited with {self.proc.returncode}")
        languages = self.http.get(self.url + "/languages", timeout=5).json()
        return {"en", "de"} <= {lang["code"] for lang in languages}

    def translate(self, texts: list[str]) -> list[str]:
        """POST /translate as LibreTranslate's clients do; return the translations."""
        body = {"q": texts, "source": "en", "target": "de", "format": "text"}
        response = self.http.post(self.url + "/translate", json=body, timeout=3600)
        response.raise_for_status()
        out = response.json()["translatedText"]
        if len(out) != len(texts):
            raise RuntimeError(f"{len(out)} translations for {len(texts)} segments")
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def peer_rows(config: str, docs: list[list[str]], big: list[str], args, sp) -> dict:
    """Many small (32 requests at once) and one big on one LibreTranslate configuration."""
    peer = Peer(config, args.decode)
    try:
        for text in pseudo_corpus(WARM_UP_REQUESTS, seed=11):
            peer.translate([text])
        row: dict = {"env": CONFIGS[config]}
        for label, run in (
            ("many_small", lambda: list(pool_map(peer.translate, docs))),
            ("one_big", lambda: [peer.translate(big)]),
        ):
            cpu, started = cpu_seconds(peer.proc.pid), time.perf_counter()
            outputs = [t for out in run() for t in out]
            seconds = time.perf_counter() - started
            used = cpu_seconds(peer.proc.pid) - cpu
            row[label] = {
                "segments_per_s": len(outputs) / seconds,
                "seconds": seconds,
                "server_cpu_s": used,
                "segments_per_cpu_s": len(outputs) / used,
                # Decoded text encoded again: about the output pieces, not exactly them.
                "output_pieces_per_segment": statistics.mean(map(len, sp.encode(outputs))),
            }
            print(f"  {label}: {row[label]['segments_per_s']:.1f} segments/s", flush=True)
        return row
    finally:
        peer.stop()


def pool_map(fn, items: list) -> list:
    with ThreadPoolExecutor(max_workers=SUBMITTERS) as pool:
        return list(pool.map(fn, items))


def stapel_rows(docs: list[list[str]], big: list[str], args) -> dict:
    """Stapel's many-small and one-big rows, bench.throughput's stack and client."""
    stack = Stack(
        Path(tempfile.mkdtemp(prefix="stapel-peer-")),
        {
            **stack_env(args),
            "STAPEL_FAIR_SHARE_STEP": "0",
            "STAPEL_QUOTA_JOBS_IN_FLIGHT": "100000",
        },
    )
    try:
        stack.start_web()
        stack.start_worker("cpu", args.concurrency)
        with make_session_factory(make_engine(stack.env["DATABASE_URL"]))() as session:
            key = create_key(session, "bench")[1]
        client = Client(stack, key)
        many_small(client, [[t] for t in pseudo_corpus(WARM_UP_REQUESTS, seed=11)])
        row = {}
        for label, run, work in (("many_small", many_small, docs), ("one_big", one_big, big)):
            cpu = sum(stack.cpu().values())
            done = run(client, work)
            row[label] = {
                "segments_per_s": done["segments"] / done["seconds"],
                "seconds": done["seconds"],
                "server_cpu_s": sum(stack.cpu().values()) - cpu,
            }
            row[label]["segments_per_cpu_s"] = done["segments"] / row[label]["server_cpu_s"]
            print(f"  {label}: {row[label]['segments_per_s']:.1f} segments/s", flush=True)
        return row
    finally:
        stack.stop()


def raw_row(path: Path, texts: list[str], args) -> dict:
    """bench.throughput's raw rate, with the CPU time this process spent on it."""
    cpu = cpu_seconds(os.getpid())
    rate = raw_rate(path, texts, args)
    used = cpu_seconds(os.getpid()) - cpu
    return {"segments_per_s": rate, "server_cpu_s": used, "segments_per_cpu_s": len(texts) / used}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="peer")
    parser.add_argument(
        "--docs", type=int, default=200, help="many-small jobs of 1-5 segments (make bench's 200)"
    )
    parser.add_argument("--big", type=int, default=100, help="segments of the one-big job")
    parser.add_argument("--decode", type=int, default=40, help="output tokens per segment")
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--parallel-batches", type=int, default=0)
    parser.add_argument("--batch-tokens", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, default=128)
    args = parser.parse_args(argv)

    path = bench_model(args)
    ensure_venv()
    ensure_packages(path)
    docs, big, _ = bench_texts(args.docs, args.big, 0)
    sp = spm.SentencePieceProcessor(model_file=str(path / "target.spm"))
    started, load = time.time(), os.getloadavg()
    rows: dict = {}
    print("raw CTranslate2 ...", flush=True)
    rows["raw"] = {
        "many_small": raw_row(path, [t for d in docs for t in d], args),
        "one_big": raw_row(path, big, args),
    }
    print("Stapel ...", flush=True)
    rows["Stapel"] = stapel_rows(docs, big, args)
    for config in args.configs:
        print(f"LibreTranslate {config} ...", flush=True)
        rows[f"LibreTranslate {config}"] = peer_rows(config, docs, big, args, sp)
    results = {
        "name": args.name,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "minutes": round((time.time() - started) / 60, 1),
        "load_average_at_start": load,
        "libretranslate": LIBRETRANSLATE,
        "ctranslate2": ctranslate2.__version__,
        "decode_tokens": args.decode,
        "segments": {"many_small": sum(map(len, docs)), "jobs": len(docs), "one_big": len(big)},
        "rows": rows,
    }
    out = write_run(run_path(args.name), results)
    print_table(results, out)


def print_table(results: dict, out: Path) -> None:
    rows, stapel = results["rows"], results["rows"]["Stapel"]
    segments = results["segments"]
    print(
        f"\n{segments['jobs']} small jobs ({segments['many_small']} segments), one job of "
        f"{segments['one_big']}, {results['decode_tokens']} output tokens per segment\n"
        "| row | many small, segments/s | one big, segments/s | Stapel's many small is | "
        "Stapel's one big is | many small, segments per CPU-second | one big, per CPU-second |"
        "\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for name, row in rows.items():
        small, large = row["many_small"]["segments_per_s"], row["one_big"]["segments_per_s"]
        ratio_small = stapel["many_small"]["segments_per_s"] / small
        ratio_big = stapel["one_big"]["segments_per_s"] / large
        per_cpu = [row[label]["segments_per_cpu_s"] for label in ("many_small", "one_big")]
        print(
            f"| {name} | {small:.1f} | {large:.1f} | {ratio_small:.1f}x | {ratio_big:.1f}x | "
            f"{per_cpu[0]:.1f} | {per_cpu[1]:.1f} |"
        )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
