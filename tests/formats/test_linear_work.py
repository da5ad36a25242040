"""Reading markup is linear in its tags: twice the tags, about twice the work.

Work is counted, not timed: the Python lines the format modules run (a loop's every
turn is a line event), so the figure is the same on any machine and under any load.
bench/parsing.py times the same inputs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stapel.formats import fragments, htmlruns
from stapel.formats.base import FormatError

FORMATS_DIR = str(Path(htmlruns.__file__).parent)


def lines_run(call: Callable[[], object]) -> int:
    """The line events of stapel/formats code while call runs."""
    count = 0

    def local(frame, event, _arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, _event, _arg):
        return local if frame.f_code.co_filename.startswith(FORMATS_DIR) else None

    sys.settrace(calls)
    try:
        call()
    except FormatError:
        pass
    finally:
        sys.settrace(None)
    return count


def html(text: str) -> Callable[[], object]:
    return lambda: htmlruns.units(text)


def xml(text: str) -> Callable[[], object]:
    return lambda: fragments.parse(text, fragments.Markup("xml"))


SHAPES = {
    "br in one paragraph": lambda n: html("<p>" + "a<br>" * n + "</p>"),
    "nested b": lambda n: html("<p>" + "<b>" * n + "x" + "</b>" * n + "</p>"),
    "b pairs": lambda n: html("<p>" + "<b>x</b> " * n + "</p>"),
    "b never closed": lambda n: html("<p>" + "<b>" * n + "x"),
    "comments in a paragraph": lambda n: html("<p>x" + "<!--c-->" * n + "</p>"),
    "end tags closing nothing": lambda n: html("<section>" * n + "</p>" * n),
    "xml points": lambda n: xml("x" + "<x/>" * n),
    "xml pairs": lambda n: xml("<a>" + "<b>x</b>" * n + "</a>"),
    "xml doctypes": lambda n: xml("<!DOCTYPE a>" * n + "<a>x</a>"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_twice_the_tags_is_about_twice_the_work(shape):
    make = SHAPES[shape]
    small, large = lines_run(make(400)), lines_run(make(1600))
    assert large < 4 * 1.25 * small, (small, large)
