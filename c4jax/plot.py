"""``python -m c4jax.plot RUN_DIR``: PNG plots of a run's metrics over training.

Reads ``RUN_DIR/metrics.jsonl`` (one JSON object per iteration) and writes,
into ``RUN_DIR/plots/`` (or ``--out DIR``), one PNG per group of metrics that
the run logged, plus ``overview.png`` with all of them:

* ``losses.png``: total, policy and value loss.
* ``policy_entropy.png``: entropy of the network's policy on replay positions.
* ``win_rates.png``: evaluation win rates against each opponent and the
  checkpoint score.
* ``mistake_rates.png``: mistake rates against the solver on each Pons set and
  their mean; ``mistake_rates_nontrivial.png``: the same over the non-trivial
  positions.
* ``selfplay.png``: first-player wins and draws in self-play, and game length.

Rates are in percent and every curve is named in words (the metric keys of
``metrics.jsonl`` are in ``LABELS``). The bottom axis counts training
iterations; the top one, at the same ticks, the training time by then, in
minutes (seconds for a run under 3 minutes), summed from the iterations'
``seconds`` (compiling included; the periodic evaluations and checkpoint saves
are not part of it), where the run logged them.

Groups whose metrics are absent are skipped. Rendering uses matplotlib's Agg
canvas directly (no display, no pyplot state).

Output files (here and ``python -m c4jax.evaluate``'s ``--json`` and
``--plot``) are checked before any work starts (``c4jax.store.outputs``:
``check_output``, ``check_output_folder``: the folder is created, a small probe file written,
and both removed again) and written whole or not at all (``write_output``: a temporary
file beside it, then renamed). A path that cannot be written is one
``error:`` line naming it and saying why, exit status 2; a full disk (or a
failing device) exit status ``outputs.EXIT_IO`` (74, ``EX_IOERR`` of sysexits.h).
"""

from __future__ import annotations

if __name__ == "__main__":  # before JAX loads: Ctrl-C anywhere is a short message and 130
    from c4jax.run import interrupt as _interrupt

    _interrupt.exit_on_interrupt("Interrupted.")

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from c4jax.store.outputs import OutputError, check_output_folder, write_output

TIME_LABEL = "training time at that iteration ({unit}; evaluations not included)"
STEP_LABEL = "training iteration"

# Pons set names: L = the stage of the game, R = how far the end is under perfect play.
_STAGES = {"1": "beginning", "2": "middle", "3": "end"}
_DIFFICULTIES = {"1": "easy", "2": "medium", "3": "hard"}

# Metric keys -> the words the plots show (prefixed keys are in ``label``).
LABELS = {
    "loss": "total loss",
    "policy_loss": "policy loss (cross-entropy)",
    "value_loss": "value loss (squared error)",
    "policy_entropy": "policy entropy",
    "mistake_rate": "mean over the sets",
    "first_player_win_rate": "first player (x) wins",
    "draw_rate": "draws",
    "game_length": "game length (plies, right axis)",
}
_RATES = ("win_rate/", "score/", "mistake/", "mistake_nontrivial/")
_RATE_KEYS = {"score", "mistake_rate", "first_player_win_rate", "draw_rate"}


# --- Metrics and their words. ---


def is_rate(key: str) -> bool:
    """Whether ``key`` is a fraction of games or positions (plotted in percent)."""
    return key in _RATE_KEYS or key.startswith(_RATES)


def _set_name(name: str) -> str:
    """``L1_R3`` -> ``L1_R3 (beginning, hard)``; other names as they are."""
    match = re.fullmatch(r"L(\d)_R(\d)", name)
    if not match or match[1] not in _STAGES or match[2] not in _DIFFICULTIES:
        return name
    return f"{name} ({_STAGES[match[1]]}, {_DIFFICULTIES[match[2]]})"


