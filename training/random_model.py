"""Build a CTranslate2 Transformer with random weights and matching SentencePiece models.

Tests use a tiny one; benchmarks use a Transformer-base sized one. The words it writes
mean nothing, but its outputs are deterministic and its cost is that of a real model
of the same shape.

    python -m training.random_model OUT_DIR --layers 6 --d-model 512 --heads 8 \
        --ffn 2048 --vocab 32000
"""

from __future__ import annotations

import argparse
import io
import math
import random
from pathlib import Path

import ctranslate2
import numpy as np
import sentencepiece as spm

CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"


def pseudo_corpus(n_lines: int, seed: int) -> list[str]:
    """Return lines of pronounceable nonsense words, seeded."""
    rng = random.Random(seed)
    syllables = [c + v for c in CONSONANTS for v in VOWELS] + [
        c + v + c2 for c in CONSONANTS for v in VOWELS for c2 in "nrst"
    ]
    lines = []
    for _ in range(n_lines):
        words = [
            "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
            for _ in range(rng.randint(4, 16))
        ]
        lines.append(" ".join(words).capitalize() + rng.choice(".?!"))
    return lines


def train_spm(lines: list[str], vocab_size: int) -> bytes:
    """Train a BPE SentencePiece model on lines and return its serialized bytes."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        hard_vocab_limit=False,
        num_threads=2,
        minloglevel=2,
    )
    return out.getvalue()


def sinusoids(length: int, depth: int) -> np.ndarray:
    """Return the standard sinusoidal position table, positions from 0."""
    half = depth // 2
    scale = math.log(10000.0) / (half - 1)
    inv = np.exp(np.arange(half, dtype=np.float32) * -scale)
    pos = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(pos), np.cos(pos)], axis=1).astype(np.float32)


def random_spec(
    vocab: list[str], layers: int, d_model: int, heads: int, ffn: int, seed: int
) -> ctranslate2.specs.TransformerSpec:
    """Return a TransformerSpec with every weight drawn at random."""
    rng = np.random.default_rng(seed)
    v = len(vocab)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)

    def norm(spec) -> None:
        spec.gamma = np.ones(d_model, dtype=np.float32)
        spec.beta = np.zeros(d_model, dtype=np.float32)

    def linear(spec, out: int, inp: int) -> None:
        spec.weight = w(out, inp)
        spec.bias = np.zeros(out, dtype=np.float32)

    def ffn_block(spec) -> None:
        norm(spec.layer_norm)
        linear(spec.linear_0, ffn, d_model)
        linear(spec.linear_1, d_model, ffn)

    spec = ctranslate2.specs.TransformerSpec.from_config((layers, layers), heads)
    spec.config.layer_norm_epsilon = 1e-6
    table = sinusoids(1024, d_model)
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = w(v, d_model)
    dec.embeddings.weight = w(v, d_model)
    enc.position_encodings.encodings = table
    dec.position_encodings.encodings = table
    norm(enc.layer_norm)
    norm(dec.layer_norm)
    linear(dec.projection, v, d_model)
    for layer in enc.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d_model, d_model)
        linear(layer.self_attention.linear[1], d_model, d_model)
        ffn_block(layer.ffn)
    for layer in dec.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * d_model, d_model)
        linear(layer.self_attention.linear[1], d_model, d_model)
        norm(layer.attention.layer_norm)
        linear(layer.attention.linear[0], d_model, d_model)
        linear(layer.attention.linear[1], 2 * d_model, d_model)
        linear(layer.attention.linear[2], d_model, d_model)
        ffn_block(layer.ffn)
    spec.register_source_vocabulary(vocab)
    spec.register_target_vocabulary(vocab)
    return spec


def build(
    out_dir: str | Path,
    *,
    layers: int = 2,
    d_model: int = 64,
    heads: int = 4,
    ffn: int = 128,
    vocab_size: int = 300,
    corpus_lines: int = 2000,
    quantization: str | None = None,
    seed: int = 0,
) -> Path:
    """Write a random-weight model directory in the OPUS-MT layout and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_bytes = train_spm(pseudo_corpus(corpus_lines, seed), vocab_size)
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    vocab = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    spec = random_spec(vocab, layers, d_model, heads, ffn, seed)
    spec.validate()
    spec.optimize(quantization=quantization)
    spec.save(str(out))
    for name in ("source.spm", "target.spm"):
        (out / name).write_bytes(model_bytes)
    return out


TRANSFORMER_BASE = {
    "layers": 6,
    "d_model": 512,
    "heads": 8,
    "ffn": 2048,
    "vocab_size": 32000,
    "quantization": "int8",
}
"""The size real MT systems serve; benchmarks use it with fixed decoding lengths."""


def build_base(out_dir: str | Path, corpus_lines: int = 60_000, seed: int = 0) -> Path:
    """Write a Transformer-base sized random model with a 32k SentencePiece vocabulary."""
    return build(out_dir, corpus_lines=corpus_lines, seed=seed, **TRANSFORMER_BASE)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=300)
    parser.add_argument("--corpus-lines", type=int, default=2000)
    parser.add_argument("--quantization", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = build(
        args.out_dir,
        layers=args.layers,
        d_model=args.d_model,
        heads=args.heads,
        ffn=args.ffn,
        vocab_size=args.vocab,
        corpus_lines=args.corpus_lines,
        quantization=args.quantization,
        seed=args.seed,
    )
    print(path)


if __name__ == "__main__":
    main()
