"""Language detection for `source=auto` and the dialects' /detect, ranked among the
languages the model root serves.

py3langid (BSD-3-Clause, a maintained fork of langid.py) ships its Naive Bayes model in
the package (4.6 MB wheel, numpy only; no download at run time), knows 97 languages and
can be restricted to a subset, which is what a model root needs: the answer is always a
language some model serves, and the probabilities are normalised among those alone.
lingua-language-detector (Apache-2.0) is more accurate on very short strings but is a
96 MB wheel whose full models take hundreds of MiB in every web process.

The full model is loaded once per process, on first use (about 2 s); each set of
languages gets its own restricted copy, made once and never changed, so threads share
them safely.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Collection

from py3langid.langid import MODEL_FILE, LanguageIdentifier

ALIASES = {"nb": "no", "iw": "he", "fil": "tl", "in": "id", "ji": "yi"}
"""Model-root codes whose language py3langid knows under another code."""

_LOCK = threading.Lock()
_FULL: list[LanguageIdentifier] = []


def _full() -> LanguageIdentifier:
    """Return the full model, loading it once per process (the lock: once, not per thread)."""
    with _LOCK:
        if not _FULL:
            _FULL.append(LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True))
        return _FULL[0]


def _label(code: str) -> str:
    """Return py3langid's label for a model-root code (`zh_Hant` -> `zh`, `nb` -> `no`)."""
    base = code.split("_", 1)[0].lower()
    return ALIASES.get(base, base)


@functools.lru_cache(maxsize=16)
def _restricted(labels: frozenset[str]) -> LanguageIdentifier:
    identifier = copy.copy(_full())
    identifier.set_languages(sorted(labels))
    return identifier


def detectable(languages: Collection[str]) -> list[str]:
    """Return the languages (model-root codes) detection can tell apart, in order given."""
    known = set(_full().labels)
    return [code for code in languages if _label(code) in known]


def rank(text: str, languages: Collection[str]) -> list[tuple[str, float]]:
    """Rank the languages for text, best first, with confidences from 0 to 1.

    Only the detectable ones among languages are ranked (empty when none is); codes
    that share a label (`zh_Hans`, `zh_Hant`) share its confidence.
    """
    codes = detectable(languages)
    if not codes:
        return []
    labels = frozenset(_label(c) for c in codes)
    if len(labels) == 1:
        return [(c, 1.0) for c in codes]
    scores = dict(_restricted(labels).rank(text))
    return sorted(((c, float(scores[_label(c)])) for c in codes), key=lambda p: -p[1])


def best(text: str, languages: Collection[str]) -> tuple[str, float] | None:
    """Return the most likely language of text among languages, or None if none is known."""
    ranked = rank(text, languages)
    return ranked[0] if ranked else None
