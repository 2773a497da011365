"""Does a preset fit one accelerator's memory? (default: `tpu` on a 16 GB v5e chip)

Two numbers, both computed on this machine without allocating the state:

* **training state**: the bytes of every array the run keeps between
  iterations (network parameters and BatchNorm statistics, the optimizer
  state, the replay buffer, the games in progress and their tails), from
  ``jax.eval_shape`` of the trainer's ``init``;
* **peak of the fused step**: XLA's memory analysis of the compiled
  ``iteration`` (arguments + outputs + temporaries - aliased donations), the
  program a TPU runs (the ``lax.scan`` SGD loop, not the CPU-only unrolled
  one). It is compiled here for the CPU backend, so it is an estimate: the TPU
  compiler fuses and lays out differently (and keeps bfloat16 where the CPU
  may widen it to float32, which makes the CPU figure the larger one).

The verdict asks for a margin: the peak must stay below ``--budget`` (80%) of
the device's memory.

Usage::

    JAX_PLATFORMS=cpu python -m bench.tpu_memory                     # tpu preset, 16 GB
    JAX_PLATFORMS=cpu python -m bench.tpu_memory --config tiny --out /tmp/m.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
GB = 1e9


def tree_bytes(tree) -> int:
    """Bytes of every array leaf of ``tree`` (shapes and dtypes only)."""
    import jax
    import numpy as np

    return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(tree))


def state_breakdown(abstract) -> dict[str, int]:
    """Bytes of the parts of an abstract ``TrainState``."""
    learner = abstract.learner
    parts = {
        "params": tree_bytes(learner.params),
        "batch_stats": tree_bytes(learner.batch_stats),
        "optimizer": tree_bytes(learner.opt_state),
        "replay_buffer": tree_bytes(abstract.replay),
        "selfplay_games_and_tails": tree_bytes(abstract.selfplay),
        "gating_copy": tree_bytes(abstract.best),
    }
    parts["other"] = tree_bytes(abstract) - sum(parts.values())
    parts["total"] = tree_bytes(abstract)
    return parts


def step_memory(run) -> dict[str, int]:
    """XLA's memory analysis of ``run``'s fused iteration, as it runs off the CPU."""
    import jax

    run._unroll = False  # the lax.scan SGD loop that GPUs and TPUs run
    abstract = run.abstract_state()
    key = jax.eval_shape(lambda: jax.random.key(0))
    compiled = run.iteration.lower(abstract, key).compile()
    m = compiled.memory_analysis()
    out = {
        "arguments": int(m.argument_size_in_bytes),
        "outputs": int(m.output_size_in_bytes),
        "temporaries": int(m.temp_size_in_bytes),
        "aliased": int(m.alias_size_in_bytes),
        "generated_code": int(m.generated_code_size_in_bytes),
    }
    out["peak"] = out["arguments"] + out["outputs"] + out["temporaries"] - out["aliased"]
    return out


def report(config_name: str, device_gb: float, budget: float) -> dict:
    """The state's bytes, the step's memory and the verdict for ``config_name``."""
    import jax

    from c4jax import config as config_lib
    from c4jax import trainer as trainer_lib

    config = config_lib.load(config_name)
    run = trainer_lib.Trainer(config, trainer_lib.make_mesh(jax.devices()[:1]))  # one chip
    state = state_breakdown(run.abstract_state())
    start = time.perf_counter()
    step = step_memory(run)
    compile_s = time.perf_counter() - start
    limit = budget * device_gb * GB
    return {
        "config": config_name,
        "device_gb": device_gb,
        "budget": budget,
        "state_bytes": state,
        "step_bytes": step,
        "compile_s": compile_s,
        "fits": step["peak"] <= limit and state["total"] <= limit,
        "peak_fraction_of_device": step["peak"] / (device_gb * GB),
    }


def format_report(r: dict) -> str:
    rows = [f"preset {r['config']} on one {r['device_gb']:g} GB device", "",
            "| training state | MB |", "|---|---:|"]
    rows += [f"| {k} | {v / 1e6:,.1f} |" for k, v in r["state_bytes"].items()]
    rows += ["", "| fused step (XLA memory analysis, compiled for the CPU) | MB |", "|---|---:|"]
    rows += [f"| {k} | {v / 1e6:,.1f} |" for k, v in r["step_bytes"].items()]
    verdict = "FITS" if r["fits"] else "DOES NOT FIT"
    rows += ["", f"{verdict}: peak {r['step_bytes']['peak'] / GB:.2f} GB = "
             f"{r['peak_fraction_of_device']:.0%} of {r['device_gb']:g} GB "
             f"(budget {r['budget']:.0%})"]
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="tpu", help="preset or JSON path (default tpu)")
    p.add_argument("--device-gb", type=float, default=16.0, help="device memory (v5e: 16)")
    p.add_argument("--budget", type=float, default=0.8, help="fraction of it the peak may use")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "tpu_memory.json")
    args = p.parse_args(argv)
    if args.device_gb <= 0:
        p.error("--device-gb: must be > 0")
    if not 0 < args.budget <= 1:
        p.error("--budget: a fraction in (0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    r = report(args.config, args.device_gb, args.budget)
    print(format_report(r))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(r, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
