"""One multilingual model, two target languages: one mixed batch, or a batch per target?

    python -m bench.mixed_targets                      # d512 6+6 M2M100 (NLLB's shape), CPU
    python -m bench.mixed_targets --device cuda --rows 256 --repeats 20

A random-weight M2M100 of NLLB-600M's layer shape (d_model 1024 is NLLB's; `--d-model`)
built with transformers and converted with CTranslate2's converter. Each repeat
translates the same sources to two targets both ways, interleaved: one translate_batch of
2 x rows with a target prefix per row (what Stapel's batcher does: pieces of any pair of
the model share its batches), and two calls of `rows`, one per target. Outputs are
forced to `--length` tokens (min = max decoding length) so both ways do the same work.
Prints the median seconds of each way and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def build(out: Path, d_model: int, layers: int) -> Path:
    """Build and convert the random model (tests.families' recipe, larger)."""
    import torch
    from ctranslate2.converters import TransformersConverter
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    from tests.families import train_spm

    hf = out / "hf"
    hf.mkdir(parents=True)
    train_spm(hf / "sentencepiece.bpe.model", vocab_size=80)
    tok = NllbTokenizer(vocab_file=str(hf / "sentencepiece.bpe.model"))
    torch.manual_seed(0)
    config = M2M100Config(
        vocab_size=len(tok),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=max(d_model // 64, 1),
        decoder_attention_heads=max(d_model // 64, 1),
        encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model,
        max_position_embeddings=1024,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.eos_token_id,
    )
    M2M100ForConditionalGeneration(config).save_pretrained(hf)
    tok.save_pretrained(hf)
    files = ["sentencepiece.bpe.model", "tokenizer_config.json", "special_tokens_map.json"]
    return Path(TransformersConverter(str(hf), copy_files=files).convert(str(out / "ct2")))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compute-type", default="default")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--rows", type=int, default=32, help="sources per target")
    parser.add_argument("--length", type=int, default=24, help="output tokens per row")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)

    import ctranslate2
    import sentencepiece as spm

    from tests.families import SENTENCES

    with tempfile.TemporaryDirectory() as tmp:
        model = build(Path(tmp), args.d_model, args.layers)
        sp = spm.SentencePieceProcessor(model_file=str(model / "sentencepiece.bpe.model"))
        translator = ctranslate2.Translator(
            str(model), device=args.device, compute_type=args.compute_type
        )
        texts = [SENTENCES[i % len(SENTENCES)] for i in range(args.rows)]
        source = [["deu_Latn", *p, "</s>"] for p in sp.encode(texts, out_type=str)]
        options = {
            "beam_size": 1,
            "max_decoding_length": args.length + 1,
            "min_decoding_length": args.length + 1,
        }
        targets = ["fra_Latn", "eng_Latn"]

        def mixed() -> None:
            prefixes = [[t] for t in targets for _ in source]
            translator.translate_batch(source * 2, target_prefix=prefixes, **options)

        def grouped() -> None:
            for target in targets:
                translator.translate_batch(
                    source, target_prefix=[[target]] * len(source), **options
                )

        mixed(), grouped()  # warm up
        times: dict[str, list[float]] = {"mixed": [], "grouped": []}
        for _ in range(args.repeats):
            for name, run in (("mixed", mixed), ("grouped", grouped)):
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"device={args.device} d_model={args.d_model} layers={args.layers} "
        f"rows_per_target={args.rows} length={args.length} repeats={args.repeats}"
    )
    for name, value in medians.items():
        print(
            f"{name:8s} median {value * 1000:.1f} ms  (all: "
            + ", ".join(f"{v * 1000:.0f}" for v in times[name])
            + ")"
        )
    print(f"grouped / mixed = {medians['grouped'] / medians['mixed']:.2f}")


if __name__ == "__main__":
    main()
