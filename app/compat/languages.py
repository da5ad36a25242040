"""The model root's languages as each dialect names them, and back.

Model directories name languages by ISO 639 code, optionally with a script or region
(`zh_Hant`, `pt_BR`). LibreTranslate's clients send lower-case codes with its aliases
(`zh` Simplified and `zt` Traditional Chinese, `pb` Brazilian Portuguese, `iw` Hebrew);
DeepL's send upper-case codes and targets with a region (`EN-GB`, `PT-BR`). `resolve`
maps any of them, case-insensitively, to a model-root code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from stapel.languages import name
from stapel.model_dirs import ModelDir, language_names
from stapel.pivot import served

ALIASES = {"zt": "zh_hant", "pb": "pt_br", "iw": "he", "in": "id", "ji": "yi", "jw": "jv"}
"""Old or LibreTranslate-only codes and the code they stand for."""
LT_CODES = {"zh_hans": "zh", "zh_hant": "zt", "pt_br": "pb"}
"""Model codes LibreTranslate's clients know under its own code."""
REGIONAL_TARGETS = {
    "en": (("EN-GB", "English (British)"), ("EN-US", "English (American)")),
    "pt": (("PT-PT", "Portuguese (European)"), ("PT-BR", "Portuguese (Brazilian)")),
}
"""DeepL's clients refuse plain EN and PT as targets: a model's en or pt is listed as these."""


@dataclass(frozen=True)
class Catalog:
    """The pairs of the model root now, and the languages they make."""

    pairs: tuple[tuple[str, str], ...]
    names: tuple[tuple[str, str], ...] = ()
    """(code, name) of each language, from the models' metadata or the standard table."""

    def name(self, code: str) -> str:
        """Return a language's name: its model's, else the standard table's."""
        return self._names.get(code) or name(code)

    @cached_property
    def _names(self) -> dict[str, str]:
        return dict(self.names)

    @cached_property
    def sources(self) -> list[str]:
        return list(self._targets)

    @cached_property
    def targets(self) -> list[str]:
        return list(self._sources)

    @cached_property
    def languages(self) -> list[str]:
        return list(dict.fromkeys([*self.sources, *self.targets]))

    @cached_property
    def _targets(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for s, t in self.pairs:
            found.setdefault(s, []).append(t)
        return found

    @cached_property
    def _sources(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for s, t in self.pairs:
            found.setdefault(t, []).append(s)
        return found

    def targets_of(self, source: str) -> list[str]:
        return self._targets.get(source, [])

    def sources_to(self, target: str) -> list[str]:
        return self._sources.get(target, [])

    @property
    def pair_names(self) -> list[str]:
        return [f"{s}-{t}" for s, t in self.pairs]


_catalogs: dict[int, tuple[dict[str, ModelDir], Catalog]] = {}


def catalog(model_root: Path, pivot: str = "") -> Catalog:
    """Return the model root's catalog, made again whenever its scan changes (as /v1)."""
    found = served(model_root, pivot)
    cached = _catalogs.get(id(found))
    if cached is not None and cached[0] is found:
        return cached[1]
    made = Catalog(
        tuple((m.source, m.target) for m in found.values()),
        tuple(language_names(found).items()),
    )
    _catalogs.clear()
    _catalogs[id(found)] = (found, made)
    return made


def resolve(code: str, candidates: Iterable[str]) -> str | None:
    """Return the model code among candidates that a client's code means, or None.

    Case and `-`/`_` do not matter; aliases apply; a region a model root lacks falls
    back to the plain language (`EN-GB` -> `en`), and a plain language to its one
    regional model (`pt` -> `pt_BR`). A script (`zh-Hant`) never falls back.
    """
    wanted = code.strip().lower().replace("-", "_")
    wanted = ALIASES.get(wanted, wanted)
    by_lower = {c.lower(): c for c in candidates}
    if wanted in by_lower:
        return by_lower[wanted]
    if wanted == "zh" and "zh_hans" in by_lower:
        return by_lower["zh_hans"]
    base, _, sub = wanted.partition("_")
    if sub and len(sub) == 2 and base in by_lower:
        return by_lower[base]
    variants = [c for low, c in by_lower.items() if low.partition("_")[0] == wanted]
    return variants[0] if len(variants) == 1 else None


def lt_code(code: str) -> str:
    """Return the code LibreTranslate's clients use for a model code."""
    return LT_CODES.get(code.lower(), code.replace("_", "-"))


def deepl_source(code: str) -> str:
    """Return DeepL's code of a source language: the plain language, upper case."""
    return code.split("_", 1)[0].upper()


def deepl_targets(
    code: str, targets: Iterable[str], label: Callable[[str], str] = name
) -> list[tuple[str, str]]:
    """Return DeepL's (code, name) entries for a model target among all targets."""
    regional = REGIONAL_TARGETS.get(code.lower())
    if regional is None:
        return [(code.replace("_", "-").upper(), label(code))]
    served = {t.replace("_", "-").upper() for t in targets}
    return [entry for entry in regional if entry[0] not in served]
