"""Reading TMX for a memory: units streamed, inline codes dropped, errors placed."""

from __future__ import annotations

import io

import pytest

from stapel.formats.tmxread import BadTmx, units

HEAD = '<?xml version="1.0"?>\n<tmx version="1.4"><header srclang="{src}"/>\n<body>\n'


def read(body: str, src: str = "en-US", pair=("en", "de")) -> list[tuple[str, str]]:
    data = (HEAD.format(src=src) + body + "\n</body></tmx>").encode()
    return list(units(io.BytesIO(data), *pair))


def test_units_keep_highlighted_text_and_drop_native_codes():
    got = read(
        '<tu><tuv xml:lang="en-US"><seg>Press <bpt i="1">&lt;b&gt;</bpt>OK<ept i="1">'
        "&lt;/b&gt;</ept> <hi>now</hi>.</seg></tuv>"
        '<tuv lang="DE"><seg>Drücken Sie <ph x="2">&lt;br/&gt;</ph>OK.</seg></tuv></tu>'
    )
    assert got == [("Press OK now.", "Drücken Sie OK.")]


def test_other_languages_of_a_unit_are_ignored_and_srclang_all_is_accepted():
    body = (
        '<tu><tuv xml:lang="fr"><seg>Oui</seg></tuv><tuv xml:lang="en"><seg>Yes</seg></tuv>'
        '<tuv xml:lang="de-AT"><seg>Ja</seg></tuv></tu>'
    )
    assert read(body, src="*all*") == [("Yes", "Ja")]


@pytest.mark.parametrize(
    "body,where",
    [
        ('<tu><tuv xml:lang="en"><seg>a</seg></tuv></tu>', "line 4, column 1"),  # no German
        ('<tu><tuv xml:lang="en"><seg>a</seg></tuv>', "line 5"),  # not closed
        ("<tu>&undefined;</tu>", "line 4, column 16"),  # entities are not resolved
    ],
)
def test_bad_units_name_their_line(body, where):
    with pytest.raises(BadTmx) as caught:
        read(body)
    assert where in str(caught.value)
