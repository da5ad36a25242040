"""Build, check and evaluate Stapel's own English<->German models, and the benchmark model.

python -m training.build --all                       # both pairs into models/en-de, models/de-en
python -m training.build --pair en-de --out models/en-de
python -m training.build --pair en-de --out /tmp/x --tiny   # seconds, for tests
python -m training.build evaluate --pair en-de       # exact match, chrF, BLEU on 1000 held-out
python -m training.build check --pair en-de          # CTranslate2 vs PyTorch log-probs
python -m training.build bench-model --out .cache/models/bench-xx-yy
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import ctranslate2
import sentencepiece as spm

from training.corpus import Corpus, build_corpus
from training.random_model import train_spm

PAIRS = ("en-de", "de-en")
CACHE = Path(".cache/train")
SEED = 0


@dataclass(frozen=True)
class Scale:
    """Corpus size, model shape and training length."""

    n_train: int
    n_test: int
    vocab: int
    d_model: int
    heads: int
    ffn: int
    layers: int
    steps: int
    max_tokens: int
    max_minutes: float
    check_pairs: int


FULL = Scale(200_000, 1000, 2000, 128, 4, 512, 3, 2000, 4000, 12.5, 100)
TINY = Scale(300, 20, 2000, 32, 2, 64, 1, 6, 1000, 1.0, 10)


def log(msg: str) -> None:
    """Progress line for the CLI."""
    print(msg, flush=True)


def texts(corpus_pairs: list[tuple[str, str]], pair: str) -> tuple[list[str], list[str]]:
    """Return (sources, targets) of English-German pairs for a direction."""
    en = [e for e, _ in corpus_pairs]
    de = [d for _, d in corpus_pairs]
    return (en, de) if pair == "en-de" else (de, en)


def spm_for(corpus: Corpus, vocab_size: int) -> bytes:
    """Train the shared English+German SentencePiece model on the training side."""
    lines = [e for e, _ in corpus.train] + [d for _, d in corpus.train]
    return train_spm(lines, vocab_size)


def build_pair(
    pair: str, out: Path, corpus: Corpus, spm_bytes: bytes, scale: Scale, work: Path
) -> dict:
    """Train one direction, write the int8 model to out and return its report."""
    import torch

    from training import nmt

    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    sp = spm.SentencePieceProcessor(model_proto=spm_bytes)
    vocab = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    src, tgt = texts(corpus.train, pair)
    data = list(zip(sp.encode(src), sp.encode(tgt), strict=False))
    cfg = nmt.ModelConfig(
        vocab=len(vocab),
        d_model=scale.d_model,
        heads=scale.heads,
        ffn=scale.ffn,
        enc_layers=scale.layers,
        dec_layers=scale.layers,
    )
    model = nmt.Transformer(cfg)
    tcfg = nmt.TrainConfig(
        steps=scale.steps, max_tokens=scale.max_tokens, max_minutes=scale.max_minutes, seed=SEED
    )
    log(
        f"[{pair}] training {sum(p.numel() for p in model.parameters())} parameters "
        f"on {len(data)} pairs"
    )
    summary = nmt.train(model, data, tcfg, log=lambda m: log(f"[{pair}] {m}"))
    work.mkdir(parents=True, exist_ok=True)
    torch.save({"config": nmt.config_dict(cfg), "state": model.state_dict()}, work / "model.pt")
    (work / "spm.model").write_bytes(spm_bytes)
    write_model_dir(model, vocab, spm_bytes, out)
    report = {"pair": pair, "train": summary}
    report["check"] = check_dirs(model, vocab, sp, corpus, pair, out, work, scale.check_pairs)
    return report


def write_model_dir(model, vocab: list[str], spm_bytes: bytes, out: Path) -> None:
    """Write the int8 CTranslate2 model and source/target SentencePiece models to out."""
    from training import convert

    convert.save(model, vocab, out, quantization="int8")
    for name in ("source.spm", "target.spm"):
        (out / name).write_bytes(spm_bytes)


def check_dirs(
    model, vocab, sp, corpus: Corpus, pair: str, out: Path, work: Path, n: int
) -> list[dict]:
    """Compare float32 and int8 CTranslate2 conversions with PyTorch on held-out pairs."""
    from training import convert

    f32 = convert.save(model, vocab, work / "ct2-float32", quantization=None)
    src, tgt = texts(corpus.test[:n], pair)
    pairs = list(zip(sp.encode(src), sp.encode(tgt), strict=False))
    eos = sp.piece_to_id("</s>")
    pairs_eos = [(s + [eos], t) for s, t in pairs]
    results = []
    for d, ctype in ((f32, "float32"), (out, "int8")):
        for label, ps in (("no source </s>", pairs), ("source </s>", pairs_eos)):
            r = convert.check(model, d, vocab, ps, ctype)
            r["source"] = label
            log(f"[{pair}] check {json.dumps(r)}")
            results.append(r)
    return results


def load_torch(work: Path):
    """Load the PyTorch checkpoint saved by a build."""
    import torch

    from training import nmt

    ckpt = torch.load(work / "model.pt", map_location="cpu")
    model = nmt.Transformer(nmt.ModelConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["state"])
    return model


def translate(model_dir: Path, sources: list[str], add_eos: bool = True) -> list[str]:
    """Translate sentences with a model directory in the OPUS-MT layout (greedy)."""
    sp_src = spm.SentencePieceProcessor(model_file=str(model_dir / "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=str(model_dir / "target.spm"))
    tr = ctranslate2.Translator(str(model_dir), device="cpu", intra_threads=2)
    tokens = [t + (["</s>"] if add_eos else []) for t in sp_src.encode(sources, out_type=str)]
    results = tr.translate_batch(tokens, beam_size=1, max_batch_size=64)
    return [sp_tgt.decode(r.hypotheses[0]) for r in results]


def evaluate(pair: str, model_dir: Path, test: list[tuple[str, str]]) -> dict:
    """Exact match, chrF and BLEU of model_dir on held-out pairs."""
    import sacrebleu

    src, ref = texts(test, pair)
    report = {"pair": pair, "sentences": len(src)}
    for add_eos in (True, False):
        t0 = time.time()
        hyp = translate(model_dir, src, add_eos)
        key = "source </s>" if add_eos else "no source </s>"
        report[key] = {
            "exact_match": sum(h == r for h, r in zip(hyp, ref, strict=False)) / len(ref),
            "chrF": round(sacrebleu.corpus_chrf(hyp, [ref]).score, 2),
            "BLEU": round(sacrebleu.corpus_bleu(hyp, [ref]).score, 2),
            "seconds": round(time.time() - t0, 2),
        }
        if add_eos:
            report["examples"] = [(s, h, r) for s, h, r in zip(src, hyp, ref, strict=False)][:10]
            report["errors"] = [
                (s, h, r) for s, h, r in zip(src, hyp, ref, strict=False) if h != r
            ][:20]
    return report


def size_mb(d: Path) -> float:
    """Total size of a directory's files in MB."""
    return round(sum(f.stat().st_size for f in d.iterdir() if f.is_file()) / 1e6, 2)


