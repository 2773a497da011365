"""Several runs' strength curves in one figure: mean solver mistake rate against
training wall time, one line per run. Reads the JSON files of
``bench.strength_curve`` and of ``bench.time_to_strength`` (its targets are drawn
as dotted lines).

    python -m bench.compare_curves bench/results/strength/curve_C_*.json \
        bench/results/strength/curve_D_*.json --label C --label D --out OUT.png
    python -m bench.compare_curves bench/results/time_to_strength/cpu_before.json \
        bench/results/time_to_strength/cpu_after.json --label before --label after \
        --out OUT.png

Runs given the same label are seeds of one setting: they share a colour, and
their mean curve (over the minutes all of them cover) is drawn over them in bold.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench import outfile


def mean_rate(row: dict) -> float:
    """Mean mistake rate (%) over the sets of one evaluated checkpoint."""
    if "mean" in row:  # time_to_strength: rates in % already
        return float(row["mean"])
    rates = [r["mistake_rate"] for r in row["results"].values()]
    return 100 * sum(rates) / len(rates)


def curve(data: dict) -> tuple[list[float], list[float]]:
    """``(minutes, mean %)`` of the evaluated checkpoints of one file, in time order.

    Raises:
        ValueError: none of its rows has a time; KeyError: a row without rates.
    """
    points = []
    for row in data["rows"]:
        minutes = row["seconds"] / 60 if "seconds" in row else row.get("minutes")
        if minutes is not None:
            points.append((minutes, mean_rate(row)))
    if not points:
        raise ValueError("no evaluated checkpoint with a time")
    points.sort()
    return [m for m, _ in points], [r for _, r in points]


def mean_curve(curves: list[tuple[list[float], list[float]]], *, step: float = 0.1
               ) -> tuple[list[float], list[float]]:
    """Mean of several ``(minutes, rates)`` curves, each interpolated linearly
    between its checkpoints, on a grid of ``step`` minutes over the span every
    curve covers; empty lists where the spans do not overlap."""
    start = max(m[0] for m, _ in curves)
    stop = min(m[-1] for m, _ in curves)
    if stop < start:
        return [], []
    grid = np.arange(start, stop + 1e-9, step)
    if grid[-1] < stop:
        grid = np.append(grid, stop)
    mean = np.mean([np.interp(grid, m, r) for m, r in curves], axis=0)
    return grid.tolist(), mean.tolist()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("curves", nargs="+", type=Path,
                        help="strength_curve or time_to_strength JSON files")
    parser.add_argument(
        "--label", action="append", default=None, help="one per file, in order (repeat the flag)"
    )
    parser.add_argument("--title", default="Mean mistake rate on the six Pons sets")
    parser.add_argument("--xlabel", default="training wall time (minutes)",
                        help="say here how the runs shared the machine, if they did")
    parser.add_argument("--out", type=outfile.path_arg("--out"), required=True,
                        help="PNG path")
    args = parser.parse_args(argv)
    labels = args.label or [p.stem for p in args.curves]
    if len(labels) != len(args.curves):
        print(f"error: --label: {len(labels)} for {len(args.curves)} files", file=sys.stderr)
        return 2
    records = []
    for path in args.curves:
        try:
            data = json.loads(path.read_text())
            records.append((data, curve(data)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"error: {path}: not a strength_curve or time_to_strength file ({e})",
                  file=sys.stderr)
            return 2

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sims, targets = set(), set()
    groups: dict[str, list] = {}  # label -> curves, in first-seen order
    for (data, points), label in zip(records, labels, strict=True):
        groups.setdefault(label, []).append(points)
        sims.add(data.get("sims"))
        targets.update(float(t) for t in (data.get("targets") or {}))
    for index, (label, curves) in enumerate(groups.items()):
        color = f"C{index % 10}"
        if len(curves) == 1:
            ax.plot(*curves[0], "o-", color=color, label=label)
            continue
        for minutes, rates in curves:
            ax.plot(minutes, rates, "o-", color=color, alpha=0.35, linewidth=1, markersize=3)
        grid, mean = mean_curve(curves)
        ax.plot(grid, mean, "-", color=color, linewidth=2.5,
                label=f"{label} (mean of {len(curves)} runs)")
    for target in sorted(targets):
        ax.axhline(target, color="gray", linestyle=":", linewidth=1)
    ax.set_xlabel(args.xlabel)
    ax.set_ylabel("mean solver mistake rate (%)"
                  + (f", {sims.pop()} simulations" if len(sims) == 1 and None not in sims else ""))
    ax.set_title(args.title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    outfile.save_figure(fig, args.out, name="--out", dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
