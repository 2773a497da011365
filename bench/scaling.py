"""Scaling of the fused training iteration over devices and processes (CPU).

Each measurement runs in a fresh process (the device count of a CPU process is
fixed when JAX starts: ``--xla_force_host_platform_device_count``), builds the
``Trainer`` of a preset with the batch sizes of that row, compiles the fused
``iteration`` (self-play chunk + replay + SGD, as ``python -m c4jax.train``
runs it), and times ``--repeats`` iterations after ``--warmup`` untimed ones,
each ending in ``jax.block_until_ready``. Rows:

* **weak**: a fixed batch per device (``--per-device`` games and minibatch
  rows), so the global batch grows with the device count;
* **strong**: a fixed global batch (``--global-batch``) split over the devices;
* **2 processes**: two processes of one device each, joined through
  ``jax.distributed`` on 127.0.0.1 (gloo collectives), at the weak and the
  strong batch of the 2-device rows.

Throughput is self-play positions per second, ``B x T / iteration seconds``
(the ``positions_per_second`` of ``metrics.jsonl``); every iteration also
takes its K SGD steps. Efficiency is the usual ``rate(n) / (n x rate(1))``
against the one-device row of the same kind: what n real devices would give
ideally, n times the positions per second. Forced CPU devices share the
machine's cores, so on a 2-core machine no row can be more than about twice as
fast as one core: beyond 2 devices the efficiencies measure the cost of
partitioning (collectives, smaller per-device work), not a speed-up.

Usage::

    JAX_PLATFORMS=cpu python -m bench.scaling                  # cpu preset, 1/2/4/8 devices
    python -m bench.scaling --config tiny --devices 1,2 --repeats 1 --no-processes \\
        --out /tmp/scaling.json                                 # smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import outfile
from c4jax.run import xla_flags

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
_MARK = "SCALING_RESULT "  # prefix of the worker's result line on stdout


@dataclasses.dataclass(frozen=True)
class Row:
    """One measurement: ``devices`` per process times ``processes``, batch ``batch``."""

    kind: str  # "weak" or "strong"
    devices: int  # devices per process
    processes: int
    batch: int  # global self-play games B (= global minibatch rows)

    @property
    def total_devices(self) -> int:
        return self.devices * self.processes


def plan(
    device_counts: list[int], per_device: int, global_batch: int, processes: bool
) -> list[Row]:
    """The rows to measure, in order: weak rows, strong rows, then 2 processes."""
    rows = [Row("weak", n, 1, per_device * n) for n in device_counts]
    rows += [Row("strong", n, 1, global_batch) for n in device_counts]
    if processes:
        rows += [Row("weak", 1, 2, per_device * 2), Row("strong", 1, 2, global_batch)]
    return rows


def efficiency(rate: float, devices: int, base_rate: float) -> float:
    """Rate relative to ideal scaling, ``devices`` times the one-device ``base_rate``."""
    return rate / (base_rate * devices)


# -- the worker: one process of one row ------------------------------------------


def measure(config, *, warmup: int, repeats: int) -> dict:
    """Times the fused iteration of ``config`` on all devices of the run.

    Returns:
        ``compile_s`` (first call), ``seconds`` (median of ``repeats`` timed
        iterations), ``all_seconds`` and ``positions_per_second`` (B x T / median).
    """
    import jax

    from c4jax.alphazero import trainer as trainer_lib

    run = trainer_lib.Trainer(config)
    state = run.init(trainer_lib.run_keys(config.seed)[0])
    jax.block_until_ready(state)
    times = []
    compile_s = None
    for i in range(warmup + repeats):
        key = trainer_lib.iteration_key(config.seed, i)
        start = time.perf_counter()
        state, metrics = run.iteration(state, key)
        jax.block_until_ready((state, metrics))
        elapsed = time.perf_counter() - start
        if i == 0:
            compile_s = elapsed
        if i >= warmup:
            times.append(elapsed)
    t = config.train
    seconds = statistics.median(times)
    return {
        "compile_s": compile_s,
        "seconds": seconds,
        "all_seconds": times,
        "positions_per_second": t.selfplay_batch * t.selfplay_steps / seconds,
        "sgd_samples_per_second": t.sgd_steps * t.minibatch_size / seconds,
    }


def row_config(args: argparse.Namespace, batch: int):
    """The preset ``args.config`` with this row's batch and the run length of the bench."""
    from c4jax.alphazero import config as config_lib

    config = config_lib.load(args.config)
    train = dataclasses.replace(
        config.train,
        selfplay_batch=batch,
        minibatch_size=batch,
        selfplay_steps=args.selfplay_steps or config.train.selfplay_steps,
        sgd_steps=args.sgd_steps or config.train.sgd_steps,
        min_replay_size=0,
    )
    return dataclasses.replace(config, train=train)


