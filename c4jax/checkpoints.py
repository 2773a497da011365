"""Orbax checkpoints of a run: the whole ``TrainState`` plus the config as JSON.

Keeps the latest ``keep`` checkpoints and, besides them, the best one by
evaluation score. Saves are asynchronous; ``close`` waits for them.
"""

from __future__ import annotations

from pathlib import Path

import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies

from c4jax import config as config_lib

SCORE = "score"  # metric that ranks checkpoints; higher is better


def make_manager(workdir: Path, *, keep: int) -> ocp.CheckpointManager:
    """A manager for ``workdir/checkpoints`` that keeps the latest and the best."""
    preservation = policies.AnyPreservationPolicy(
        [
            policies.LatestN(n=keep),
            policies.BestN(
                get_metric_fn=lambda metrics: metrics[SCORE],
                reverse=False,
                n=1,
                keep_checkpoints_without_metrics=False,
            ),
        ]
    )
    options = ocp.CheckpointManagerOptions(
        preservation_policy=preservation,
        # best_fn makes Orbax write each checkpoint's metrics to disk, so that
        # a later process (a resume, Player) still knows which one is best.
        best_fn=lambda metrics: metrics[SCORE],
        best_mode="max",
        enable_async_checkpointing=True,
        create=True,
    )
    return ocp.CheckpointManager(
        Path(workdir).absolute() / "checkpoints", options=options, item_names=("state", "config")
    )


def open_for_reading(workdir: Path) -> ocp.CheckpointManager:
    """A read-only manager of ``workdir/checkpoints`` that knows the scores."""
    options = ocp.CheckpointManagerOptions(
        read_only=True, best_fn=lambda metrics: metrics[SCORE], best_mode="max"
    )
    return ocp.CheckpointManager(
        Path(workdir).absolute() / "checkpoints", options=options, item_names=("state", "config")
    )


def save(
    manager: ocp.CheckpointManager, step: int, state, config, score: float | None
) -> None:
    """Starts an async save of ``state`` and ``config`` at ``step`` (replacing one there).

    ``score`` is the evaluation score of this very step, or None if the step
    was not evaluated (then only the "latest" rule keeps it).
    """
    if step in manager.all_steps():
        manager.wait_until_finished()
        manager.delete(step)
    manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            config=ocp.args.JsonSave(config_lib.to_dict(config)),
        ),
        metrics=None if score is None else {SCORE: float(score)},
        force=True,
    )


def restore_config(manager: ocp.CheckpointManager, step: int) -> config_lib.Config:
    """The config stored with checkpoint ``step``."""
    restored = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
    return config_lib.from_dict(restored.config)


def restore_state(manager: ocp.CheckpointManager, step: int, abstract_state):
    """The ``TrainState`` of checkpoint ``step``, placed as ``abstract_state`` says."""
    try:
        restored = manager.restore(
            step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_state))
        )
    except (ValueError, KeyError, TypeError) as err:
        first_line = (str(err).strip().splitlines() or [""])[0][:200]
        raise ValueError(
            f"{manager.directory}: checkpoint {step} does not match this version of "
            f"c4jax's training state ({type(err).__name__}: {first_line})"
        ) from err
    return restored.state


def best_step(manager: ocp.CheckpointManager) -> int | None:
    """The kept step with the highest score (the latest among equals)."""
    scored = []
    for step in manager.all_steps():
        metrics = manager.metrics(step) or {}
        scored.append((metrics.get(SCORE, -float("inf")), step))
    return max(scored)[1] if scored else None
