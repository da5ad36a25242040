"""The fallback placement of codes (stapel/formats/align.py at_edges)."""

from __future__ import annotations

import pytest

from stapel.formats import inline
from stapel.formats.align import at_edges
from tests.formats.samples import tags


@pytest.mark.parametrize(
    ("source", "placed"),
    [
        ("<1>a</1>", "<1>T</1>"),
        ("<1>a</1> <2>b</2>", "<1><2>T</2></1>"),  # siblings nest instead of crossing
        ("<1>a <2>b</2> c</1> <3/> <4>d</4>", "<1><2><4>T</4></2></1> <3/>"),
        ("x <1/> y", "T <1/>"),
    ],
)
def test_at_edges_keeps_every_code_and_nests(source, placed):
    assert inline.readable(at_edges(tags(source), "T")) == placed
