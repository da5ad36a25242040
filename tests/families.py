"""Tiny random-weight models of real multilingual families, and their reference outputs.

Each is built with `transformers` from a SentencePiece model trained on a few sentences,
saved as Hugging Face would ship it, and converted with CTranslate2's own converter
(`--copy_files` the tokenizer files), as docs/models.md tells users to. The reference is
the family's own call: Hugging Face `generate` with its language tokens, greedy.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import sentencepiece as spm

SENTENCES = [
    "the house is small",
    "das Haus ist klein",
    "la maison est petite",
    "a cat sat on the mat",
    "ein Hund lief schnell",
    "un chien court vite",
    "hello world",
    "good morning to you",
]

TOKENIZER_FILES = {
    "nllb": ["sentencepiece.bpe.model", "tokenizer_config.json", "special_tokens_map.json"],
    "m2m100": [
        "sentencepiece.bpe.model",
        "vocab.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    ],
    "madlad": ["spiece.model", "tokenizer_config.json", "special_tokens_map.json"],
    "marian": ["source.spm", "target.spm"],
}
"""What `ct2-transformers-converter --copy_files` copies beside model.bin per family."""

MADLAD_LANGS = ["en", "de", "fr"]


def train_spm(path: Path, symbols: list[str] | None = None, vocab_size: int = 80) -> None:
    """Train a small BPE SentencePiece model on SENTENCES into path."""
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(SENTENCES * 20),
        model_writer=buf,
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        user_defined_symbols=symbols or [],
        minloglevel=2,
    )
    path.write_bytes(buf.getvalue())


def _quiet_language_tokens(model, ids: list[int]) -> None:
    """Shrink the language tokens' embeddings: random weights would otherwise emit them
    at every step, and the outputs would say nothing about the text."""
    import torch

    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[ids] *= 0.05
        if model.get_output_embeddings() is not None:
            out = model.get_output_embeddings().weight
            if out.data_ptr() != emb.data_ptr():
                out[ids] *= 0.05


def build_hf(family: str, hf_dir: Path, seed: int = 0):
    """Save a tiny random model of family with its tokenizer into hf_dir; return both."""
    import torch
    from transformers import (
        M2M100Config,
        M2M100ForConditionalGeneration,
        M2M100Tokenizer,
        NllbTokenizer,
        T5Config,
        T5ForConditionalGeneration,
        T5Tokenizer,
    )

    hf_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if family == "marian":
        return _build_marian(hf_dir)
    if family == "madlad":
        symbols = [f"<2{code}>" for code in MADLAD_LANGS]
        train_spm(hf_dir / "spiece.model", symbols)
        tok = T5Tokenizer(vocab_file=str(hf_dir / "spiece.model"), extra_ids=0, legacy=False)
        config = T5Config(
            vocab_size=len(tok),
            d_model=16,
            d_kv=8,
            d_ff=32,
            num_layers=1,
            num_decoder_layers=1,
            num_heads=2,
            decoder_start_token_id=tok.pad_token_id,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            tie_word_embeddings=False,
            feed_forward_proj="gated-gelu",
        )
        model = T5ForConditionalGeneration(config).eval()
    else:
        train_spm(hf_dir / "sentencepiece.bpe.model")
        if family == "nllb":
            tok = NllbTokenizer(vocab_file=str(hf_dir / "sentencepiece.bpe.model"))
        else:
            sp = spm.SentencePieceProcessor(model_file=str(hf_dir / "sentencepiece.bpe.model"))
            pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
            vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
            for piece in pieces:
                vocab.setdefault(piece, len(vocab))
            (hf_dir / "vocab.json").write_text(json.dumps(vocab))
            tok = M2M100Tokenizer(
                vocab_file=str(hf_dir / "vocab.json"),
                spm_file=str(hf_dir / "sentencepiece.bpe.model"),
                num_madeup_words=0,
            )
            # as the published M2M100 tokenizers list them (the converter reads them)
            tok.add_special_tokens(
                {"additional_special_tokens": list(tok.lang_token_to_id)},
                replace_additional_special_tokens=True,
            )
        langs = list(getattr(tok, "lang_code_to_id", {}).values()) or [
            tok.convert_tokens_to_ids(t) for t in tok.additional_special_tokens
        ]
        config = M2M100Config(
            vocab_size=max([*tok.get_vocab().values(), *langs]) + 1,
            init_std=0.5,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=32,
            decoder_ffn_dim=32,
            max_position_embeddings=64,
            pad_token_id=tok.pad_token_id,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            decoder_start_token_id=tok.eos_token_id,
            scale_embedding=True,
        )
        model = M2M100ForConditionalGeneration(config).eval()
        _quiet_language_tokens(model, langs)
    model.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    return model, tok


def _build_marian(hf_dir: Path):
    """A tiny OPUS-MT (Marian) model: source.spm, target.spm and a shared vocab.json."""
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    train_spm(hf_dir / "source.spm")
    train_spm(hf_dir / "target.spm", vocab_size=60)
    vocab: dict[str, int] = {"</s>": 0, "<unk>": 1}
    for name in ("source.spm", "target.spm"):
        sp = spm.SentencePieceProcessor(model_file=str(hf_dir / name))
        for i in range(sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    (hf_dir / "vocab.json").write_text(json.dumps(vocab))
    tok = MarianTokenizer(
        source_spm=str(hf_dir / "source.spm"),
        target_spm=str(hf_dir / "target.spm"),
        vocab=str(hf_dir / "vocab.json"),
    )
    config = MarianConfig(
        vocab_size=len(vocab),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=vocab["<pad>"],
        eos_token_id=0,
        decoder_start_token_id=vocab["<pad>"],
        init_std=0.5,
    )
    model = MarianMTModel(config).eval()
    model.save_pretrained(hf_dir)
    tok.save_pretrained(hf_dir)
    return model, tok


def convert(family: str, hf_dir: Path, out_dir: Path) -> Path:
    """Convert hf_dir with CTranslate2's converter, copying the tokenizer files."""
    from ctranslate2.converters import TransformersConverter

    copy = [name for name in TOKENIZER_FILES[family] if (hf_dir / name).is_file()]
    TransformersConverter(str(hf_dir), copy_files=copy).convert(str(out_dir), force=True)
    return out_dir


