"""The model root: one directory per language pair, in the converted OPUS-MT layout.

    STAPEL_MODEL_ROOT/
      en-de/
        model.bin            CTranslate2 model (config.json, *_vocabulary.* beside it)
        source.spm           SentencePiece model for the source language
        target.spm           SentencePiece model for the target language

The web side reads it for /v1/languages and validation; workers load from it.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAIR_RE = re.compile(r"^([a-z]{2,3}(?:_[A-Za-z]{2,4})?)-([a-z]{2,3}(?:_[A-Za-z]{2,4})?)$")
"""A pair directory name: ISO 639 codes, optionally with a script/region (`zh_Hans`)."""

REQUIRED_FILES = ("model.bin", "source.spm", "target.spm")


@dataclass(frozen=True)
class ModelDir:
    """One usable language pair on disk."""

    source: str
    target: str
    path: Path

    @property
    def pair(self) -> str:
        return f"{self.source}-{self.target}"


def scan(root: Path) -> dict[str, ModelDir]:
    """Return the usable pairs under root, keyed by `src-tgt`; incomplete dirs are skipped."""
    found: dict[str, ModelDir] = {}
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir()):
        match = PAIR_RE.match(entry.name)
        if not match or not entry.is_dir():
            continue
        if all((entry / name).is_file() for name in REQUIRED_FILES):
            found[entry.name] = ModelDir(match.group(1), match.group(2), entry)
    return found


SCAN_CACHE_S = 5.0
"""How long a process trusts its scan of the model root before looking again."""

_scans: dict[Path, tuple[float, float, dict[str, ModelDir]]] = {}
_scans_lock = threading.Lock()


def served_pairs(root: Path) -> dict[str, ModelDir]:
    """Return scan(root), scanned again when the root changed or SCAN_CACHE_S passed.

    A pair directory added or removed changes the root's mtime and is seen at once; a
    model whose files change in place is seen within SCAN_CACHE_S.
    """
    try:
        mtime = root.stat().st_mtime
    except OSError:
        mtime = -1.0
    cached = _scans.get(root)
    now = time.monotonic()
    if cached is not None and cached[0] == mtime and now - cached[1] < SCAN_CACHE_S:
        return cached[2]
    found = scan(root)
    with _scans_lock:
        _scans[root] = (mtime, now, found)
    return found
