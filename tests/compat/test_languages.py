"""Language codes as the dialects' clients send them, mapped to the model root's."""

from __future__ import annotations

import pytest

from app.compat.languages import deepl_source, deepl_targets, lt_code, resolve

ROOT = ["en", "de", "pt_BR", "zh_Hans", "zh_Hant", "he"]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("en", "en"),
        ("EN", "en"),
        ("EN-GB", "en"),  # a region the root lacks: the plain language
        ("en-us", "en"),
        ("pb", "pt_BR"),  # LibreTranslate's alias
        ("PT-BR", "pt_BR"),
        ("pt", "pt_BR"),  # a plain language: its one regional model
        ("zh", "zh_Hans"),
        ("zt", "zh_Hant"),
        ("ZH-HANT", "zh_Hant"),
        ("iw", "he"),
        ("fr", None),
        ("de-Latn", None),  # a script never falls back to the plain language
        ("", None),
    ],
)
def test_resolve(code, expected):
    assert resolve(code, ROOT) == expected


def test_codes_out():
    assert [lt_code(c) for c in ROOT] == ["en", "de", "pb", "zh", "zt", "he"]
    assert [deepl_source(c) for c in ROOT] == ["EN", "DE", "PT", "ZH", "ZH", "HE"]
    assert [c for c, _ in deepl_targets("en", ROOT)] == ["EN-GB", "EN-US"]
    assert [c for c, _ in deepl_targets("pt", ["pt", "pt_BR"])] == ["PT-PT"]
    assert deepl_targets("zh_Hant", ROOT) == [("ZH-HANT", "Chinese (Traditional)")]
