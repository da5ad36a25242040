"""The model root: pair directories and multilingual model folders, side by side.

    STAPEL_MODEL_ROOT/
      en-de/
        model.bin            CTranslate2 model (config.json, *_vocabulary.* beside it)
        source.spm           SentencePiece model for the source language
        target.spm           SentencePiece model for the target language
      nllb-200-distilled-600M/   any other name: a multilingual model
        model.bin, sentencepiece.bpe.model, tokenizer_config.json, ...

      translate-de_en-1_9/       an Argos package (stapel.argos), or a .argosmodel file

A multilingual folder serves every ordered pair of its languages
(stapel.model_families); a pair directory, then an Argos package, wins over a
multilingual model for its pair. The web side reads it for /v1/languages and
validation; workers load from it. Input limits: stapel.model_bin.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from stapel import argos
from stapel.languages import name
from stapel.model_bin import (
    ModelFileError,
    position_tables,
)
from stapel.model_families import FamilyError, Multilingual, detect

log = logging.getLogger(__name__)

PAIR_RE = re.compile(r"^([a-z]{2,3}(?:_[A-Za-z]{2,4})?)-([a-z]{2,3}(?:_[A-Za-z]{2,4})?)$")
"""A pair directory name: ISO 639 codes, optionally with a script/region (`zh_Hans`)."""

REQUIRED_FILES = ("model.bin", "source.spm", "target.spm")


@dataclass(frozen=True)
class ModelDir:
    """One usable language pair on disk: the model folder that serves it, and how."""

    source: str
    target: str
    path: Path
    family: str = "pair"
    """`pair` (a pair directory), `argos`, a multilingual family (stapel.model_families)
    or `pivot` (two models, through `via`)."""
    source_token: str = ""
    target_token: str = ""
    """The model's own codes of the two languages (multilingual families)."""
    spm: str = ""
    """The multilingual model's SentencePiece file (pair directories: source/target.spm)."""
    max_input_tokens: int | None = None
    via: str = ""
    """The pivot language of a pair no model serves directly (stapel.pivot)."""
    source_name: str = ""
    target_name: str = ""
    """Names the model's metadata gives its languages (empty: the standard table's)."""

    @property
    def pair(self) -> str:
        return f"{self.source}-{self.target}"

    @property
    def model_path(self) -> Path:
        """The CTranslate2 model's folder (an Argos package keeps it in `model/`)."""
        return self.path / "model" if self.family == "argos" else self.path

    @property
    def model(self) -> str:
        """The model's key: one loaded translator per key, whatever its pairs."""
        return self.pair if self.family == "pair" else self.path.name


def scan(root: Path) -> dict[str, ModelDir]:
    """Return the usable pairs under root, keyed by `src-tgt`; incomplete dirs are skipped."""
    found: dict[str, ModelDir] = {}
    for entry, match in _pair_dirs(root):
        if all((entry / name).is_file() for name in REQUIRED_FILES):
            found[entry.name] = ModelDir(match.group(1), match.group(2), entry)
    for package in packages(root).values():
        found.setdefault(f"{package.source}-{package.target}", _package_route(package))
    for model in multilingual(root).values():
        for pair, served in _routes(model).items():
            found.setdefault(pair, served)
    return found


def packages(root: Path) -> dict[str, argos.Package]:
    """Return the servable Argos packages under root, by folder or archive name."""
    found: dict[str, argos.Package] = {}
    for entry in argos.candidates(root):
        try:
            found[entry.name] = argos.load(entry)
        except argos.PackageError:
            continue
    return found


def _package_route(package: argos.Package) -> ModelDir:
    return ModelDir(
        package.source,
        package.target,
        package.path,
        "argos",
        target_token=package.target_prefix,
        spm="sentencepiece.model",
        max_input_tokens=argos.MAX_INPUT_TOKENS,
        source_name=package.source_name,
        target_name=package.target_name,
    )


def language_names(pairs: dict[str, ModelDir]) -> dict[str, str]:
    """Return code -> English name of every language the pairs make (metadata first)."""
    names: dict[str, str] = {}
    for found in pairs.values():
        for code, given in ((found.source, found.source_name), (found.target, found.target_name)):
            if given or code not in names:
                names[code] = given or name(code)
    return names


def multilingual(root: Path) -> dict[str, Multilingual]:
    """Return the servable multilingual folders under root, by folder name."""
    found: dict[str, Multilingual] = {}
    for entry in _other_dirs(root):
        try:
            found[entry.name] = detect(entry)
        except (FamilyError, OSError, ValueError):
            continue
    return found


_made_routes: dict[Path, tuple[Multilingual, dict[str, ModelDir]]] = {}


def _routes(model: Multilingual) -> dict[str, ModelDir]:
    """Every ordered pair of the model's languages (made again only when detection
    found the folder changed: NLLB-200 has 40,602)."""
    cached = _made_routes.get(model.path)
    if cached is None or cached[0] is not model:
        cached = (model, _make_routes(model))
        _made_routes[model.path] = cached
    return cached[1]


