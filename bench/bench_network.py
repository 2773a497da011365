"""The network's achieved GFLOP/s beside this machine's matmul rate.

For each batch size B the benchmark times, alternating and after a warm-up:

* **forward**: the inference pass self-play runs (``network.make_apply_fn``:
  BatchNorm folded into the convolutions);
* **forward, module**: the Flax module's own inference pass (convolution, then
  BatchNorm with the running statistics): what folding saves;
* **train**: the gradient of the training loss (BatchNorm in training mode,
  policy cross-entropy + value MSE), what one SGD step spends on the network,
  with XLA's own convolution gradients (the trainer on a CPU builds the
  network with ``loop_grads``, whose convolution gradients the **conv** rows
  time as it computes them);
* **train forward**: that loss alone, without its gradient: the forward part
  of ``train`` (the rest is the backward pass);
* **conv**, **conv input grad**, **conv weight grad**: one of the residual
  tower's 3x3 convolutions (``[B, 6, 7, C] -> [B, 6, 7, C]``) and each of its two
  gradients as the SGD steps compute them on a CPU (``c4jax.alphazero.conv``),
  each inside a ``lax.fori_loop`` of ``CONV_LOOP`` calls as the SGD steps run
  them in a ``lax.scan`` (the figures are per call);
* **im2col matmul**: one ``[B x 42, 9C] x [9C, C]`` float32 product, the
  arithmetic of one 3x3 convolution written as a single matmul;
* **2048^3 matmul**: a large square product, near the machine's peak.

FLOPs are XLA's own count for the compiled program (``cost_analysis``; for a
3x3 'SAME' convolution it leaves out the taps that fall on the padding, about
a sixth on a 6x7 board), so GFLOP/s is the arithmetic the program must do per
second (the folded forward pass does slightly less: no normalisation). Runs with
the XLA flags c4jax's command lines use (``c4jax.run.xla_flags``: the YNNPACK path;
``C4JAX_FAST_CPU=0`` or a user's own ``XLA_FLAGS`` to compare). Every call ends
in ``jax.block_until_ready``; the median of
``--repeats`` counts. The distance between the network's rate and the matmul
rates is what a faster convolution could win (issue: a network near the
machine's matmul rate).

Usage::

    JAX_PLATFORMS=cpu python -m bench.bench_network                  # cpu preset's 3x32
    JAX_PLATFORMS=cpu python -m bench.bench_network --config strong  # 5x48
    JAX_PLATFORMS=cpu taskset -c 0 python -m bench.bench_network --batches 128,256,1024  # one core
    python -m bench.bench_network --config tiny --batches 8 --repeats 1 --out /tmp/n.json
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

from bench import outfile

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CONV_LOOP = 20  # calls of one convolution (or gradient) a timed program


def flops_of(jitted, *args) -> float:
    """XLA's FLOP count of ``jitted(*args)`` once compiled."""
    analysis = jitted.lower(*args).compile().cost_analysis()
    if isinstance(analysis, list):  # older jax: one dict per computation
        analysis = analysis[0]
    return float(analysis["flops"])


