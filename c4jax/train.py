"""``python -m c4jax.train``: the thin Python loop around the fused step.

Usage:
    python -m c4jax.train                      # preset for the hardware found
    python -m c4jax.train --config tiny        # or configs/tiny.json
    python -m c4jax.train --config cpu --train.num-iterations 50 --seed 3
    python -m c4jax.train --workdir runs/X     # continue runs/X if it has checkpoints
    python -m c4jax.train --resume             # continue the newest run in runs/

A run directory holds ``config.json``, ``metrics.jsonl``, TensorBoard event
files (``tb/``) and Orbax checkpoints (``checkpoints/``). Ctrl-C saves a
checkpoint and exits; running again with the same ``--workdir`` continues
bit-for-bit where it stopped.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import signal
import sys
import time
from pathlib import Path

import jax

from c4jax import checkpoints, trainer
from c4jax import config as config_lib
from c4jax.config import Config
from c4jax.judge import agents, periodic

RUNS_DIR = Path("runs")
# Fields a checkpoint's arrays depend on: they cannot change when resuming.
_STATE_FIELDS = (
    "network.num_blocks",
    "network.channels",
    "network.kernel_size",
    "train.selfplay_batch",
    "train.replay_capacity",
    "train.optimizer",
)


def _field(config: Config, dotted: str):
    value = config
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def check_compatible(stored: Config, requested: Config) -> None:
    """Raises ValueError naming each field that a resumed checkpoint cannot change."""
    problems = [
        f"{name} is {_field(stored, name)!r} in the checkpoint but {_field(requested, name)!r} now"
        for name in _STATE_FIELDS
        if _field(stored, name) != _field(requested, name)
    ]
    if problems:
        raise ValueError(
            "incompatible checkpoint in the run directory: "
            + "; ".join(problems)
            + ". Use a new --workdir, or drop those overrides."
        )


class _StopFlag:
    """Turns the first Ctrl-C into a request to save and stop; the second one kills."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nCtrl-C: saving a checkpoint, then stopping (Ctrl-C again to abort).")

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._previous)
        return False


