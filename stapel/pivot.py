"""Pivoting: a pair no model serves, translated in two steps through one language.

With de-en and en-fr installed and STAPEL_PIVOT=en (the default), de-fr is listed and
accepted like any pair; a worker translates each segment de -> en, then the English
-> fr, each step with its own model (workers/pivoting.py). A pair a model serves
directly is never pivoted; STAPEL_PIVOT="" turns pivoting off.
"""

from __future__ import annotations

import threading
from pathlib import Path

from stapel.model_dirs import ModelDir, served_pairs

_made: dict[tuple[int, str], tuple[dict[str, ModelDir], dict[str, ModelDir]]] = {}
_lock = threading.Lock()


def with_pivots(direct: dict[str, ModelDir], via: str) -> dict[str, ModelDir]:
    """Return the direct pairs and, after them, the pairs reachable through `via`."""
    if not via:
        return direct
    into = {found.source: found for found in direct.values() if found.target == via}
    out = {found.target: found for found in direct.values() if found.source == via}
    pairs = dict(direct)
    for source, first in into.items():
        for target, second in out.items():
            pair = f"{source}-{target}"
            if source != target and pair not in pairs:
                pairs[pair] = ModelDir(
                    source,
                    target,
                    second.path,
                    "pivot",
                    via=via,
                    source_name=first.source_name,
                    target_name=second.target_name,
                )
    return pairs


def served(root: Path, via: str) -> dict[str, ModelDir]:
    """Return the pairs the model root serves, directly or through `via` (cached with
    the root's scan: stapel.model_dirs.served_pairs)."""
    direct = served_pairs(root)
    key = (id(direct), via)
    made = _made.get(key)
    if made is not None and made[0] is direct:
        return made[1]
    pairs = with_pivots(direct, via)
    with _lock:
        if len(_made) > 16:
            _made.clear()
        _made[key] = (direct, pairs)
    return pairs


def legs(found: ModelDir) -> tuple[str, str]:
    """Return the two direct pairs a pivot pair is translated through."""
    return f"{found.source}-{found.via}", f"{found.via}-{found.target}"
