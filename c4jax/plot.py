"""``python -m c4jax.plot RUN_DIR``: PNG plots of a run's metrics over training.

Reads ``RUN_DIR/metrics.jsonl`` (one JSON object per iteration) and writes,
into ``RUN_DIR/plots/`` (or ``--out DIR``), one PNG per group of metrics that
the run logged, plus ``overview.png`` with all of them:

* ``losses.png``: total, policy and value loss.
* ``policy_entropy.png``: entropy of the network's policy on replay positions.
* ``win_rates.png``: evaluation win rates (``win_rate/<opponent>``) and score.
* ``mistake_rates.png``: solver mistake rates (``mistake/<set>`` and their
  mean ``mistake_rate``); ``mistake_rates_nontrivial.png``: the same over the
  non-trivial positions (``mistake_nontrivial/<set>``).
* ``selfplay.png``: game length and first-player win / draw rates.

Groups whose metrics are absent are skipped. Rendering uses matplotlib's Agg
canvas directly (no display, no pyplot state).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a ``metrics.jsonl``; unreadable lines (a line being written) are skipped.

    Raises:
        ValueError: the file does not exist or holds no record.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such metrics file")
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    if not records:
        raise ValueError(f"{path}: no metrics logged yet")
    return records


def series(records: Sequence[dict], key: str) -> tuple[list[float], list[float]]:
    """``(steps, values)`` of the records that have a finite number under ``key``.

    The x value is the record's ``step`` (its index + 1 if it has none).
    """
    xs, ys = [], []
    for i, record in enumerate(records):
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isfinite(value):
            continue
        xs.append(float(record.get("step", i + 1)))
        ys.append(float(value))
    return xs, ys


def _keys(records: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(k for r in records for k in r))


def _prefixed(prefix: str) -> Callable[[list[str]], list[str]]:
    return lambda keys: sorted(k for k in keys if k.startswith(prefix))


def _listed(*names: str) -> Callable[[list[str]], list[str]]:
    return lambda keys: [k for k in names if k in keys]


# (file stem, title, y label, key selector, y range or None)
PANELS = (
    ("losses", "Losses", "loss", _listed("loss", "policy_loss", "value_loss"), None),
    ("policy_entropy", "Policy entropy", "nats", _listed("policy_entropy"), None),
    (
        "win_rates",
        "Evaluation",
        "rate",
        lambda keys: _prefixed("win_rate/")(keys) + _listed("score")(keys),
        (-0.02, 1.02),
    ),
    (
        "mistake_rates",
        "Solver mistake rates, all positions",
        "rate",
        lambda keys: _prefixed("mistake/")(keys) + _listed("mistake_rate")(keys),
        (0.0, None),
    ),
    (
        "mistake_rates_nontrivial",
        "Solver mistake rates, non-trivial positions",
        "rate",
        _prefixed("mistake_nontrivial/"),
        (0.0, None),
    ),
    (
        "selfplay",
        "Self-play games",
        "rate",
        _listed("first_player_win_rate", "draw_rate"),
        (-0.02, 1.02),
    ),
)


def _draw(ax, records, keys, title, ylabel, ylim, twin_length=False) -> None:
    for key in keys:
        xs, ys = series(records, key)
        sparse = len(xs) < 0.5 * len(records)  # evaluation metrics: a point every few steps
        ax.plot(xs, ys, marker="o" if sparse or len(xs) < 20 else None, markersize=3, label=key)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if twin_length:
        xs, ys = series(records, "game_length")
        if xs:
            other = ax.twinx()
            other.plot(xs, ys, color="gray", linestyle="--", label="game_length")
            other.set_ylabel("game length (plies)")
            other.legend(loc="upper right", fontsize="small")
    if keys:
        ax.legend(loc="upper left" if twin_length else "best", fontsize="small")


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Writes the PNGs of a run's ``metrics.jsonl``; returns the paths written.

    Args:
        run_dir: a run directory (or a ``metrics.jsonl`` file).
        out_dir: where to write (default ``RUN_DIR/plots``), created if needed.

    Raises:
        ValueError: no metrics file, or nothing in it to plot.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    run_dir = Path(run_dir)
    metrics_path = run_dir if run_dir.is_file() else run_dir / "metrics.jsonl"
    if not run_dir.exists():
        raise ValueError(f"{run_dir}: no such run directory")
    records = read_metrics(metrics_path)
    out_dir = Path(out_dir) if out_dir is not None else metrics_path.parent / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = _keys(records)

    panels = []
    for stem, title, ylabel, select, ylim in PANELS:
        chosen = [k for k in select(keys) if series(records, k)[0]]
        has_length = stem == "selfplay" and series(records, "game_length")[0]
        if chosen or has_length:
            panels.append((stem, title, ylabel, chosen, ylim, bool(has_length)))
    if not panels:
        raise ValueError(f"{metrics_path}: none of the plotted metrics is present")

    written = []
    for stem, title, ylabel, chosen, ylim, twin in panels:
        fig = Figure(figsize=(7.0, 4.0))
        FigureCanvasAgg(fig)
        _draw(fig.add_subplot(), records, chosen, title, ylabel, ylim, twin)
        fig.tight_layout()
        path = out_dir / f"{stem}.png"
        fig.savefig(path, format="png", dpi=100)
        written.append(path)

    cols = 2 if len(panels) > 1 else 1
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(6.0 * cols, 3.6 * rows))
    FigureCanvasAgg(fig)
    for k, (_, title, ylabel, chosen, ylim, twin) in enumerate(panels):
        _draw(fig.add_subplot(rows, cols, k + 1), records, chosen, title, ylabel, ylim, twin)
    fig.suptitle(f"{run_dir.name}: {len(records)} iterations")
    fig.tight_layout()
    path = out_dir / "overview.png"
    fig.savefig(path, format="png", dpi=100)
    written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit status (2 for bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.plot",
        description="Draw PNG plots of a run's metrics over training: losses, policy"
        " entropy, win rates, mistake rates, self-play statistics.",
    )
    parser.add_argument("run_dir", help="a run directory (holding metrics.jsonl)")
    parser.add_argument("--out", default=None, help="output folder (default RUN_DIR/plots)")
    args = parser.parse_args(argv)
    try:
        written = plot_run(args.run_dir, args.out)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} plots:")
    for path in written:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