def cmd_build(args) -> None:
    """Build one pair or both."""
    scale = TINY if args.tiny else FULL
    if args.steps:
        scale = Scale(**{**scale.__dict__, "steps": args.steps})
    if args.minutes:
        scale = Scale(**{**scale.__dict__, "max_minutes": args.minutes})
    pairs = PAIRS if args.all else (args.pair,)
    t0 = time.time()
    corpus = build_corpus(scale.n_train, scale.n_test, SEED)
    spm_bytes = spm_for(corpus, scale.vocab)
    log(
        f"corpus {len(corpus.train)} train / {len(corpus.test)} test, spm ready "
        f"({time.time() - t0:.0f}s)"
    )
    for pair in pairs:
        out = Path(args.out) if args.out and not args.all else Path("models") / pair
        work = Path(args.work or CACHE) / pair
        t1 = time.time()
        report = build_pair(pair, out, corpus, spm_bytes, scale, work)
        report["evaluation"] = evaluate(pair, out, corpus.test)
        report["size_mb"] = size_mb(out)
        report["seconds"] = round(time.time() - t1, 1)
        (work / "report.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
        ev = report["evaluation"]["source </s>"]
        log(
            f"[{pair}] exact {ev['exact_match']:.4f} chrF {ev['chrF']} BLEU {ev['BLEU']} "
            f"size {report['size_mb']} MB, {report['seconds']}s"
        )
    log(f"total {time.time() - t0:.0f}s")


def cmd_evaluate(args) -> None:
    """Evaluate a committed model on the held-out set."""
    corpus = build_corpus(FULL.n_train, FULL.n_test, SEED)
    out = Path(args.out or Path("models") / args.pair)
    report = evaluate(args.pair, out, corpus.test)
    print(json.dumps(report, indent=1, ensure_ascii=False))


def cmd_check(args) -> None:
    """Re-run the CTranslate2-vs-PyTorch check from a build's saved checkpoint."""
    work = Path(args.work or CACHE) / args.pair
    model = load_torch(work)
    spm_bytes = (work / "spm.model").read_bytes()
    sp = spm.SentencePieceProcessor(model_proto=spm_bytes)
    vocab = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    corpus = build_corpus(FULL.n_train, FULL.n_test, SEED)
    out = Path(args.out or Path("models") / args.pair)
    results = check_dirs(model, vocab, sp, corpus, args.pair, out, work, FULL.check_pairs)
    print(json.dumps(results, indent=1))


def cmd_bench(args) -> None:
    """Build the Transformer-base sized random benchmark model and time it."""
    from training.random_model import build_base

    t0 = time.time()
    path = build_base(args.out or ".cache/models/bench-xx-yy", corpus_lines=args.corpus_lines)
    print(f"{path} built in {time.time() - t0:.1f}s, {size_mb(Path(path))} MB")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", nargs="?", default="build", choices=["build", "evaluate", "check", "bench-model"]
    )
    parser.add_argument("--pair", choices=PAIRS, default="en-de")
    parser.add_argument("--all", action="store_true", help="build both pairs")
    parser.add_argument("--out", help="model directory (default models/<pair>)")
    parser.add_argument("--work", help=f"checkpoints and reports (default {CACHE})")
    parser.add_argument("--tiny", action="store_true", help="a few hundred sentences, seconds")
    parser.add_argument("--steps", type=int, help="override training steps")
    parser.add_argument("--minutes", type=float, help="override the per-pair time cap")
    parser.add_argument(
        "--corpus-lines",
        type=int,
        default=60000,
        help="pseudo-corpus lines for the bench model's SentencePiece",
    )
    args = parser.parse_args(argv)
    {"build": cmd_build, "evaluate": cmd_evaluate, "check": cmd_check, "bench-model": cmd_bench}[
        args.command
    ](args)


if __name__ == "__main__":
    main()
