"""Several runs' strength curves in one figure: mean solver mistake rate against
training wall time, one line per run (the JSON files of ``bench.strength_curve``).

    python -m bench.compare_curves bench/results/strength/curve_C_*.json \
        bench/results/strength/curve_D_*.json --label C --label D --out OUT.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def mean_rate(row: dict) -> float:
    """Mean mistake rate (%) over the sets of one evaluated checkpoint."""
    rates = [r["mistake_rate"] for r in row["results"].values()]
    return 100 * sum(rates) / len(rates)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="+", type=Path, help="strength_curve JSON files")
    parser.add_argument(
        "--label", action="append", default=None, help="one per file, in order (repeat the flag)"
    )
    parser.add_argument("--title", default="Mean mistake rate on the six Pons sets")
    parser.add_argument("--out", type=Path, required=True, help="PNG path")
    args = parser.parse_args(argv)
    labels = args.label or [p.stem for p in args.curves]
    if len(labels) != len(args.curves):
        print(f"error: --label: {len(labels)} for {len(args.curves)} files", file=sys.stderr)
        return 2

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for path, label in zip(args.curves, labels, strict=True):
        data = json.loads(path.read_text())
        rows = [r for r in data["rows"] if r.get("minutes") is not None]
        ax.plot([r["minutes"] for r in rows], [mean_rate(r) for r in rows], "o-", label=label)
        sims = data.get("sims")
    ax.set_xlabel("training wall time (minutes; two runs shared the 2 CPU cores)")
    ax.set_ylabel(f"mean solver mistake rate (%), {sims} simulations")
    ax.set_title(args.title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