def make_cases(network_config, batch: int, seed: int = 0) -> dict:
    """``name -> (jitted function, args)`` of the timed programs at batch ``batch``."""
    import jax
    import jax.numpy as jnp
    import optax

    from c4jax.alphazero import network

    net = network.make_network(network_config)
    variables = network.init_variables(net, jax.random.key(seed))
    keys = jax.random.split(jax.random.key(seed + 1), 6)
    obs = (jax.random.uniform(keys[0], (batch, 6, 7, 2)) < 0.3).astype(jnp.float32)
    policy = jax.nn.softmax(jax.random.normal(keys[1], (batch, 7)))
    value = jax.random.uniform(keys[2], (batch,), minval=-1, maxval=1)

    def loss(params, batch_stats):
        (logits, v), updates = net.apply(
            {"params": params, "batch_stats": batch_stats}, obs, train=True,
            mutable=["batch_stats"],
        )
        total = optax.softmax_cross_entropy(logits, policy).mean() + jnp.mean((v - value) ** 2)
        return total, updates

    c = network_config.channels
    conv_keys = jax.random.split(jax.random.key(seed + 2), 3)  # the network's keys stay its own
    x = jax.random.normal(conv_keys[0], (batch, 6, 7, c))
    kernel = jax.random.normal(conv_keys[1], (3, 3, c, c)) * 0.1
    dy = jax.random.normal(conv_keys[2], (batch, 6, 7, c))
    a = jax.random.normal(keys[3], (batch * 42, 9 * c))
    b = jax.random.normal(keys[4], (9 * c, c))
    big = jax.random.normal(keys[5], (2048, 2048))
    matmul = jax.jit(lambda x, y: x @ y)
    return {
        "forward": (jax.jit(network.make_apply_fn(net)), (variables, obs)),
        "forward_module": (jax.jit(lambda v, x: net.apply(v, x, train=False)), (variables, obs)),
        "train": (jax.jit(jax.grad(loss, has_aux=True)),
                  (variables["params"], variables["batch_stats"])),
        "train_forward": (jax.jit(loss), (variables["params"], variables["batch_stats"])),
        **conv_cases(x, kernel, dy),
        "im2col_matmul": (matmul, (a, b)),
        "matmul_2048": (matmul, (big, big)),
    }


def conv_forward(x, kernel):
    """[B, H, W, C] 'SAME' 3x3 convolution with the gradients c4jax trains with on a CPU."""
    from c4jax.alphazero import conv

    return conv.conv2d(x, kernel, ((1, 1), (1, 1)))


def conv_cases(x, kernel, dy) -> dict:
    """``name -> (jitted, args)``: one 3x3 'SAME' convolution of ``x`` [B, H, W, C] by
    ``kernel`` [3, 3, C, C] and its input and weight gradients for the output
    gradient ``dy`` [B, H, W, C], each ``CONV_LOOP`` times in a ``lax.fori_loop``
    whose carry changes every call (so XLA cannot hoist the work out of the loop).
    ``measure`` divides a program's time by ``CONV_LOOP`` (the loop's bookkeeping,
    a sum and three elementwise updates a call, included) and counts the FLOPs of
    one forward convolution for each (a gradient does the same arithmetic)."""
    import jax
    import jax.numpy as jnp

    ops = {
        "conv": lambda x, w, dy: conv_forward(x, w),
        "conv_input_grad": lambda x, w, dy: jax.vjp(lambda x: conv_forward(x, w), x)[1](dy)[0],
        "conv_weight_grad": lambda x, w, dy: jax.vjp(lambda w: conv_forward(x, w), w)[1](dy)[0],
    }

    def looped(op):
        def program(x, w, dy):
            def body(_, carry):
                x, w, dy, total = carry
                s = jnp.sum(op(x, w, dy))
                # every input changes with the last result: nothing is loop-invariant
                return x + 1e-9 * s, w + 1e-9 * s, dy - 1e-9 * s, total + s
            return jax.lax.fori_loop(0, CONV_LOOP, body, (x, w, dy, jnp.float32(0)))[3]
        return jax.jit(program)

    return {name: (looped(op), (x, kernel, dy)) for name, op in ops.items()}


def time_cases(cases: dict, repeats: int) -> dict:
    """Median seconds of each case over ``repeats`` rounds that alternate the cases
    (the order reversed every other round), after one untimed call of each."""
    import jax

    for fn, args in cases.values():
        jax.block_until_ready(fn(*args))
    times = {name: [] for name in cases}
    names = list(cases)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            fn, args = cases[name]
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def measure(network_config, batch: int, repeats: int) -> dict:
    """One row: seconds, XLA FLOPs and GFLOP/s of each case at batch ``batch``."""
    import jax

    cases = make_cases(network_config, batch)
    seconds = time_cases(cases, repeats)
    _, (x, kernel, _) = cases["conv"]
    conv_flops = flops_of(jax.jit(conv_forward), x, kernel)  # a gradient does the same
    row = {"batch": batch}
    for name, (fn, args) in cases.items():
        if name.startswith("conv"):  # per call of the loop
            per_call, flops = seconds[name] / CONV_LOOP, conv_flops
        else:
            per_call, flops = seconds[name], flops_of(fn, *args)
        row[name] = {"seconds": per_call, "flops": flops,
                     "gflops_per_s": flops / per_call / 1e9}
    return row