def label(key: str, keys: Sequence[str] = ()) -> str:
    """The words for metric ``key`` in a legend; ``keys``: all the run logged (for ``score``)."""
    if key == "score":
        if "mistake_rate" in keys:
            return "checkpoint score (100 - mean mistake rate)"
        return "checkpoint score (mean match score)"
    if key == "loss" and "policy_loss" not in keys:
        return "loss"
    if key in LABELS:
        return LABELS[key]
    prefix, _, rest = key.partition("/")
    if prefix == "win_rate":
        return f"wins against {rest}"
    if prefix == "score":
        return f"score against {rest} (wins + draws / 2)"
    if prefix in ("mistake", "mistake_nontrivial"):
        return _set_name(rest)
    return key


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a ``metrics.jsonl``; unreadable lines (a line being written) are skipped.

    Raises:
        ValueError: the file does not exist or holds no record.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such metrics file")
    records = []
    for line in path.read_bytes().decode("utf-8", "replace").splitlines():
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

    The x value is the record's ``step`` (its index + 1 if it has none); a record
    whose ``step`` is not a finite number (a hand-edited file) is skipped.
    """
    xs, ys = [], []
    for i, record in enumerate(records):
        value, step = record.get(key), record.get("step", i + 1)
        if not (_finite_number(value) and _finite_number(step)):
            continue
        xs.append(float(step))
        ys.append(float(value))
    return xs, ys


def _finite_number(value) -> bool:
    """A JSON number (not a bool) that is finite."""
    return (not isinstance(value, bool) and isinstance(value, int | float)
            and math.isfinite(value))


def elapsed_minutes(records: Sequence[dict]) -> tuple[list[float], list[float]]:
    """``(steps, minutes)``: the training time at the end of each iteration, from step 0.

    Sums the iterations' ``seconds`` (the time of the iteration itself, its
    evaluation not included). Empty when the run logged no ``seconds``.
    """
    steps, seconds = series(records, "seconds")
    if not steps:
        return [], []
    xs, minutes, total = [0.0], [0.0], 0.0
    for step, sec in sorted(zip(steps, seconds, strict=True)):
        if step <= xs[-1]:  # a repeated step (sorted: its shortest time is kept) or step 0
            continue
        total += max(sec, 0.0) / 60
        xs.append(step)
        minutes.append(total)
    return xs, minutes


def _keys(records: Sequence[dict]) -> list[str]:
    return list(dict.fromkeys(k for r in records for k in r))


def _prefixed(prefix: str) -> Callable[[list[str]], list[str]]:
    return lambda keys: sorted(k for k in keys if k.startswith(prefix))


def _listed(*names: str) -> Callable[[list[str]], list[str]]:
    return lambda keys: [k for k in names if k in keys]


# (file stem, title, y label, key selector, y range or None); rates in percent.
PANELS = (
    ("losses", "Training losses", "loss", _listed("loss", "policy_loss", "value_loss"), None),
    (
        "policy_entropy",
        "Policy entropy on replay positions",
        "entropy (nats)",
        _listed("policy_entropy"),
        None,
    ),
    (
        "win_rates",
        "Evaluation games against fixed opponents",
        "win rate, score (%)",
        lambda keys: _prefixed("win_rate/")(keys) + _listed("score")(keys),
        (-2.0, 102.0),
    ),
    (
        "mistake_rates",
        "Mistakes against the solver, all positions",
        "mistake rate (%)",
        lambda keys: _prefixed("mistake/")(keys) + _listed("mistake_rate")(keys),
        (0.0, None),
    ),
    (
        "mistake_rates_nontrivial",
        "Mistakes against the solver, non-trivial positions",
        "mistake rate (%)",
        _prefixed("mistake_nontrivial/"),
        (0.0, None),
    ),
    (
        "selfplay",
        "Self-play games",
        "share of games (%)",
        _listed("first_player_win_rate", "draw_rate"),
        (-2.0, 102.0),
    ),
)


def _ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=8, integer=True, steps=[1, 2, 2.5, 5, 10])


def _time_axis(ax, records) -> None:
    """A top x axis with the training time at the bottom axis's iterations (same ticks),
    in seconds for runs under 3 minutes, else in minutes; none where no time was logged."""
    steps, minutes = elapsed_minutes(records)
    if len(steps) < 2:
        return
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    seconds = minutes[-1] < 3
    scale = 60.0 if seconds else 1.0

    def at(step, _pos=None) -> str:
        if not steps[0] <= step <= steps[-1]:
            return ""
        value = float(np.interp(step, steps, minutes)) * scale
        return f"{value:.0f}" if value >= 10 else f"{value:.1f}"

    ax.xaxis.set_major_locator(_ticks())
    top = ax.secondary_xaxis("top")
    top.xaxis.set_major_locator(_ticks())
    top.xaxis.set_major_formatter(FuncFormatter(at))
    top.set_xlabel(TIME_LABEL.format(unit="seconds" if seconds else "minutes"), fontsize="small")
    top.tick_params(labelsize="small")


def _draw(ax, records, keys, title, ylabel, ylim, twin_length=False) -> None:
    every = _keys(records)
    for key in keys:
        xs, ys = series(records, key)
        if is_rate(key):
            ys = [100 * y for y in ys]
        sparse = len(xs) < 0.5 * len(records)  # evaluation metrics: a point every few steps
        ax.plot(
            xs, ys, marker="o" if sparse or len(xs) < 20 else None, markersize=3,
            label=label(key, every),
            linewidth=2.2 if key == "mistake_rate" else 1.5,
            color="black" if key == "mistake_rate" else None,
        )
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title)
    ax.set_xlabel(STEP_LABEL)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    _time_axis(ax, records)
    handles, labels = ax.get_legend_handles_labels()
    if twin_length:
        xs, ys = series(records, "game_length")
        if xs:
            other = ax.twinx()
            other.plot(xs, ys, color="gray", linestyle="--", label=label("game_length"))
            other.set_ylabel("game length (plies)")
            more_handles, more_labels = other.get_legend_handles_labels()
            handles, labels = handles + more_handles, labels + more_labels
    # Outside the plotting area, right of it: no curve (and no curve end) under it. A lone
    # curve that the title names needs none.
    if len(handles) > 1 or (handles and labels[0].lower() not in title.lower()):
        ax.legend(
            handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
            fontsize="small", frameon=False,
        )


def _place_legends(fig) -> None:
    """Lays the figure out with each legend clear of its axes' right-hand labels."""
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()  # measures text; nothing is drawn
    for _ in range(2):  # the layout moves the axes; twice settles it
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            right = ax.get_window_extent(renderer).x1
            for other in fig.axes:  # a twin shares the position and puts its labels right
                if other is not ax and other.bbox.bounds == ax.bbox.bounds:
                    right = max(right, other.yaxis.get_tightbbox(renderer).x1)
            x = ax.transAxes.inverted().transform((right, 0))[0]
            legend.set_bbox_to_anchor((x + 0.02, 1.0), transform=ax.transAxes)
        fig.tight_layout()


