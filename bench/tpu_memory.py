"""Does a preset fit one accelerator's memory? (default: `tpu` on a 16 GB v5e chip)

Two numbers, both computed on this machine without allocating the state:

* **training state**: the bytes of every array the run keeps between
  iterations (network parameters and BatchNorm statistics, the optimizer
  state, the replay buffer, the games in progress and their tails), from
  ``jax.eval_shape`` of the trainer's ``init``;
* **peak of the fused step**: XLA's memory analysis of the compiled
  ``iteration`` (arguments + outputs + temporaries - aliased donations +
  generated code), the program a TPU runs. It is compiled twice where it can be:

  - by **the TPU compiler itself**, for a compile-only v5e chip
    (``jax.experimental.topologies``; no TPU needed, only libtpu: ``pip install
    "c4jax[tpu]"`` or ``TPU_LIBRARY_PATH=/path/to/libtpu.so``). Its figures
    include the TPU's tiled layouts (padding of small dimensions) and the
    program's code in HBM, so they are the ones the verdict uses;
  - by the CPU compiler, always: an estimate (it fuses and lays out
    differently, and may widen bfloat16 to float32, which makes it the larger
    figure), and the verdict's basis where libtpu is missing.

The verdict asks for a margin: the peak (and the state) must stay below
``--budget`` (80%) of the device's memory.

Usage::

    JAX_PLATFORMS=cpu python -m bench.tpu_memory                  # tpu preset, 16 GB
    JAX_PLATFORMS=cpu python -m bench.tpu_memory --compiler cpu   # skip the TPU compile
    JAX_PLATFORMS=cpu python -m bench.tpu_memory --config tiny --out /tmp/m.json
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench import outfile

RESULTS_DIR = Path(__file__).resolve().parent / "results"
GB = 1e9
TOPOLOGY = "v5e:1x1"  # one v5e chip, as on Colab's v5e-1 runtime
# libtpu asks a cloud metadata server which TPU it runs on unless these are set;
# for compile-only devices there is none to ask (values for one v5e chip).
_DEVICELESS_ENV = {
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_ACCELERATOR_TYPE": "v5litepod-1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_WORKER_ID": "0",
}


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


def tpu_devices(topology: str = TOPOLOGY) -> list:
    """Compile-only devices of a TPU ``topology`` (real chips where JAX runs on a TPU).

    Raises:
        RuntimeError: libtpu is not installed (``JAX TPU support not installed``).
    """
    import jax

    if jax.default_backend() == "tpu":
        return jax.devices()
    from jax.experimental import topologies

    for name, value in _DEVICELESS_ENV.items():
        os.environ.setdefault(name, value)
    desc = topologies.get_topology_desc(
        topology, "tpu", chips_per_host_bounds=(1, 1, 1), num_slices=1
    )
    return desc.devices


def step_memory(run) -> dict[str, int]:
    """XLA's memory analysis of ``run``'s fused iteration, as it runs off the CPU."""
    import jax

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
    out["peak"] = (out["arguments"] + out["outputs"] + out["temporaries"] - out["aliased"]
                   + out["generated_code"])
    return out


def report(config_name: str, device_gb: float, budget: float, compiler: str = "auto",
           topology: str = TOPOLOGY) -> dict:
    """The state's bytes, the step's memory and the verdict for ``config_name``.

    ``compiler``: ``cpu``, ``tpu`` (libtpu required) or ``auto`` (both where
    libtpu is installed, else the CPU alone). The verdict uses the TPU figures
    when there are any.
    """
    import jax

    from c4jax.alphazero import config as config_lib
    from c4jax.alphazero import trainer as trainer_lib

    config = config_lib.load(config_name)
    targets = {}
    if compiler in ("auto", "cpu"):
        targets["cpu"] = jax.devices("cpu")[:1]
    tpu_note = None
    if compiler in ("auto", "tpu"):
        try:
            targets["tpu"] = tpu_devices(topology)[:1]  # one chip
        except RuntimeError as e:
            if compiler == "tpu":
                raise
            tpu_note = f"no TPU compile ({e}); the verdict uses the CPU estimate"
    state, steps, compile_s = None, {}, {}
    for target, devices in targets.items():
        run = trainer_lib.Trainer(config, trainer_lib.make_mesh(devices))
        state = state_breakdown(run.abstract_state())
        start = time.perf_counter()
        steps[target] = step_memory(run)
        compile_s[target] = time.perf_counter() - start
    judged_by = "tpu" if "tpu" in steps else "cpu"
    peak = steps[judged_by]["peak"]
    limit = budget * device_gb * GB
    out = {
        "config": config_name,
        "device_gb": device_gb,
        "budget": budget,
        "state_bytes": state,
        "step_bytes": steps,
        "compile_s": compile_s,
        "judged_by": judged_by,
        "fits": peak <= limit and state["total"] <= limit,
        "peak_fraction_of_device": peak / (device_gb * GB),
    }
    if "tpu" in targets:
        out["tpu_device"] = f"{targets['tpu'][0].device_kind} ({topology})"
    if tpu_note:
        out["note"] = tpu_note
    return out


_COMPILED_FOR = {"tpu": "the TPU compiler", "cpu": "the CPU compiler, an estimate"}


def format_report(r: dict) -> str:
    """The report as Markdown tables and a one-line verdict."""
    rows = [f"preset {r['config']} on one {r['device_gb']:g} GB device", "",
            "| training state | MB |", "|---|---:|"]
    rows += [f"| {k} | {v / 1e6:,.1f} |" for k, v in r["state_bytes"].items()]
    steps = r["step_bytes"]
    names = list(steps)
    rows += ["", "| fused step (XLA memory analysis) | "
             + " | ".join(f"{n.upper()} MB" for n in names) + " |",
             "|---|" + "---:|" * len(names)]
    for part in next(iter(steps.values())):
        rows.append(f"| {part} | " + " | ".join(f"{steps[n][part] / 1e6:,.1f}" for n in names)
                    + " |")
    if "tpu_device" in r:
        rows += ["", f"TPU: {r['tpu_device']}, compile-only (no chip needed)"]
    if "note" in r:
        rows += ["", r["note"]]
    verdict = "FITS" if r["fits"] else "DOES NOT FIT"
    judged = r["judged_by"]
    rows += ["", f"{verdict}: peak {steps[judged]['peak'] / GB:.2f} GB = "
             f"{r['peak_fraction_of_device']:.1%} of {r['device_gb']:g} GB "
             f"(budget {r['budget']:.0%}; {_COMPILED_FOR[judged]})"]
    return "\n".join(rows)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="tpu", help="preset or JSON path (default tpu)")
    p.add_argument("--device-gb", type=float, default=16.0, help="device memory (v5e: 16)")
    p.add_argument("--budget", type=float, default=0.8, help="fraction of it the peak may use")
    p.add_argument("--compiler", choices=("auto", "cpu", "tpu"), default="auto",
                   help="which compiler's memory analysis: auto = TPU (where libtpu is "
                        "installed) and CPU")
    p.add_argument("--topology", default=TOPOLOGY, help=f"TPU topology (default {TOPOLOGY})")
    p.add_argument("--out", type=outfile.path_arg("--out"),
                   default=RESULTS_DIR / "tpu_memory.json")
    args = p.parse_args(argv)
    if args.device_gb <= 0:
        p.error("--device-gb: must be > 0")
    if not 0 < args.budget <= 1:
        p.error("--budget: a fraction in (0, 1]")
    return args


def main(argv: list[str] | None = None) -> int:
    """Print the report and write it as JSON."""
    args = parse_args(argv)
    r = report(args.config, args.device_gb, args.budget, args.compiler, args.topology)
    print(format_report(r))
    outfile.write_json(args.out, r, name="--out", indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
