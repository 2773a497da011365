"""Where a training run's start-up goes: building the trainer, tracing and lowering
the fused iteration, XLA's compile (or reading it back from the persistent
compilation cache), and the first iterations.

    python -m bench.startup --config cpu          # twice: the second reads the cache
    python -m bench.startup --config cpu --json bench/results/startup_cpu.json

It turns on the compilation cache and XLA:CPU's fast path as the command lines do
(``c4jax.run.compile_cache``, ``c4jax.run.xla_flags``), and says whether the
compiled iteration came from the cache. Run it alone on the machine: every figure
is a wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from bench import outfile

_STARTED = time.perf_counter()

PHASES = ("imports", "trainer", "init", "trace", "lower", "compile", "first", "second")
LABELS = {
    "imports": "importing jax and c4jax",
    "trainer": "building the trainer",
    "init": "the initial state (compiled and run)",
    "trace": "tracing the iteration",
    "lower": "lowering it to StableHLO",
    "compile": "XLA compile, or reading it from the cache",
    "first": "the first iteration",
    "second": "the second iteration",
}


def measure(config_name: str) -> dict:
    """The start-up phases of ``config_name``'s training iteration in this process.

    Returns:
        ``{"seconds": {phase: s}, "cache_hit": bool, "cache": str}``; ``imports`` is
        the time from this module's import to the end of the imports (in a fresh
        process, jax's and c4jax's).
    """
    import jax
    from jax import monitoring

    from c4jax.alphazero import config as config_lib
    from c4jax.alphazero import trainer
    from c4jax.run import compile_cache, xla_flags

    xla_flags.enable_fast_cpu()
    cache = compile_cache.enable()
    hits = []
    monitoring.register_event_listener(
        lambda name, **_: hits.append(name) if name == "/jax/compilation_cache/cache_hits"
        else None)
    seconds = {"imports": time.perf_counter() - _STARTED}

    def timed(phase, fn):
        start = time.perf_counter()
        out = jax.block_until_ready(fn())
        seconds[phase] = time.perf_counter() - start
        return out

    config = config_lib.load(config_name)
    run = timed("trainer", lambda: trainer.Trainer(config))
    state = timed("init", lambda: run.init(trainer.run_keys(config.seed)[0]))
    key = trainer.iteration_key(config.seed, 0)
    traced = timed("trace", lambda: run.iteration.trace(state, key))
    lowered = timed("lower", traced.lower)
    before = len(hits)
    compiled = timed("compile", lowered.compile)
    hit = len(hits) > before
    length = jax.numpy.int32(config.train.num_iterations)
    state, _ = timed("first", lambda: compiled(state, key, length))
    timed("second", lambda: compiled(state, trainer.iteration_key(config.seed, 1), length))
    return {"seconds": seconds, "cache_hit": hit, "cache": cache}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="cpu", help="a preset name or a JSON path")
    parser.add_argument("--json", type=outfile.path_arg("--json"),
                        help="also write the figures here")
    args = parser.parse_args(argv)
    from c4jax.alphazero import config as config_lib

    try:
        config_lib.load(args.config)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = measure(args.config)
    seconds = result["seconds"]
    for phase in PHASES:
        print(f"{LABELS[phase]:<44} {seconds[phase]:7.1f} s")
    print(f"compiled iteration read from the cache: {'yes' if result['cache_hit'] else 'no'}"
          f" ({result['cache']})")
    if args.json:
        from bench import bench_env

        result.update(config=args.config, command=bench_env.command_line("bench.startup", argv),
                      device={**bench_env.device_info(("mctx", "flax")),
                              "load_average_after": os.getloadavg()})
        outfile.write_json(args.json, result, name="--json", indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
