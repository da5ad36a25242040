"""A bench run's stamp, and the comparison of a run with its baseline."""

from __future__ import annotations

import json
import subprocess

import pytest

from bench import compare
from bench.stamp import BASELINES, LIBRARIES, ROOT, RUNS, run_path, stamp, write_run


def test_stamp_names_commit_machine_libraries_and_command():
    found = stamp(["-m", "bench.throughput", "--name", "x"])
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert head.startswith(found["commit"]) and len(found["commit"]) == 12
    assert isinstance(found["dirty"], bool)
    assert found["utc"].endswith("Z") and found["utc"][:2] == "20"
    assert found["cpu"] and found["cores"] >= 1
    assert set(found["libraries"]) == set(LIBRARIES)
    assert found["libraries"]["ctranslate2"] and found["libraries"]["celery"]
    assert found["command"][1:] == ["-m", "bench.throughput", "--name", "x"]


def test_runs_are_written_outside_the_baselines():
    assert run_path("cpu") == RUNS / "cpu.json"
    assert RUNS != BASELINES
    ignored = subprocess.run(["git", "check-ignore", "-q", str(run_path("cpu"))], cwd=ROOT)
    assert ignored.returncode == 0


def test_write_run_puts_the_stamp_first_and_keeps_the_figures(tmp_path):
    out = write_run(tmp_path / "deeper" / "x.json", {"rows": {"a": 1.5}}, ["bench"])
    data = json.loads(out.read_text())
    assert list(data) == ["stamp", "rows"]
    assert data["rows"] == {"a": 1.5}
    assert data["stamp"]["command"][1:] == ["bench"]


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"a": 1, "b": {"c": 2.5}}, {"a": 1.0, "b.c": 2.5}),
        ({"runs": [3, 4]}, {"runs.0": 3.0, "runs.1": 4.0}),
        ({"ok": True, "name": "cpu", "none": None}, {}),
        ({"stamp": {"cores": 2}, "x": {"stamp": 1}}, {"x.stamp": 1.0}),
        ({"nan": float("nan")}, {}),
    ],
)
def test_figures_are_the_numeric_leaves_by_path(document, expected):
    assert compare.figures(document) == expected


def test_rows_put_shared_figures_first_with_their_ratio():
    run = {"rows": {"many small": {"ratio": 1.1, "new": 5}}, "zero": 3}
    baseline = {"rows": {"many small": {"ratio": 1.0, "gone": 7}}, "zero": 0}
    assert compare.rows(run, baseline) == [
        ("rows.many small.ratio", 1.1, 1.0, pytest.approx(1.1)),
        ("zero", 3.0, 0.0, None),
        ("rows.many small.new", 5.0, None, None),
        ("rows.many small.gone", None, 7.0, None),
    ]


def test_a_run_is_compared_with_the_baseline_of_the_same_name():
    assert compare.baseline_for(RUNS / "api.json") == BASELINES / "api.json"


def test_main_prints_both_stamps_then_each_figure(tmp_path, capsys):
    run = write_run(tmp_path / "runs" / "api.json", {"post": {"p99_ms": 9.0}}, ["bench.api"])
    baseline = tmp_path / "results" / "api.json"
    baseline.parent.mkdir()
    baseline.write_text(json.dumps({"post": {"p99_ms": 12.0}}))
    compare.main([str(run), str(baseline)])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"run      {run}: ")
    assert out[1] == f"baseline {baseline}: no stamp"
    assert out[3].split() == ["post.p99_ms", "9", "12", "0.750"]
