"""bench.scores on the tiny model: the same translations with and without the scores.

The model's fingerprint (and so the MT cache's keys) leaves `return_scores` out because
asking for the scores changes no output (workers/engine.py); this holds CTranslate2 to it.
"""

from __future__ import annotations

import re

from bench.scores import main


def test_the_scores_change_no_translation_and_their_cost_is_reported(model_root, capsys):
    main(
        [
            "--model",
            str(model_root / "en-de"),
            "--segments",
            "40",
            "--pairs",
            "2",
            "--decode",
            "8",
            "--threads",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert len(re.findall(r"^scores=(?:True |False) \d+\.\d\d s$", out, re.M)) == 4
    assert re.search(
        r"^40 segments, 2 runs each: .* the scores cost [+-]\d+\.\d%; "
        r"the translations are the same$",
        out,
        re.M,
    )