def _worker(args: argparse.Namespace) -> int:
    from c4jax.alphazero import config as config_lib
    from c4jax.run import distributed

    if args.coordinator:
        distributed.initialize(
            distributed.Cluster(
                coordinator=args.coordinator,
                num_processes=args.num_processes,
                process_id=args.process_id,
            )
        )
    import jax

    config = row_config(args, args.batch)
    config_lib.validate(config, jax.device_count())
    result = measure(config, warmup=args.warmup, repeats=args.repeats)
    result.update(devices=jax.device_count(), processes=jax.process_count())
    if jax.process_index() == 0:
        print(_MARK + json.dumps(result), flush=True)
    return 0


# -- the driver -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_argv(args: argparse.Namespace, row: Row) -> list[str]:
    argv = [sys.executable, "-m", "bench.scaling", "--worker", "--config", args.config,
            "--batch", str(row.batch), "--warmup", str(args.warmup),
            "--repeats", str(args.repeats)]
    if args.selfplay_steps:
        argv += ["--selfplay-steps", str(args.selfplay_steps)]
    if args.sgd_steps:
        argv += ["--sgd-steps", str(args.sgd_steps)]
    return argv


_DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def worker_xla_flags(flags: str, devices: int) -> str:
    """A worker's ``XLA_FLAGS``: the caller's ``flags`` with the row's device count
    (any count given replaced) and XLA:CPU's YNNPACK fusion where
    ``python -m c4jax.train`` turns it on (``xla_flags.enable_fast_cpu``), so a row
    times the code path training runs."""
    kept = [f for f in flags.split() if not f.startswith(_DEVICE_COUNT_FLAG)]
    env = {**os.environ, "XLA_FLAGS": " ".join([*kept, f"{_DEVICE_COUNT_FLAG}={devices}"])}
    xla_flags.enable_fast_cpu(env, child=True)
    return env["XLA_FLAGS"]


def run_row(args: argparse.Namespace, row: Row, timeout: float) -> dict:
    """Runs ``row`` in fresh processes and returns process 0's result.

    Raises:
        RuntimeError: a process failed or ran past ``timeout`` (its output's tail).
    """
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": worker_xla_flags(os.environ.get("XLA_FLAGS", ""), row.devices),
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    argv = _worker_argv(args, row)
    if row.processes > 1:
        coordinator = f"127.0.0.1:{_free_port()}"
        argvs = [argv + ["--coordinator", coordinator, "--num-processes", str(row.processes),
                         "--process-id", str(i)] for i in range(row.processes)]
    else:
        argvs = [argv]
    procs = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, cwd=ROOT) for a in argvs]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=timeout)
            outputs.append(out)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{row} ran past {timeout:.0f} s") from None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, out in zip(procs, outputs, strict=True):
        if proc.returncode:
            raise RuntimeError(f"{row} failed (exit {proc.returncode}):\n{out[-3000:]}")
    for line in outputs[0].splitlines():
        if line.startswith(_MARK):
            return json.loads(line[len(_MARK):])
    raise RuntimeError(f"{row}: no result line:\n{outputs[0][-3000:]}")