def reference(family: str, model, tok, texts: list[str], src: str, tgt: str, steps: int):
    """Return the family's own greedy translations of texts (Hugging Face generate)."""
    import torch

    with torch.no_grad():
        if family in ("madlad", "marian"):
            given = [f"<2{tgt}> {t}" for t in texts] if family == "madlad" else texts
            enc = tok(given, return_tensors="pt", padding=True)
            # Marian forces </s> as its last token: one step more for as many words
            steps += family == "marian"
            out = model.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=steps)
        else:
            tok.src_lang = src
            enc = tok(texts, return_tensors="pt", padding=True)
            steps += 1  # the forced language token counts among the new tokens
            out = model.generate(
                **enc,
                forced_bos_token_id=tok.convert_tokens_to_ids(
                    tgt if family == "nllb" else f"__{tgt}__"
                ),
                num_beams=1,
                do_sample=False,
                max_new_tokens=steps,
            )
    return [tok.decode(row, skip_special_tokens=True) for row in out]


ARGOS_OPTIONS = {"STAPEL_ARGOS_BEAM_SIZE": "4", "STAPEL_ARGOS_LENGTH_PENALTY": "0.2"}
"""Stapel's settings that decode an Argos package as Argos does."""


def build_argos(package_dir: Path, from_code: str, to_code: str, seed: int = 0) -> Path:
    """Write an installed Argos package (a tiny random model) as Argos lays one out:
    metadata.json, model/, sentencepiece.model, and spacy/, a blank pipeline (Argos adds
    its sentencizer; nothing is downloaded)."""
    import spacy

    from training.random_model import build

    build(package_dir / "model", layers=1, d_model=32, heads=2, ffn=64, seed=seed)
    (package_dir / "model" / "source.spm").rename(package_dir / "sentencepiece.model")
    (package_dir / "model" / "target.spm").unlink()
    metadata = {
        "package_version": "1.0",
        "argos_version": "1.9",
        "from_code": from_code,
        "to_code": to_code,
        "from_name": f"Language {from_code}",
        "to_name": f"Language {to_code}",
    }
    (package_dir / "metadata.json").write_text(json.dumps(metadata))
    spacy.blank("xx").to_disk(package_dir / "spacy")
    return package_dir


def argos_reference(packages: Path, home: Path, texts: list[str], src: str, tgt: str):
    """Return argostranslate's own translations of texts (a subprocess: its settings are
    read from the environment at import), float32 on CPU, sentences split by spaCy."""
    import os
    import subprocess
    import sys

    (home / "cache" / "argos-translate" / "spacy" / "senter" / "model").mkdir(
        parents=True, exist_ok=True
    )
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "ARGOS_PACKAGES_DIR": str(packages),
        "ARGOS_CHUNK_TYPE": "SPACY",
        "ARGOS_COMPUTE_TYPE": "float32",
        "ARGOS_DEVICE_TYPE": "cpu",
    }
    code = (
        "import json, sys\n"
        "from argostranslate import translate\n"
        "texts = json.loads(sys.argv[1])\n"
        "print(json.dumps([translate.translate(t, sys.argv[2], sys.argv[3]) for t in texts]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(texts), src, tgt],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])
