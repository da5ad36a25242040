"""The model root's languages as each dialect names them, and back.

Model directories name languages by ISO 639 code, optionally with a script or region
(`zh_Hant`, `pt_BR`). LibreTranslate's clients send lower-case codes with its aliases
(`zh` Simplified and `zt` Traditional Chinese, `pb` Brazilian Portuguese, `iw` Hebrew);
DeepL's send upper-case codes and targets with a region (`EN-GB`, `PT-BR`). `resolve`
maps any of them, case-insensitively, to a model-root code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stapel.model_dirs import scan

ALIASES = {"zt": "zh_hant", "pb": "pt_br", "iw": "he", "in": "id", "ji": "yi", "jw": "jv"}
"""Old or LibreTranslate-only codes and the code they stand for."""
LT_CODES = {"zh_hans": "zh", "zh_hant": "zt", "pt_br": "pb"}
"""Model codes LibreTranslate's clients know under its own code."""
REGIONAL_TARGETS = {
    "en": (("EN-GB", "English (British)"), ("EN-US", "English (American)")),
    "pt": (("PT-PT", "Portuguese (European)"), ("PT-BR", "Portuguese (Brazilian)")),
}
"""DeepL's clients refuse plain EN and PT as targets: a model's en or pt is listed as these."""

_NAMES = (
    "af Afrikaans|am Amharic|ar Arabic|az Azerbaijani|be Belarusian|bg Bulgarian|"
    "bn Bengali|bs Bosnian|ca Catalan|cs Czech|cy Welsh|da Danish|de German|el Greek|"
    "en English|eo Esperanto|es Spanish|et Estonian|eu Basque|fa Persian|fi Finnish|"
    "fr French|ga Irish|gl Galician|gu Gujarati|ha Hausa|he Hebrew|hi Hindi|hr Croatian|"
    "ht Haitian Creole|hu Hungarian|hy Armenian|id Indonesian|ig Igbo|is Icelandic|"
    "it Italian|ja Japanese|jv Javanese|ka Georgian|kk Kazakh|km Khmer|kn Kannada|"
    "ko Korean|ku Kurdish|ky Kyrgyz|la Latin|lb Luxembourgish|lo Lao|lt Lithuanian|"
    "lv Latvian|mg Malagasy|mk Macedonian|ml Malayalam|mn Mongolian|mr Marathi|ms Malay|"
    "mt Maltese|my Burmese|nb Norwegian Bokmål|ne Nepali|nl Dutch|nn Norwegian Nynorsk|"
    "no Norwegian|pa Punjabi|pl Polish|ps Pashto|pt Portuguese|ro Romanian|ru Russian|"
    "rw Kinyarwanda|si Sinhala|sk Slovak|sl Slovenian|so Somali|sq Albanian|sr Serbian|"
    "sv Swedish|sw Swahili|ta Tamil|te Telugu|tg Tajik|th Thai|tl Tagalog|tr Turkish|"
    "tt Tatar|ug Uyghur|uk Ukrainian|ur Urdu|uz Uzbek|vi Vietnamese|xh Xhosa|yi Yiddish|"
    "yo Yoruba|zh Chinese|zh_hans Chinese (Simplified)|zh_hant Chinese (Traditional)|"
    "pt_br Portuguese (Brazil)|zu Zulu"
)
NAMES = dict(entry.split(" ", 1) for entry in _NAMES.split("|"))
"""English names of languages by lower-case code (a code not here is its own name)."""


def name(code: str) -> str:
    """Return a language's English name."""
    low = code.lower()
    return NAMES.get(low) or NAMES.get(low.split("_", 1)[0]) or code


@dataclass(frozen=True)
class Catalog:
    """The pairs of the model root now, and the languages they make."""

    pairs: tuple[tuple[str, str], ...]

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(s for s, _ in self.pairs))

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(t for _, t in self.pairs))

    @property
    def languages(self) -> list[str]:
        return list(dict.fromkeys([*self.sources, *self.targets]))

    def targets_of(self, source: str) -> list[str]:
        return [t for s, t in self.pairs if s == source]

    def sources_to(self, target: str) -> list[str]:
        return [s for s, t in self.pairs if t == target]

    @property
    def pair_names(self) -> list[str]:
        return [f"{s}-{t}" for s, t in self.pairs]


def catalog(model_root: Path) -> Catalog:
    """Return the model root's catalog (read from disk on every call, as /v1 does)."""
    return Catalog(tuple((m.source, m.target) for m in scan(model_root).values()))


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


def deepl_targets(code: str, targets: Iterable[str]) -> list[tuple[str, str]]:
    """Return DeepL's (code, name) entries for a model target among all targets."""
    regional = REGIONAL_TARGETS.get(code.lower())
    if regional is None:
        return [(code.replace("_", "-").upper(), name(code))]
    served = {t.replace("_", "-").upper() for t in targets}
    return [entry for entry in regional if entry[0] not in served]