def figures(records: Sequence[dict], title: str = "") -> dict[str, object]:
    """The plots of ``records`` as matplotlib Figures (on Agg canvases), by file stem.

    One per group of metrics present and ``overview`` with all of them (titled
    ``title``). Raises ValueError when none of the plotted metrics is present.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    keys = _keys(records)
    panels = []
    for stem, panel_title, ylabel, select, ylim in PANELS:
        chosen = [k for k in select(keys) if series(records, k)[0]]
        has_length = stem == "selfplay" and series(records, "game_length")[0]
        if chosen or has_length:
            panels.append((stem, panel_title, ylabel, chosen, ylim, bool(has_length)))
    if not panels:
        raise ValueError("none of the plotted metrics is present")

    out = {}
    for stem, panel_title, ylabel, chosen, ylim, twin in panels:
        fig = Figure(figsize=(9.0, 4.5))
        FigureCanvasAgg(fig)
        _draw(fig.add_subplot(), records, chosen, panel_title, ylabel, ylim, twin)
        _place_legends(fig)
        out[stem] = fig

    cols = 2 if len(panels) > 1 else 1
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(8.5 * cols, 4.4 * rows))
    FigureCanvasAgg(fig)
    for k, (_, panel_title, ylabel, chosen, ylim, twin) in enumerate(panels):
        _draw(fig.add_subplot(rows, cols, k + 1), records, chosen, panel_title, ylabel, ylim, twin)
    if title:
        fig.suptitle(title)
    _place_legends(fig)
    out["overview"] = fig
    return out


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Writes the PNGs of a run's ``metrics.jsonl``; returns the paths written.

    Args:
        run_dir: a run directory (or a ``metrics.jsonl`` file).
        out_dir: where to write (default ``RUN_DIR/plots``), created if needed and
            checked before anything is drawn.

    Raises:
        ValueError: no metrics file, or nothing in it to plot.
        OutputError: (a ValueError) the output folder cannot be written or the disk
            is full; each PNG is written whole or not at all.
    """
    run_dir = Path(run_dir)
    metrics_path = run_dir if run_dir.is_file() else run_dir / "metrics.jsonl"
    if not run_dir.exists():
        raise ValueError(f"{run_dir}: no such run directory")
    records = read_metrics(metrics_path)
    name = metrics_path.parent.name
    what = "--out" if out_dir is not None else "plots folder"
    out_dir = Path(out_dir) if out_dir is not None else metrics_path.parent / "plots"
    check_output_folder(out_dir, name=what)
    try:
        figs = figures(records, f"{name}: {len(records)} iterations")
    except ValueError as err:
        raise ValueError(f"{metrics_path}: {err}") from None
    written = []
    for stem, fig in figs.items():
        path = out_dir / f"{stem}.png"
        write_output(path, lambda tmp, fig=fig: fig.savefig(tmp, format="png", dpi=100), name=what)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command line; returns the exit status (2 for bad input or an unwritable output
    folder, ``outputs.EXIT_IO`` for a full disk)."""
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.plot",
        description="Draw PNG plots of a run's metrics over training: losses, policy"
        " entropy, win rates, mistake rates, self-play statistics; against training"
        " iterations and, on a second axis, training time.",
    )
    parser.add_argument("run_dir", help="a run directory (holding metrics.jsonl)")
    parser.add_argument("--out", default=None, help="output folder (default RUN_DIR/plots)")
    args = parser.parse_args(argv)
    try:
        written = plot_run(args.run_dir, args.out)
    except OutputError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.code
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} plots:")
    for path in written:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
