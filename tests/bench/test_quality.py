"""The separation figures bench.quality reports: AUC and detection under a threshold."""

from __future__ import annotations

import pytest

from bench.quality import detection, normalise, roc_auc, table


@pytest.mark.parametrize(
    ("scores", "right", "auc"),
    [
        ([0.9, 0.8, 0.2, 0.1], [True, True, False, False], 1.0),
        ([0.1, 0.2, 0.8, 0.9], [True, True, False, False], 0.0),
        ([0.5, 0.5, 0.5, 0.5], [True, False, True, False], 0.5),
        ([0.9, 0.4, 0.6, 0.1], [True, True, False, False], 0.75),
        ([0.7, 0.7, 0.3], [True, False, False], 0.75),
        ([0.9, 0.8], [True, True], None),
        ([], [], None),
    ],
)
def test_auc_is_the_chance_a_right_output_scores_above_a_wrong_one(scores, right, auc):
    assert roc_auc(scores, right) == auc


def test_flagging_under_a_threshold_counts_precision_and_recall_of_wrong_outputs():
    scores = [0.95, 0.6, 0.45, 0.2, 0.9, 0.5]
    right = [True, True, False, False, False, True]
    found = detection(scores, right, 0.5)
    assert (found.flagged, found.wrong_flagged, found.wrong) == (2, 2, 3)
    assert found.precision == 1.0
    assert found.recall == pytest.approx(2 / 3)
    wider = detection(scores, right, 0.7)  # 0.5 itself is not under 0.5, but under 0.7
    assert (wider.flagged, wider.wrong_flagged) == (4, 2)
    assert wider.precision == 0.5


def test_undefined_shares_are_none_and_a_dash_in_the_table():
    nothing = detection([0.9, 0.8], [True, False], 0.3)
    assert nothing.precision is None and nothing.recall == 0.0
    assert detection([0.1], [True], 0.3).recall is None
    run = {
        "pair": "en-de",
        "compute_type": "int8",
        "exact": {
            "right": 1,
            "wrong": 0,
            "auc": None,
            "thresholds": [{"flagged": 0, "precision": None, "recall": None}] * 3,
        },
        "close": {
            "right": 1,
            "wrong": 0,
            "auc": None,
            "thresholds": [{"flagged": 0, "precision": None, "recall": None}] * 3,
        },
    }
    assert "| en-de | int8 | exact | 1 / 0 | - | 0, -, - |" in table([run])


def test_spacing_alone_never_makes_an_output_wrong():
    assert normalise(" Der  Hund\tbellt. \n") == normalise("Der Hund bellt.")
    assert normalise("Der Hund bellt.") != normalise("Der Hund bellt!")