def table(rows: list[dict]) -> str:
    """Markdown table of ``measure`` rows."""
    lines = ["| B | forward ms | forward GFLOP/s | module forward ms | module GFLOP/s "
             "| train ms | train GFLOP/s "
             "| im2col matmul GFLOP/s | 2048^3 matmul GFLOP/s | forward / im2col |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f, t, m, big = r["forward"], r["train"], r["im2col_matmul"], r["matmul_2048"]
        u = r["forward_module"]
        lines.append(
            f"| {r['batch']} | {f['seconds'] * 1e3:.1f} | {f['gflops_per_s']:.1f} "
            f"| {u['seconds'] * 1e3:.1f} | {u['gflops_per_s']:.1f} "
            f"| {t['seconds'] * 1e3:.1f} | {t['gflops_per_s']:.1f} | {m['gflops_per_s']:.1f} "
            f"| {big['gflops_per_s']:.1f} | {f['gflops_per_s'] / m['gflops_per_s']:.2f} |"
        )
    return "\n".join(lines)


def training_table(rows: list[dict]) -> str:
    """Markdown table of where ``measure`` rows' training step goes: its forward and
    backward parts, and one convolution with each of its gradients."""
    lines = ["| B | train ms | train forward ms | backward ms | conv ms | conv GFLOP/s "
             "| input grad ms | input grad GFLOP/s | weight grad ms | weight grad GFLOP/s |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        train, forward = r["train"]["seconds"], r["train_forward"]["seconds"]
        cells = [f"{r['batch']}", f"{train * 1e3:.1f}", f"{forward * 1e3:.1f}",
                 f"{(train - forward) * 1e3:.1f}"]
        for case in ("conv", "conv_input_grad", "conv_weight_grad"):
            cells += [f"{r[case]['seconds'] * 1e3:.2f}", f"{r[case]['gflops_per_s']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="cpu", help="preset or JSON path whose network is timed")
    p.add_argument("--batches", default="256,1024,4096", help="batch sizes, comma-separated")
    p.add_argument("--repeats", type=int, default=9, help="timed rounds (median counts)")
    p.add_argument("--out", type=outfile.path_arg("--out"),
                   default=RESULTS_DIR / "network_cpu.json")
    args = p.parse_args(argv)
    try:
        args.batch_sizes = [int(b) for b in args.batches.split(",")]
    except ValueError:
        p.error(f"--batches: comma-separated integers expected, got {args.batches!r}")
    if min(args.batch_sizes) < 1:
        p.error("--batches: sizes must be >= 1")
    if args.repeats < 1:
        p.error("--repeats: must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from c4jax.run import xla_flags

    xla_flags.enable_fast_cpu()  # before JAX starts: time what the command lines run
    from bench import bench_env
    from c4jax.alphazero import config as config_lib

    network_config = config_lib.load(args.config).network
    rows = []
    for batch in args.batch_sizes:
        print(f"B = {batch} ...", flush=True)
        rows.append(measure(network_config, batch, args.repeats))
    print(table(rows))
    print()
    print(training_table(rows))
    meta = {"config": args.config, "network": dataclasses.asdict(network_config),
            "repeats": args.repeats, "device": bench_env.device_info(("flax",)),
            "load_average": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}
    outfile.write_json(args.out, {"meta": meta, "rows": rows}, name="--out", indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
