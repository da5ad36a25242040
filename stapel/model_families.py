"""Multilingual model folders: which family a folder is, its languages, how it is called.

A folder under the model root that is not named as a pair is a multilingual model when
it holds a CTranslate2 `model.bin` and a SentencePiece model (what
`ct2-transformers-converter --copy_files ...` writes). Its family decides how each pair
is called (FACTS of each family, checked against Hugging Face `generate`):

| family  | source tokens                      | target prefix | languages from       |
|---------|------------------------------------|---------------|----------------------|
| nllb    | `deu_Latn` + pieces + `</s>`       | `fra_Latn`    | `xxx_Xxxx` tokens    |
| m2m100  | `__de__` + pieces + `</s>`         | `__fr__`      | `__xx__` tokens      |
| madlad  | pieces of `"<2fr> " + text` + `</s>` | none        | `<2xx>` tokens       |

The family comes from tokenizer_config.json's `tokenizer_class`, else from the tokens
the vocabulary holds; an optional `stapel.json` in the folder overrides what cannot be
detected (docs/models.md): `family`, `languages` (public code -> the model's code),
`sentencepiece` (file name) and `max_input_tokens`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from stapel.languages import public_codes

MANIFEST = "stapel.json"

MULTILINGUAL = ("nllb", "m2m100", "madlad")
"""The families whose one model serves many pairs."""

SPM_NAMES = ("sentencepiece.bpe.model", "spiece.model", "sentencepiece.model", "source.spm")
"""SentencePiece files the families ship, in the order they are looked for."""

TOKEN_PATTERNS = {
    "nllb": re.compile(r"^[a-z]{3}_[A-Z][a-z]{3}$"),
    "m2m100": re.compile(r"^__([a-z]{2,3}(?:_[A-Za-z]+)?)__$"),
    "madlad": re.compile(r"^<2([a-z]{2,3}(?:[_-][A-Za-z]+)?)>$"),
}
"""How a language token of each family looks in the vocabulary."""

TOKENIZER_CLASSES = {
    "nllbtokenizer": "nllb",
    "nllbtokenizerfast": "nllb",
    "m2m100tokenizer": "m2m100",
    "t5tokenizer": "madlad",
    "t5tokenizerfast": "madlad",
}


class FamilyError(ValueError):
    """A folder looks like a model but cannot be served (the reason is the message)."""


@dataclass(frozen=True)
class Multilingual:
    """A multilingual model folder: its family, SentencePiece file and languages."""

    path: Path
    family: str
    spm: str
    languages: dict[str, str] = field(default_factory=dict)
    """Public code -> the model's own language token."""
    max_input_tokens: int | None = None


def read_json_object(path: Path) -> dict:
    """Return the JSON object in path, or {} when it is missing, unreadable or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def vocabulary(path: Path) -> list[str]:
    """Return the model's target vocabulary as CTranslate2 stored it (json or txt)."""
    for name in ("shared_vocabulary", "target_vocabulary"):
        if (path / f"{name}.json").is_file():
            data = json.loads((path / f"{name}.json").read_text())
            return [str(token) for token in data]
        if (path / f"{name}.txt").is_file():
            return (path / f"{name}.txt").read_text().splitlines()
    return []


def _family(path: Path, manifest: dict, vocab: list[str]) -> str:
    if isinstance(manifest.get("family"), str):
        return manifest["family"]
    tokenizer = str(
        read_json_object(path / "tokenizer_config.json").get("tokenizer_class") or ""
    ).lower()
    if tokenizer in TOKENIZER_CLASSES:
        return TOKENIZER_CLASSES[tokenizer]
    counts = {
        family: sum(bool(pattern.match(t)) for t in vocab)
        for family, pattern in TOKEN_PATTERNS.items()
    }
    best = max(counts, key=lambda f: counts[f])
    if counts[best] < 2:
        raise FamilyError("no tokenizer_config.json and no language tokens in the vocabulary")
    return best


def _languages(family: str, manifest: dict, vocab: list[str]) -> dict[str, str]:
    given = manifest.get("languages")
    if isinstance(given, dict) and given:
        return {str(k): str(v) for k, v in given.items()}
    pattern = TOKEN_PATTERNS.get(family)
    if pattern is None:
        raise FamilyError(f"unknown family {family!r} (nllb, m2m100 or madlad)")
    natives = [token for token in vocab if pattern.match(token)]
    if not natives:
        raise FamilyError(f"no {family} language tokens in the vocabulary")
    keyed = {t: (pattern.match(t).group(1) if pattern.groups else t) for t in natives}  # type: ignore[union-attr]
    codes = public_codes(keyed.values())
    return {codes[short]: token for token, short in keyed.items()}


_detected: dict[Path, tuple[tuple, Multilingual | FamilyError]] = {}


def _signature(path: Path) -> tuple:
    """The folder's files with their sizes and mtimes: a change to any means look again."""
    return tuple(
        sorted((p.name, st.st_size, st.st_mtime_ns) for p in path.iterdir() if (st := p.stat()))
    )


def detect(path: Path) -> Multilingual:
    """Return what the folder is, or raise FamilyError saying why it cannot be served.

    Remembered while the folder's files are unchanged: reading an NLLB vocabulary
    (256,000 tokens) on every scan of the model root cost a web process ~0.2 s.
    """
    signature = _signature(path)
    cached = _detected.get(path)
    if cached is None or cached[0] != signature:
        try:
            cached = (signature, _detect(path))
        except FamilyError as exc:
            cached = (signature, exc)
        _detected[path] = cached
    if isinstance(cached[1], FamilyError):
        raise cached[1]
    return cached[1]


def _detect(path: Path) -> Multilingual:
    manifest = read_json_object(path / MANIFEST)
    if not (path / "model.bin").is_file():
        raise FamilyError("no model.bin")
    names = [manifest["sentencepiece"]] if isinstance(manifest.get("sentencepiece"), str) else []
    spm = next((n for n in [*names, *SPM_NAMES] if (path / n).is_file()), None)
    if spm is None:
        raise FamilyError(
            "no SentencePiece model (convert with --copy_files sentencepiece.bpe.model "
            "or spiece.model)"
        )
    vocab = vocabulary(path)
    family = _family(path, manifest, vocab)
    limit = manifest.get("max_input_tokens")
    return Multilingual(
        path,
        family,
        spm,
        _languages(family, manifest, vocab),
        limit if isinstance(limit, int) and limit > 0 else None,
    )