def table(results: list[dict]) -> str:
    """Markdown table of the measured rows with their efficiencies."""
    lines = ["| scaling | processes x devices | global B | iteration s | positions/s "
             "| vs 1 device | efficiency |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        one = r.get("base_rate")
        rel = r["positions_per_second"] / one if one else float("nan")
        lines.append(
            f"| {r['kind']} | {r['processes']} x {r['devices_per_process']} | {r['batch']} "
            f"| {r['seconds']:.2f} | {r['positions_per_second']:,.0f} | {rel:.2f}x "
            f"| {r['efficiency']:.0%} |"
        )
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    """Positions/s against devices for weak and strong scaling, with the ideal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for kind, color in (("weak", "tab:blue"), ("strong", "tab:orange")):
        rows = [r for r in results if r["kind"] == kind and r["processes"] == 1]
        if not rows:
            continue
        n = [r["total_devices"] for r in rows]
        ax.plot(n, [r["positions_per_second"] for r in rows], "o-", color=color,
                label=f"{kind} (one process)")
        base = rows[0]["base_rate"]
        ax.plot(n, [base * k for k in n], ":", color=color, label=f"{kind}, ideal (n x 1 device)")
        for r in results:
            if r["kind"] == kind and r["processes"] > 1:
                ax.plot([r["total_devices"]], [r["positions_per_second"]], "s", color=color,
                        markerfacecolor="none", markersize=9, label=f"{kind}, 2 processes")
    ax.axvline(os.cpu_count() or 1, color="grey", lw=0.8, ls="--", label="CPU cores")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("devices (forced CPU devices; all share the same cores)")
    ax.set_ylabel("self-play positions / s (fused iteration)")
    ax.set_title("Scaling of the fused iteration on this CPU")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    outfile.save_figure(fig, path, name="--plot", dpi=120)
    plt.close(fig)


def finish(rows: list[Row], measured: list[dict]) -> list[dict]:
    """Each row's result with its kind, layout, base rate and efficiency."""
    results = []
    for row, m in zip(rows, measured, strict=True):
        results.append({**m, "kind": row.kind, "devices_per_process": row.devices,
                        "processes": row.processes, "total_devices": row.total_devices,
                        "batch": row.batch})
    for kind in ("weak", "strong"):
        ones = [r for r in results if r["kind"] == kind and r["total_devices"] == 1]
        if not ones:
            continue
        base = ones[0]["positions_per_second"]
        for r in results:
            if r["kind"] == kind:
                r["base_rate"] = base
                r["efficiency"] = efficiency(r["positions_per_second"], r["total_devices"], base)
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="cpu", help="preset or JSON path (default cpu)")
    p.add_argument("--devices", default="1,2,4,8", help="device counts, comma-separated")
    p.add_argument("--per-device", type=int, default=64,
                   help="weak scaling: games and minibatch rows per device")
    p.add_argument("--global-batch", type=int, default=256,
                   help="strong scaling: global games and minibatch rows")
    p.add_argument("--selfplay-steps", type=int, default=8, help="T per iteration (0: preset's)")
    p.add_argument("--sgd-steps", type=int, default=8, help="K per iteration (0: preset's)")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations (the first compiles)")
    p.add_argument("--repeats", type=int, default=5, help="timed iterations (median counts)")
    p.add_argument("--no-processes", dest="processes", action="store_false",
                   help="skip the 2-process rows")
    p.add_argument("--timeout", type=float, default=900, help="seconds per row")
    p.add_argument("--out", type=outfile.path_arg("--out"),
                   default=RESULTS_DIR / "scaling_cpu.json")
    p.add_argument("--plot", type=outfile.path_arg("--plot"), default=None,
                   help="PNG (default: --out with .png)")
    # the worker's own flags
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--coordinator", default=None, help=argparse.SUPPRESS)
    p.add_argument("--num-processes", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--process-id", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        args.device_counts = [int(n) for n in args.devices.split(",")]
    except ValueError:
        p.error(f"--devices: comma-separated integers expected, got {args.devices!r}")
    if not args.device_counts or min(args.device_counts) < 1 or 1 not in args.device_counts:
        p.error("--devices: positive counts including 1 (the base of the efficiencies)")
    for name in ("per_device", "global_batch", "repeats", "warmup"):  # warmup: the compile
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be >= 1")
    # The 2-process rows split the global batch over 2 devices too.
    bad = [n for n in sorted({*args.device_counts, *([2] if args.processes else [])})
           if args.global_batch % n]
    if bad:
        p.error(f"--global-batch {args.global_batch} does not divide by device counts {bad}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return _worker(args)
    rows = plan(args.device_counts, args.per_device, args.global_batch, args.processes)
    from c4jax.alphazero import config as config_lib

    try:  # here, not in each worker's traceback
        for row in rows:
            config_lib.validate(row_config(args, row.batch), row.total_devices)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    meta = {
        "config": args.config, "per_device": args.per_device, "global_batch": args.global_batch,
        "selfplay_steps": args.selfplay_steps, "sgd_steps": args.sgd_steps,
        "warmup": args.warmup, "repeats": args.repeats, "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "xla_flags": worker_xla_flags(os.environ.get("XLA_FLAGS", ""), 1),
    }
    measured = []
    for i, row in enumerate(rows, 1):
        print(f"[{i}/{len(rows)}] {row.kind}: {row.processes} process(es) x {row.devices} "
              f"device(s), B = {row.batch} ...", flush=True)
        try:
            m = run_row(args, row, args.timeout)
        except RuntimeError as err:  # the rows before are in --out already
            print(f"error: {err}", file=sys.stderr)
            if measured:
                print(f"the {len(measured)} rows measured before are in {args.out}",
                      file=sys.stderr)
            return 1
        print(f"    compile+first {m['compile_s']:.1f} s, iteration {m['seconds']:.2f} s, "
              f"{m['positions_per_second']:,.0f} positions/s", flush=True)
        measured.append(m)
        results = finish(rows[:len(measured)], measured)
        outfile.write_json(args.out, {"meta": {**meta, "load_average_end": os.getloadavg()},
                                      "rows": results}, name="--out", indent=1)
    print(table(results))
    png = args.plot or args.out.with_suffix(".png")
    plot(results, png)
    print(f"wrote {args.out} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