def _make_routes(model: Multilingual) -> dict[str, ModelDir]:
    return {
        f"{src}-{tgt}": ModelDir(
            src,
            tgt,
            model.path,
            model.family,
            src_token,
            tgt_token,
            model.spm,
            model.max_input_tokens,
        )
        for src, src_token in model.languages.items()
        for tgt, tgt_token in model.languages.items()
        if src != tgt
    }


def _other_dirs(root: Path) -> list[Path]:
    """Folders under root not named as a pair that hold a model.bin."""
    if not root.is_dir():
        return []
    return [
        entry
        for entry in sorted(root.iterdir())
        if not PAIR_RE.match(entry.name) and (entry / "model.bin").is_file()
    ]


SCAN_CACHE_S = 5.0
"""How long a process trusts its scan of the model root before looking again."""
ROOT_LOOK_S = 0.05
"""How long it trusts the root's mtime: a worker asks for its pairs several times per
chunk, and a stat for each was a twentieth of a one-segment job's Python time."""

_scans: dict[Path, tuple[float, float, dict[str, ModelDir]]] = {}
_scans_lock = threading.Lock()
_looked: dict[Path, float] = {}
"""When each root's mtime was last read."""


def served_pairs(root: Path) -> dict[str, ModelDir]:
    """Return scan(root), scanned again when the root changed or SCAN_CACHE_S passed.

    A pair directory added or removed changes the root's mtime and is seen within
    ROOT_LOOK_S; a model whose files change in place is seen within SCAN_CACHE_S.
    """
    cached = _scans.get(root)
    now = time.monotonic()
    looked = _looked.get(root)
    if cached is not None and looked is not None and now - looked < ROOT_LOOK_S:
        return cached[2]
    try:
        mtime = root.stat().st_mtime
    except OSError:
        mtime = -1.0
    _looked[root] = now
    if cached is not None and cached[0] == mtime and now - cached[1] < SCAN_CACHE_S:
        return cached[2]
    found = scan(root)
    with _scans_lock:
        _scans[root] = (mtime, now, found)
    _log_problems(root)
    return found


_logged: set[tuple[str, str]] = set()


def _log_problems(root: Path) -> None:
    """Log each model folder that cannot be served, once per reason (not every scan)."""
    for entry, reason in {**problems(root), **unrecognised(root)}.items():
        if (entry, reason) not in _logged:
            _logged.add((entry, reason))
            log.warning("model not served entry=%s reason=%s", entry, reason)


def models(root: Path) -> list[dict]:
    """Return each model under root: its key, family, folder, pairs served and languages."""
    by_key: dict[str, dict] = {}
    for found in scan(root).values():
        entry = by_key.setdefault(
            found.model,
            {"model": found.model, "family": found.family, "path": str(found.path), "pairs": 0},
        )
        entry["pairs"] += 1
        entry.setdefault("languages", set()).update((found.source, found.target))
    return [{**e, "languages": sorted(e["languages"])} for e in by_key.values()]


def problems(root: Path) -> dict[str, str]:
    """Return pair -> what is wrong, for pair directories a worker could not load.

    A cheap check (files present, model.bin's header readable), made at worker start so
    that presence and readiness show a broken model before a chunk meets it.
    """
    found: dict[str, str] = {}
    for entry, _match in _pair_dirs(root):
        missing = [name for name in REQUIRED_FILES if not (entry / name).is_file()]
        if missing:
            found[entry.name] = f"missing {', '.join(missing)} in {entry}"
            continue
        try:
            position_tables(entry / "model.bin")
        except (OSError, ModelFileError) as exc:
            found[entry.name] = f"unreadable model.bin in {entry}: {exc}"
    for entry in _other_dirs(root):
        try:
            detect(entry)
            position_tables(entry / "model.bin")
        except (FamilyError, OSError, ModelFileError, ValueError) as exc:
            found[entry.name] = f"{entry}: {exc}"
    for entry in argos.candidates(root):
        try:
            position_tables(argos.load(entry).path / "model" / "model.bin")
        except (argos.PackageError, OSError, ModelFileError) as exc:
            found[entry.name] = f"{entry}: {exc}"
    return found


def unrecognised(root: Path) -> dict[str, str]:
    """Return folder -> why, for folders under root that no layout recognises (shown by
    `flask --app app models` and logged, but no reason for a worker not to be ready)."""
    return {
        entry.name: f"{entry}: not a model folder (no model.bin, no Argos metadata.json)"
        for entry in _unknown(root)
    }


def _unknown(root: Path) -> list[Path]:
    """Folders under root that no layout recognises (hidden ones aside)."""
    if not root.is_dir():
        return []
    return [
        entry
        for entry in sorted(root.iterdir())
        if entry.is_dir()
        and not entry.name.startswith(".")
        and not PAIR_RE.match(entry.name)
        and not (entry / "model.bin").is_file()
        and not (entry / "metadata.json").is_file()
    ]


def _pair_dirs(root: Path) -> list[tuple[Path, re.Match]]:
    if not root.is_dir():
        return []
    return [
        (entry, match)
        for entry in sorted(root.iterdir())
        if (match := PAIR_RE.match(entry.name)) and entry.is_dir()
    ]
