"""Set a bench run against its baseline, figure by figure.

    python -m bench.compare bench/runs/cpu.json                    # against bench/results/cpu.json
    python -m bench.compare bench/runs/x.json bench/results/y.json

Prints every numeric figure the two files share (a dotted path into the JSON), the
run's value, the baseline's and their ratio; then the figures only one of them has.
Both stamps are printed first, so a ratio is read knowing which commits and machines
it compares.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from bench.stamp import BASELINES


def figures(data: Any, prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of a JSON document by its dotted path (list items by index)."""
    found: dict[str, float] = {}
    if isinstance(data, bool):
        return found
    if isinstance(data, int | float):
        if math.isfinite(data):
            found[prefix] = float(data)
        return found
    if isinstance(data, dict):
        items = [(str(k), v) for k, v in data.items() if not (not prefix and k == "stamp")]
    elif isinstance(data, list):
        items = [(str(i), v) for i, v in enumerate(data)]
    else:
        return found
    for key, value in items:
        found.update(figures(value, f"{prefix}.{key}" if prefix else key))
    return found


def ratio(run: float, baseline: float) -> float | None:
    """run / baseline, or None where the baseline is zero."""
    return None if baseline == 0 else run / baseline


def rows(run: dict, baseline: dict) -> list[tuple[str, float | None, float | None, float | None]]:
    """(path, run, baseline, ratio) for every figure of either file, shared ones first."""
    mine, theirs = figures(run), figures(baseline)
    shared = [(p, mine[p], theirs[p], ratio(mine[p], theirs[p])) for p in mine if p in theirs]
    only_run = [(p, mine[p], None, None) for p in mine if p not in theirs]
    only_base = [(p, None, theirs[p], None) for p in theirs if p not in mine]
    return shared + only_run + only_base


def _describe(label: str, data: dict) -> str:
    stamp = data.get("stamp")
    if not isinstance(stamp, dict):
        return f"{label}: no stamp"
    dirty = " (with changes)" if stamp.get("dirty") else ""
    where = f"{stamp.get('cpu')} x{stamp.get('cores')}"
    return f"{label}: {stamp.get('commit')}{dirty} {stamp.get('utc')} {where}"


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def baseline_for(run_file: Path) -> Path:
    """The promoted baseline of a run: the file of the same name in bench/results/."""
    return BASELINES / run_file.name


def report(run_file: Path, baseline_file: Path) -> str:
    """The comparison as text: both stamps, then one line a figure."""
    run, baseline = json.loads(run_file.read_text()), json.loads(baseline_file.read_text())
    lines = [
        _describe(f"run      {run_file}", run),
        _describe(f"baseline {baseline_file}", baseline),
    ]
    table = rows(run, baseline)
    width = max((len(p) for p, *_ in table), default=6)
    lines.append(f"{'figure':<{width}}  {'run':>12}  {'baseline':>12}  {'ratio':>7}")
    for path, mine, theirs, r in table:
        shown = "-" if r is None else f"{r:.3f}"
        lines.append(f"{path:<{width}}  {_cell(mine):>12}  {_cell(theirs):>12}  {shown:>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument(
        "baseline", type=Path, nargs="?", help="default: bench/results/<the run's file name>"
    )
    args = parser.parse_args(argv)
    print(report(args.run, args.baseline or baseline_for(args.run)))


if __name__ == "__main__":
    main()
