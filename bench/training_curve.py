"""A run's in-training solver sample against training wall time, as a PNG.

Reads ``RUN_DIR/metrics.jsonl``: the time of every iteration (``seconds``,
compiling included; the periodic evaluations themselves are not timed in it,
as in ``c4jax.plot``'s top axis) and the periodic evaluation's mistake
rates (``mistake/<set>``, the run's ``eval.solver_positions`` per set at its
``eval.num_simulations``). Cheaper than ``bench.strength_curve``, which
re-evaluates checkpoints on the full sets. ``--json`` also writes the points (a
list of ``{"step", "minutes", "mean", <set>: ...}``, rates in %), so that a
figure in the docs is backed by a file in the repository even when its run
directory is not.

    python -m bench.training_curve runs/strong --out bench/results/strength/strong_training.png \
        --json bench/results/strength/curve_strong.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import outfile
from c4jax.plot import read_metrics


def curve(records: list[dict]) -> tuple[list[int], list[float], dict[str, list[float]]]:
    """``(steps, minutes, {metric: rates})`` at the evaluated iterations: the
    iteration, the summed iteration time before and including it, and the
    ``mistake_rate`` and ``mistake/<set>`` readings there (in %)."""
    steps, minutes, values, elapsed = [], [], {}, 0.0
    for record in records:
        elapsed += record.get("seconds", 0.0)
        if "mistake_rate" not in record:
            continue
        steps.append(record["step"])
        minutes.append(elapsed / 60)
        for key, value in record.items():
            if key.startswith("mistake/") or key == "mistake_rate":
                values.setdefault(key, []).append(100 * value)
    return steps, minutes, values


def points(steps: list[int], minutes: list[float], values: dict[str, list[float]]) -> list[dict]:
    """The curve as rows ``{"step", "minutes", "mean", <set>: rate}`` (rates in %,
    rounded to 2 decimals, minutes to 1), one per evaluated iteration."""
    rows = []
    for k, (step, minute) in enumerate(zip(steps, minutes, strict=True)):
        row = {"step": step, "minutes": round(minute, 1),
               "mean": round(values["mistake_rate"][k], 2)}
        row.update({key.split("/", 1)[1]: round(ys[k], 2) for key, ys in sorted(values.items())
                    if key.startswith("mistake/")})
        rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=outfile.path_arg("--out"), required=True,
                        help="PNG path")
    parser.add_argument("--json", type=outfile.path_arg("--json"), default=None,
                        help="also write the points here")
    args = parser.parse_args(argv)
    try:
        records = read_metrics(args.run_dir / "metrics.jsonl")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    steps, minutes, values = curve(records)
    if not steps:
        print(f"error: {args.run_dir} logged no solver sample", file=sys.stderr)
        return 2
    config = json.loads((args.run_dir / "config.json").read_text())["eval"]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, ys in sorted(values.items()):
        mean = key == "mistake_rate"
        ax.plot(minutes, ys, label="mean" if mean else key.split("/", 1)[1],
                linewidth=2.5 if mean else 1, color="black" if mean else None)
    ax.set_xlabel("training time (minutes; evaluations not included)")
    ax.set_ylabel("mistake rate (%)")
    ax.set_title(f"{args.run_dir.name}: solver sample during training "
                 f"({config['solver_positions']} positions per set, "
                 f"{config['num_simulations']} simulations)")
    ax.grid(alpha=0.3)
    ax.legend(ncol=4, fontsize=8)
    fig.tight_layout()
    outfile.save_figure(fig, args.out, name="--out", dpi=110)
    if args.json is not None:
        outfile.write_json(args.json, points(steps, minutes, values), name="--json")
    print(f"wrote {args.out}; last: {minutes[-1]:.0f} min, mean {values['mistake_rate'][-1]:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
