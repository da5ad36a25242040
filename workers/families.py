"""How one language pair of a model is fed and read back (its codec).

A pair directory's codec is SentencePiece pieces + `</s>` in, the target model's decode
out. A multilingual model's pairs share its translator and batcher, each with its own
codec (stapel.model_families has the table): NLLB and M2M100 put the source language
token first and give the target language token as the target prefix, which is cut from
the hypothesis; MADLAD writes `<2xx> ` before the text. Tokens the family's tokenizer
treats as special (language tokens, `<unk>`, ...) are dropped from outputs, as Hugging
Face's `decode(skip_special_tokens=True)` drops them. A `▁` left by a piece the target
SentencePiece model lacks becomes a space, as MarianTokenizer and Argos do.

The cache and in-flight dedup key each pair apart: a multilingual model's pairs get
fingerprints of their own (pair_fingerprint), and a piece's key holds its target prefix
(Codec.keyed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sentencepiece as spm

from stapel import mtcache
from stapel.model_dirs import ModelDir
from stapel.model_families import read_json_object
from stapel.mtcache import fingerprint

SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token", "mask_token")
DEFAULT_SPECIALS = frozenset({"<s>", "</s>", "<pad>", "<unk>", "<mask>"})


ONE_BY_ONE = 8
"""Lists up to this long are encoded and decoded a text at a time, longer ones in one
call on one thread (`num_threads=1`, given with each call: the processor's own setting
did not reach every list call). A list call costs a fixed 20-200 us however short the
list (one short sentence: 4 us alone, on 2 cores), which a chunk of one segment paid
per job."""


@dataclass(frozen=True)
class Codec:
    """Encodes a pair's sources into model tokens and decodes hypotheses into text."""

    source: spm.SentencePieceProcessor
    target: spm.SentencePieceProcessor
    suffix: tuple[str, ...] = ()
    lang: str = "en"
    """The source language, for sentence splitting."""
    head: tuple[str, ...] = ()
    """Tokens before the pieces (the source language token)."""
    text_prefix: str = ""
    """Text written before the source before encoding (MADLAD's `<2xx> `)."""
    prefix: tuple[str, ...] = ()
    """The target prefix (the target language token), cut from each hypothesis."""
    specials: frozenset[str] = field(default_factory=frozenset)
    """Tokens dropped from hypotheses before decoding."""
    argos: bool = False
    """Decode as Argos does: `▁` and `_` made spaces, one leading space dropped."""

    def encode(self, texts: list[str]) -> list[list[str]]:
        """Return the model tokens of each text."""
        given = [self.text_prefix + t for t in texts] if self.text_prefix else texts
        if len(given) <= ONE_BY_ONE:
            pieces = [self.source.encode(text, out_type=str) for text in given]
        else:
            pieces = self.source.encode(given, out_type=str, num_threads=1)
        return [[*self.head, *p, *self.suffix] for p in pieces]

    def keyed(self, tokens: list[str]) -> list[str]:
        """Return what a piece's cache and dedup key hashes: its tokens, after its target
        prefix when it has one (one source, two targets: two keys)."""
        return [*self.prefix, "\x1e", *tokens] if self.prefix else tokens

    def strip(self, hypothesis: list[str]) -> list[str]:
        """Return the hypothesis without its target prefix and special tokens."""
        cut = len(self.prefix)
        if cut and tuple(hypothesis[:cut]) == self.prefix:
            hypothesis = hypothesis[cut:]
        if self.specials:
            hypothesis = [t for t in hypothesis if t not in self.specials]
        return hypothesis

    def decode(self, hypotheses: list[list[str]]) -> list[str]:
        """Return the texts of hypotheses (prefix and specials gone, never a `▁`)."""
        stripped = [self.strip(h) for h in hypotheses]
        if len(stripped) <= ONE_BY_ONE:
            texts = [self.target.decode(pieces) for pieces in stripped]
        else:
            texts = self.target.decode(stripped, num_threads=1)
        if self.argos:
            texts = [t.replace("\u2581", " ").replace("_", " ") for t in texts]
            return [t[1:] if t.startswith(" ") else t for t in texts]
        return [t.replace("\u2581", " ").strip() if "\u2581" in t else t for t in texts]


def decode_items(items: Sequence[Any], hypotheses: list[list[str]], default: Codec) -> list[str]:
    """Decode each item's hypothesis with its own codec, one decode call per codec."""
    out: list[str] = [""] * len(items)
    groups: dict[int, tuple[Codec, list[int]]] = {}
    for n, item in enumerate(items):
        codec = item.codec or default
        groups.setdefault(id(codec), (codec, []))[1].append(n)
    for codec, indexes in groups.values():
        for n, text in zip(indexes, codec.decode([hypotheses[n] for n in indexes]), strict=True):
            out[n] = text
    return out


def target_prefixes(items: Sequence[Any]) -> dict[str, list[list[str]]]:
    """Return translate_batch's `target_prefix` argument for items (none if none has one)."""
    prefixes = [list(item.codec.prefix) if item.codec else [] for item in items]
    return {"target_prefix": prefixes} if any(prefixes) else {}


def _token(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def specials(path: Path, languages: list[str]) -> frozenset[str]:
    """Return the tokens a model's tokenizer skips on decode: its named special tokens,
    its additional ones and the language tokens (tokenizer files where present)."""
    found = set(DEFAULT_SPECIALS) | set(languages)
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        data = read_json_object(path / name)
        for key in SPECIAL_NAMES:
            if (token := _token(data.get(key))) is not None:
                found.add(token)
        for key in ("additional_special_tokens", "extra_special_tokens"):
            extra = data.get(key)
            if isinstance(extra, list):
                found.update(t for t in map(_token, extra) if t)
    return frozenset(found)


def codec(
    found: ModelDir,
    source: spm.SentencePieceProcessor,
    target: spm.SentencePieceProcessor,
    suffix: tuple[str, ...],
    languages: list[str],
) -> Codec:
    """Return the codec of one pair of a model (languages: all its language tokens)."""
    if found.family == "pair":
        return Codec(source, target, suffix, found.source)
    if found.family == "argos":  # pieces only, its target prefix if it has one
        prefix = (found.target_token,) if found.target_token else ()
        return Codec(source, target, (), found.source, prefix=prefix, argos=True)
    skip = specials(found.path, languages)
    if found.family == "madlad":
        return Codec(
            source,
            target,
            suffix,
            found.source,
            text_prefix=f"{found.target_token} ",
            specials=skip - set(languages),
        )
    return Codec(
        source,
        target,
        suffix,
        found.source,
        head=(found.source_token,),
        prefix=(found.target_token,),
        specials=skip,
    )


def model_fingerprint(found: ModelDir, options: dict) -> str:
    """The model's fingerprint; an Argos package's covers its metadata and tokenizer too."""
    if found.family != "argos":
        return fingerprint(found.path, options)
    return fingerprint(found.model_path, {**options, "package": fingerprint(found.path, {})})


def pair_fingerprint(model_fp: str, found: ModelDir) -> str:
    """Return what keys a pair's cache entries: a pair directory's model fingerprint, or
    for a multilingual model its fingerprint with the two languages (one model, many
    targets: one target's translation must never answer another)."""
    if found.family == "pair":
        return model_fp
    return mtcache.pair_fingerprint(model_fp, found.source, found.target)
