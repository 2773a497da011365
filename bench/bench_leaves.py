"""Self-play with a shallow Gumbel search's leaves in one network call, against mctx's.

Two c4jax pipelines (``bench_train.c4jax_pipeline``) from one preset, in this
process and on the XLA flags c4jax's command lines use, differ only in
``Trainer(batched_leaves=...)``: ``batched`` evaluates a search's leaves in
one network call (``c4jax.alphazero.shallow``), ``mctx`` leaves every search
to mctx, one call per simulation. The searches agree to float rounding, so the
self-play time is the whole difference. ``bench.harness`` alternates the two
(the order reversed every other repeat), times exclude compilation and end
with ``jax.block_until_ready``; the medians and the median of the per-repeat
ratios count. The SGD calls, the same code in both, are timed too, as a check
on the alternation.

Usage::

    python -m bench.bench_leaves                          # cpu preset: 3x32, 4 sims
    python -m bench.bench_leaves --config strong --repeats 9
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
VARIANTS = ("batched", "mctx")
DEFINITIONS = {
    "<variant>.selfplay_s": "median wall time of one self-play chunk (B x T searched "
    "positions, replay add included)",
    "<variant>.sgd_s": "median wall time of one call of the preset's SGD steps",
    "selfplay_speedup.medians": "mctx's median self-play time / batched's",
    "selfplay_speedup.paired_median": "median over repeats of mctx's time / batched's "
    "time in the same repeat",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="cpu", help="preset name or JSON path (default cpu)")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls; the median counts")
    parser.add_argument("--seed", type=int, default=0, help="PRNG seed")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON results file (default bench/results/leaves_<config>.json)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats: at least 1, got {args.repeats}")
    return args


def summarize(times: dict[str, list[float]], positions: int) -> dict[str, Any]:
    """Medians, positions per second and the mctx / batched ratios of the two variants.

    Args:
        times: ``{"<variant> self-play" | "<variant> sgd": [wall s per repeat]}``.
        positions: B x T searched positions per self-play chunk.
    """
    median = {label: statistics.median(v) for label, v in times.items()}
    out: dict[str, Any] = {
        name: {"selfplay_s": median[f"{name} self-play"], "sgd_s": median[f"{name} sgd"],
               "selfplay_positions_per_s": positions / median[f"{name} self-play"]}
        for name in VARIANTS
    }
    for part in ("self-play", "sgd"):
        key = part.replace("-", "")
        paired = [m / b for b, m in zip(times[f"batched {part}"], times[f"mctx {part}"],
                                        strict=True)]
        out[f"{key}_speedup"] = {"medians": median[f"mctx {part}"] / median[f"batched {part}"],
                                 "paired_median": statistics.median(paired)}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Runs the comparison, prints a table and writes the JSON results."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    from c4jax.run import xla_flags

    xla_flags.enable_fast_cpu()  # before JAX starts its backend, as the command lines do
    import jax

    from bench import bench_env, bench_train, harness
    from c4jax.alphazero import trainer

    config = bench_train.make_config(bench_train.parse_args(
        ["--config", args.config, "--seed", str(args.seed)]))
    load_start, started = os.getloadavg(), time.perf_counter()
    measured = harness.Measurements()
    runners = []
    for name in VARIANTS:
        run = trainer.Trainer(config, batched_leaves=name == "batched")
        init_key, _, play_root = jax.random.split(jax.random.key(config.seed), 3)
        state = run.init(init_key)
        variables = bench_train._copy(run.variables(state))
        pipeline = dataclasses.replace(bench_train.c4jax_pipeline(run, state, run.apply_fn),
                                       name=name)
        runner = harness.InProcess(pipeline, variables, play_root)
        measured.add_pipeline(name, pipeline.node_bytes, runner.warm_up())
        runners.append(runner)
    harness.alternate(runners, args.repeats, measured)
    load_end = os.getloadavg()

    t, n = config.train, config.network
    summary = summarize(measured.times, t.selfplay_batch * t.selfplay_steps)
    device = harness.device_info()
    print(f"device: {device.get('cpu_model') or device['device_kind']}, jax "
          f"{device['jax_version']}; load average {load_start[0]:.2f} -> {load_end[0]:.2f}")
    print(f"network {n.num_blocks}x{n.channels}, {config.search.num_simulations} sims, "
          f"B={t.selfplay_batch} x T={t.selfplay_steps}; median of {args.repeats}")
    print(f"{'leaves':<8} {'self-play s':>12} {'pos/s':>9} {'sgd s':>7}")
    for name in VARIANTS:
        row = summary[name]
        print(f"{name:<8} {row['selfplay_s']:12.3f} {row['selfplay_positions_per_s']:9.1f} "
              f"{row['sgd_s']:7.3f}")
    for key in ("selfplay", "sgd"):
        speedup = summary[f"{key}_speedup"]
        print(f"{key} mctx / batched: {speedup['medians']:.3f} "
              f"(paired {speedup['paired_median']:.3f})")

    record = harness.result_record(
        measured.as_dict(), summary, device=device, load_average=(load_start, load_end),
        command=bench_env.command_line("bench.bench_leaves", argv),
        wall_s=time.perf_counter() - started, definitions=DEFINITIONS,
        settings={"config": args.config, "repeats": args.repeats, "seed": args.seed,
                  "blocks": n.num_blocks, "channels": n.channels,
                  "simulations": config.search.num_simulations,
                  "batch": t.selfplay_batch, "steps": t.selfplay_steps,
                  "xla_flags": os.environ.get("XLA_FLAGS", "")})
    out = args.out or RESULTS_DIR / f"leaves_{Path(args.config).stem}.json"
    harness.write_result(out, record)
    return record


if __name__ == "__main__":
    main()
