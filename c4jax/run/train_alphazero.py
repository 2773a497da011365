"""AlphaZero's training run as a library call: ``train_and_evaluate(config, workdir)``.

``python -m c4jax.train`` (``c4jax train``) is its command line; the Colab
notebook and the tests call it directly. The run directory holds
``config.json``, ``metrics.jsonl``, TensorBoard event files (``tb/``) and Orbax
checkpoints (``checkpoints/``); a run continues bit-for-bit from its newest good
checkpoint, a damaged one is moved to ``damaged-checkpoints/``, and a NaN/inf
loss stops the run without saving the broken state. In a multi-process run
(``c4jax.run.distributed``) process 0 alone locks the directory and logs; all
write the checkpoints together, and each evaluates on its own copy of the network.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import jax

from c4jax.alphazero import config as config_lib
from c4jax.alphazero import search, trainer
from c4jax.alphazero.config import Config
from c4jax.judge import periodic
from c4jax.run import distributed, rundir, runlog
from c4jax.run import loop as runloop
from c4jax.store import checkpoints

NonFiniteError = runloop.NonFiniteError  # the loss or parameters became NaN/inf

# Fields a checkpoint's arrays depend on: they cannot change when resuming.
_STATE_FIELDS = (
    "network.num_blocks",
    "network.channels",
    "network.kernel_size",
    "network.value_channels",
    "train.selfplay_batch",
    "train.replay_capacity",
    "train.optimizer",
)


def check_compatible(stored: Config, requested: Config) -> None:
    """Raises ValueError naming each field that a resumed checkpoint cannot change."""
    config_lib.check_unchanged(stored, requested, _STATE_FIELDS)


def _resume_hint(workdir: Path) -> str:
    return f"python -m c4jax.train --workdir {workdir}"


def _restore(manager, run: trainer.Trainer, config: Config, workdir: Path):
    """The newest good checkpoint's state and step, or (None, 0) for a new run."""
    mover = jax.process_index() == 0  # one process moves damaged checkpoints aside
    resumed = checkpoints.restore_latest_good(
        manager,
        run.abstract_state(),
        quarantine=workdir / checkpoints.QUARANTINE_DIR if mover else None,
        check_config=lambda stored: check_compatible(stored, config),
    )
    if resumed is None:
        return None, 0
    return run.from_checkpoint(resumed.state), resumed.step


def train_and_evaluate(
    config: Config,
    workdir: str | Path,
    *,
    progress: bool | runlog.Mode = False,
    stop_after: int | None = None,
    corrupt=None,
) -> dict:
    """Trains (or continues) the run in ``workdir`` up to ``config.train.num_iterations``.

    Args:
        config: the run's configuration (validated here).
        workdir: run directory; the newest good checkpoint there is continued
            (a damaged one is moved to ``damaged-checkpoints/`` with a warning).
        progress: ``bar``, ``lines`` or ``off``; True picks ``bar`` on a
            terminal and ``lines`` otherwise. Any mode but ``off`` also prints
            what the run does (resuming, compiling, nothing to do, stopping).
        stop_after: stop (saving a checkpoint) after this many iterations of
            this call, as a Ctrl-C would; for tests of interruption.
        corrupt: for tests of the NaN guard: ``corrupt(state, done) -> state``
            applied to the state before each iteration (``done`` iterations done).

    Returns:
        A summary: ``step``, ``workdir``, the last ``metrics`` and ``eval``, the
        final ``state`` (a ``TrainState``; the restored one if nothing was done), ``done``
        (iterations this call did) and ``interrupted`` (stopped by Ctrl-C).

    Raises:
        ValueError: an unusable run directory (path, lock, incompatible or
            all-damaged checkpoints), before anything compiles.
        NonFiniteError: the loss or parameters became NaN/inf; the last good
            checkpoint is kept and nothing later is saved.
    """
    if config.distributed and not jax.distributed.is_initialized():
        distributed.initialize()  # before anything asks JAX about devices
    writer = jax.process_index() == 0  # one process writes the logs
    mode = runlog.default_mode() if progress is True else (progress or "off")
    mode = mode if writer else "off"
    say = print if mode != "off" else (lambda *a, **k: None)
    config_lib.validate(config, num_devices=jax.device_count())
    workdir = rundir.prepare(Path(workdir))
    with rundir.lock(workdir) if writer else contextlib.nullcontext():
        return _train(config, workdir, mode, say, writer, stop_after, corrupt)


def _train(config, workdir, mode, say, writer, stop_after, corrupt) -> dict:
    total = config.train.num_iterations
    manager = checkpoints.make_manager(workdir, keep=config.keep_checkpoints)
    run = trainer.Trainer(config)
    try:
        state, step = _restore(manager, run, config, workdir)
    except BaseException:
        manager.close()
        raise
    summary = {"step": step, "workdir": str(workdir), "metrics": {}, "eval": {},
               "state": state, "done": 0, "interrupted": False}
    if step >= total and state is not None:
        manager.close()
        say(f"nothing to do: {workdir} has done {step} iterations and "
            f"--train.num-iterations is {total}; raise it to train on.")
        return summary
    if writer:
        config_lib.save(config, workdir / "config.json")
    if state is None:
        state = run.init(trainer.run_keys(config.seed)[0])
    else:
        say(f"resuming {workdir} from iteration {step} of {total}")
    act = search.make_alphazero_act(
        run.apply_fn, config.search, num_simulations=config.eval.num_simulations
    )
    eval_key = trainer.run_keys(config.seed)[2]
    log = runlog.RunLog(workdir, total, step, mode) if writer else None

    def iterate(state, done):
        if corrupt is not None:
            state = corrupt(state, done)
        state, device_metrics = run.iteration(state, trainer.iteration_key(config.seed, done))
        return state, {k: float(v) for k, v in jax.device_get(device_metrics).items()}

    def evaluate(state, step):
        variables = _process_local(run.variables(state))
        match_key, gate_key = jax.random.split(jax.random.fold_in(eval_key, step))
        results = periodic.evaluate(act, variables, match_key, config.eval)
        if config.eval.gating:
            gate = periodic.gating_match(
                act, variables, _process_local(state.best), gate_key,
                num_games=config.eval.gating_games,
            )
            results["gating/score"] = gate.score
            results["gating/promoted"] = float(gate.score > config.eval.gating)
            if gate.score > config.eval.gating:
                state = run.promote(state)
        return state, results

    summary.update(runloop.run_iterations(
        state=state, step=step, total=total, iterate=iterate, evaluate=evaluate,
        eval_every=config.eval.every, manager=manager, config=config,
        checkpoint_every=config.checkpoint_every, log=log,
        positions_per_iteration=config.train.selfplay_batch * config.train.selfplay_steps,
        resume_hint=_resume_hint(workdir), say=say, stop_after=stop_after,
        to_checkpoint=run.to_checkpoint,
    ))
    return summary


def _process_local(tree):
    """This process's copy of replicated (global) arrays, for the evaluation.

    Every process evaluates on its own copy, with the same keys, so all reach the
    same scores and gating decisions without talking to each other; a global
    array would make every evaluation game a program over all the processes.
    """
    return jax.tree.map(lambda x: x.addressable_data(0), tree)