def _step_of(line: str) -> float:
    """The step of a metrics.jsonl line; a torn (half-written) line counts as newest."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return float("inf")


class _Logger:
    """metrics.jsonl, TensorBoard event files and the progress bar."""

    def __init__(
        self, workdir: Path, total: int, initial: int, progress: bool, *, enabled: bool = True
    ):
        from tensorboardX import SummaryWriter
        from tqdm import tqdm

        self.enabled = enabled
        if not enabled:
            return
        # A resumed run repeats the steps after its last checkpoint: drop their
        # old records so each step is logged once (purge_step does it for TB).
        path = workdir / "metrics.jsonl"
        if path.exists():
            kept = [line for line in path.read_text().splitlines() if _step_of(line) <= initial]
            path.write_text("".join(line + "\n" for line in kept))
        self._jsonl = path.open("a")
        self._tb = SummaryWriter(str(workdir / "tb"), purge_step=initial + 1 if initial else None)
        self._bar = tqdm(
            total=total, initial=initial, disable=not progress, unit="it", dynamic_ncols=True
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        self._jsonl.write(json.dumps({"step": step, **metrics}) + "\n")
        self._jsonl.flush()
        for name, value in metrics.items():
            self._tb.add_scalar(name, value, step)
        shown = ("loss", "policy_entropy", "game_length", "win_rate/random", "win_rate/lookahead")
        self._bar.set_postfix({k: f"{metrics[k]:.3g}" for k in shown if k in metrics})
        self._bar.update(1)

    def close(self) -> None:
        if not self.enabled:
            return
        self._bar.close()
        self._tb.close()
        self._jsonl.close()


def train_and_evaluate(
    config: Config, workdir: str | Path, *, progress: bool = True, stop_after: int | None = None
) -> dict:
    """Trains (or continues) the run in ``workdir`` up to ``config.train.num_iterations``.

    Args:
        config: the run's configuration (validated here).
        workdir: run directory; a checkpoint there is continued.
        progress: show the progress bar.
        stop_after: stop (saving a checkpoint) after this many iterations of
            this call, as a Ctrl-C would; for tests of interruption.

    Returns:
        A summary: ``step``, ``workdir``, the last ``metrics`` and ``eval``, and
        the final ``state`` (a ``TrainState``).
    """
    if config.distributed and not jax.distributed.is_initialized():
        jax.distributed.initialize()  # before anything asks JAX about devices
    writer = jax.process_index() == 0  # one process writes the logs
    config_lib.validate(config, num_devices=jax.device_count())
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    manager = checkpoints.make_manager(workdir, keep=config.keep_checkpoints)
    latest = manager.latest_step()
    if latest is not None:
        check_compatible(checkpoints.restore_config(manager, latest), config)
    if writer:
        config_lib.save(config, workdir / "config.json")

    run = trainer.Trainer(config)
    if latest is not None:
        state = checkpoints.restore_state(manager, latest, run.abstract_state())
    else:
        state = run.init(trainer.run_keys(config.seed)[0])
    step = int(state.step)
    act = agents.make_alphazero_act(
        run.apply_fn, config.search, num_simulations=config.eval.num_simulations
    )
    eval_key = trainer.run_keys(config.seed)[2]
    total = config.train.num_iterations
    logger = _Logger(workdir, total, step, progress and step < total, enabled=writer)
    metrics: dict = {}
    last_eval: dict = {}
    started = step
    try:
        with _StopFlag() as stop:
            while step < config.train.num_iterations:
                t0 = time.perf_counter()
                key = trainer.iteration_key(config.seed, step)
                state, device_metrics = run.iteration(state, key)
                metrics = {k: float(v) for k, v in jax.device_get(device_metrics).items()}
                step += 1
                metrics["seconds"] = time.perf_counter() - t0
                metrics["positions_per_second"] = (
                    config.train.selfplay_batch * config.train.selfplay_steps / metrics["seconds"]
                )
                last_step = step == config.train.num_iterations
                score = None  # the evaluation score of this step, if evaluated
                if config.eval.every and (step % config.eval.every == 0 or last_step):
                    variables = run.variables(state)
                    match_key, gate_key = jax.random.split(jax.random.fold_in(eval_key, step))
                    last_eval = periodic.evaluate(act, variables, match_key, config.eval)
                    if config.eval.gating:
                        gate = periodic.gating_match(
                            act, variables, state.best, gate_key,
                            num_games=config.eval.gating_games,
                        )
                        last_eval["gating/score"] = gate.score
                        last_eval["gating/promoted"] = float(gate.score > config.eval.gating)
                        if gate.score > config.eval.gating:
                            state = run.promote(state)
                    score = last_eval["score"]
                    metrics.update(last_eval)
                logger.log(step, metrics)
                interrupted = stop.requested or (
                    stop_after is not None and step - started >= stop_after
                )
                if step % config.checkpoint_every == 0 or last_step or interrupted:
                    checkpoints.save(manager, step, state, config, score)
                if interrupted:
                    break
    finally:
        manager.wait_until_finished()
        manager.close()
        logger.close()
    return {
        "step": step, "workdir": str(workdir), "metrics": metrics, "eval": last_eval,
        "state": state,
    }


def default_preset() -> str:
    """The preset for the hardware found: cpu, gpu or tpu."""
    backend = jax.default_backend()
    return {"gpu": "gpu", "tpu": "tpu"}.get(backend, "cpu")


def _newest_run() -> Path:
    runs = sorted(p for p in RUNS_DIR.glob("*") if (p / "config.json").exists())
    if not runs:
        raise ValueError(f"--resume: no run directory with a config.json under {RUNS_DIR}/")
    return runs[-1]


def parse_args(argv: list[str]) -> tuple[Config, Path]:
    """Reads ``--config``, ``--workdir``, ``--resume`` and per-field overrides.

    A run directory that already holds a ``config.json`` supplies the defaults
    (so resuming needs no flags); otherwise the preset does.
    """
    import tyro

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    pre.add_argument("--workdir", default=None)
    pre.add_argument("--resume", action="store_true")
    known, rest = pre.parse_known_args(argv)
    if known.resume and known.workdir is None:
        known.workdir = str(_newest_run())
    workdir = Path(known.workdir) if known.workdir else (
        RUNS_DIR / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    stored = workdir / "config.json"
    if known.config is None and stored.exists():
        base = config_lib.load(str(stored))
        source = f"the run directory's {stored}"
    else:
        name = known.config or default_preset()
        base = config_lib.load(name)
        source = f"preset {name}"
    if known.resume and not stored.exists():
        raise ValueError(f"--resume: {workdir} holds no run (no config.json)")
    description = (
        "Train AlphaZero for Connect Four.\n\n"
        f"Defaults below come from {source}.\n"
        "Extra flags: --config NAME|PATH (presets: "
        + ", ".join(config_lib.preset_names())
        + "), --workdir DIR (default runs/<date-time>; continues a run there), "
        "--resume (continue --workdir, or the newest run in runs/)."
    )
    config = tyro.cli(
        Config, default=base, args=rest, description=description, prog="python -m c4jax.train"
    )
    return config, workdir


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--distributed" in argv:
        jax.distributed.initialize()  # must precede every device query below
    try:
        config, workdir = parse_args(argv)
        config_lib.validate(config, num_devices=jax.device_count())
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    devices = f"{jax.device_count()} x {jax.devices()[0].platform}"
    print(f"run directory: {workdir}  (devices: {devices})")
    print(json.dumps(dataclasses.asdict(config)))
    if workdir.exists() and not workdir.is_dir():
        print(f"error: --workdir {workdir}: exists and is not a directory", file=sys.stderr)
        return 2
    try:
        summary = train_and_evaluate(config, workdir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    final = ", ".join(f"{k} {v:.3f}" for k, v in summary["eval"].items())
    print(f"stopped at iteration {summary['step']}; last evaluation: {final or 'none'}")
    print(f"outputs in {workdir}; view with: tensorboard --logdir {workdir / 'tb'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
