"""Time to strength: solver mistake rates of a run's checkpoints against training time.

Evaluates every kept checkpoint of a run (or ``--steps``) on the Pons sets
(all 1000 positions each unless ``--positions``) with ``--sims`` simulations,
reads each step's training wall time from ``metrics.jsonl``, and writes a JSON
table and a PNG (mistake rate per set against minutes of training).

    python -m bench.strength_curve runs/X --sims 64 --out bench/results/curve_X
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax

from bench import bench_env, outfile
from c4jax.judge import registry, solver
from c4jax.store import checkpoints


def training_minutes(run_dir: Path) -> dict[int, float]:
    """``{step: minutes of training up to and including it}`` from metrics.jsonl."""
    total, out = 0.0, {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        total += float(record.get("seconds", 0.0))
        out[int(record["step"])] = total / 60
    return out


def plot(rows: list[dict], sets: list[str], path: Path, title: str) -> None:
    import matplotlib  # only here: plotting is optional for the table

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    minutes = [r["minutes"] for r in rows]
    for s in sets:
        ax.plot(minutes, [100 * r["results"][s]["mistake_rate"] for r in rows], "o-", label=s)
    mean = [100 * sum(r["results"][s]["mistake_rate"] for s in sets) / len(sets) for r in rows]
    ax.plot(minutes, mean, "k--", lw=2, label="mean")
    ax.set_xlabel("training wall time (minutes, 2 CPU cores)")
    ax.set_ylabel("solver mistake rate (%)")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    outfile.save_figure(fig, path, name="--out", dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.strength_curve")
    parser.add_argument("run", type=Path)
    parser.add_argument("--sims", type=int, default=64)
    parser.add_argument("--steps", default=None, help="comma-separated (default: all kept)")
    parser.add_argument("--sets", default=",".join(solver.SET_NAMES))
    parser.add_argument("--positions", type=bench_env.at_least(1), default=None)
    parser.add_argument("--out", type=outfile.path_arg("--out", ".json", ".png"), required=True,
                        help="output path without suffix")
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()
    manager = checkpoints.open_for_reading(args.run)
    steps = sorted(manager.all_steps())
    manager.close()
    if args.steps:
        steps = [int(s) for s in args.steps.split(",")]
    sets = args.sets.split(",")
    minutes = training_minutes(args.run)
    rows = []
    for step in steps:
        name, agent = registry.make_run_agent(args.run, step=step, sims=args.sims)
        results = solver.evaluate_agent(
            agent, jax.random.key(0), sets, args.positions, batch_size=500
        )
        rows.append({"step": step, "minutes": minutes.get(step), "results": results})
        rates = "  ".join(f"{s} {100 * r['mistake_rate']:5.1f}" for s, r in results.items())
        print(f"step {step:4d} ({minutes.get(step, 0):5.1f} min): {rates}", flush=True)
    outfile.write_json(args.out.with_suffix(".json"),
                       {"run": str(args.run), "sims": args.sims, "rows": rows},
                       name="--out", indent=1, default=float)
    plot(rows, sets, args.out.with_suffix(".png"), f"{args.run.name}, {args.sims} simulations")
    print(f"wrote {args.out}.json and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
