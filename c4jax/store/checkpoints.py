"""Orbax checkpoints of a run: the whole ``TrainState`` plus the config as JSON.

Keeps the latest ``keep`` checkpoints and, besides them, the best one by
evaluation score. Saves are asynchronous; ``close`` waits for them.

Training resumes from the whole state (``restore_latest_good``,
``restore_state``); everything that only plays (``Player``, the agents of
``c4jax.judge``) reads the network variables alone (``restore_variables``), so
an incompatible optimizer or replay part of a checkpoint never blocks playing.

Every checkpoint carries the SHA-256 of each array of its state (the
``checksums`` item, committed atomically with it) and, once committed, of each
of its files (``files.sha256``, as ``sha256sum`` writes it). A read of the
whole state checks both; a read of the network alone checks the arrays it
reads. Checkpoints of an older c4jax, without them, still load.

Damaged checkpoints (a truncated data file, a deleted file, a flipped bit, NaN
or infinite network variables) are not fatal when an older one is good:
``restore_latest_good`` and ``restore_variables`` fall back to it with a
one-line ``DamagedCheckpointWarning``. The rule that tells
damage from a checkpoint of another c4jax version (which is an error, never a
fallback): a checkpoint is *damaged* when ``check_damage`` finds a file missing
or empty, when its config cannot be read, when reading its state fails
although the tree it describes (``state/_METADATA``) fits the wanted tree, or
when a checksum does not match or a network variable is not finite; it
is of *another version* when its files are all there and readable but the
tree they describe does not fit (other leaves or shapes).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import absl.logging
import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as policies

from c4jax.alphazero import config as config_lib
from c4jax.alphazero import network
from c4jax.store import damage, integrity
from c4jax.store.damage import DamagedCheckpointError, DamagedCheckpointWarning, check_damage

SCORE = "score"  # metric that ranks checkpoints; higher is better
QUARANTINE_DIR = "damaged-checkpoints"  # where a resume moves damaged checkpoints (run dir)
CHECKSUMS = "checksums"  # the item with the SHA-256 of every saved array (integrity)
_ITEMS = ("state", "config", CHECKSUMS)


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
        # A process killed while saving leaves a *.orbax-checkpoint-tmp* folder;
        # the next writer removes it (readers never list it as a step).
        cleanup_tmp_directories=True,
    )
    damage.quiet_orbax_leftovers()  # a failed save's callbacks, from TensorStore's threads
    return _Manager(Path(workdir).absolute() / "checkpoints", options=options, item_names=_ITEMS)


class _Manager(ocp.CheckpointManager):
    """Orbax's manager, which also seals each checkpoint it saved once it is
    committed (``damage.FILE_DIGESTS``: the SHA-256 of its files) and turns a
    failed write into one ``OSError`` that names the path, leaving no partial
    checkpoint behind (``save``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unsealed: list[int] = []  # steps saved here and not yet sealed
        # A save failed: its unfinished folder was removed when the failure was
        # raised, but Orbax's thread may still have been writing in it (a later
        # step's save, or the failed one's async part), so the folders of
        # unfinished saves are removed again once nothing is being written.
        self.failed = False

    def _sweep_if_failed(self) -> None:
        if self.failed and jax.process_index() == 0:
            damage.remove_unfinished(Path(self.directory))

    def close(self) -> None:
        """Closes Orbax's manager (its writes end), then sweeps after a failed save."""
        try:
            super().close()
        finally:
            self._sweep_if_failed()

    def wait_until_finished(self) -> None:
        """Waits for the async save (Orbax's), then seals what it committed.

        Raises:
            OSError: the save failed writing a file (``filename`` says which
                path); its unfinished folder is removed.
        """
        try:
            super().wait_until_finished()
            steps, self.unsealed = self.unsealed, []
            if jax.process_index() == 0:
                for step in steps:
                    damage.seal(Path(self.directory) / str(step))
        except Exception as err:
            failure = _write_error(self, err)
            if failure is None:
                raise
            raise failure from err
        finally:
            self._sweep_if_failed()


def open_for_reading(workdir: Path) -> ocp.CheckpointManager:
    """A read-only manager of ``workdir/checkpoints`` that knows the scores."""
    options = ocp.CheckpointManagerOptions(
        read_only=True, best_fn=lambda metrics: metrics[SCORE], best_mode="max"
    )
    return ocp.CheckpointManager(
        Path(workdir).absolute() / "checkpoints", options=options, item_names=_ITEMS
    )


def save(
    manager: ocp.CheckpointManager, step: int, state, config, score: float | None
) -> None:
    """Starts an async save of ``state`` and ``config`` at ``step`` (replacing one there).

    ``score`` is the evaluation score of this very step, or None if the step
    was not evaluated (then only the "latest" rule keeps it). The SHA-256 of
    every array of ``state`` (``integrity.leaf_digests``, computed here on the
    host) is saved with them, in the same atomic commit, and checked by every
    read.
    """
    try:
        _start_save(manager, step, state, config, score)
    except Exception as err:
        failure = _write_error(manager, err)
        if failure is None:
            raise
        raise failure from err
    if isinstance(manager, _Manager):
        manager.unsealed.append(step)


def _start_save(manager: ocp.CheckpointManager, step: int, state, config, score) -> None:
    if step in manager.all_steps():
        manager.wait_until_finished()
        manager.delete(step)
    manager.save(
        step,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            config=ocp.args.JsonSave(config_lib.to_dict(config)),
            **{CHECKSUMS: ocp.args.JsonSave(
                {"algorithm": integrity.ALGORITHM, "leaves": integrity.leaf_digests(state)}
            )},
        ),
        metrics=None if score is None else {SCORE: float(score)},
        force=True,
    )


def _write_error(manager: ocp.CheckpointManager, err: BaseException) -> OSError | None:
    """``err`` (of a save or its async part) as one ``OSError`` naming the path that
    could not be written, after removing the save's unfinished folders; None when
    ``err`` is no failure to write a file (then nothing is removed)."""
    failure = damage.os_error(err)
    if failure is None:
        return None
    if isinstance(manager, _Manager):
        manager.failed = True
    damage.remove_unfinished(Path(manager.directory))
    if failure.filename is None:  # Orbax's metadata writes name no file: the folder, then
        failure = OSError(failure.errno, failure.strerror, str(manager.directory))
    return failure


@dataclasses.dataclass(frozen=True)
class Resumed:
    """What ``restore_latest_good`` found: the newest good checkpoint."""

    state: Any  # the TrainState, placed as the abstract state said
    step: int  # its step
    config: config_lib.Config  # the config stored with it
    skipped: tuple[tuple[int, str], ...]  # (step, reason) of the damaged newer ones


def restore_config(
    manager: ocp.CheckpointManager, step: int, config_type: type = config_lib.Config
) -> Any:
    """The config stored with checkpoint ``step``, as a ``config_type``
    (the AlphaZero ``Config``, or the value-based ``DQNConfig``).

    Raises:
        DamagedCheckpointError: ``config/metadata`` is missing or unreadable.
        ValueError: the run is of the other kind (value-based where an AlphaZero run
            is asked for, or the reverse), naming both.
    """
    try:
        restored = manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))
        stored = restored.config
        if not isinstance(stored, dict):
            raise ValueError(f"not a JSON object but {type(stored).__name__}")
    except Exception as err:  # a JSON, OS or Orbax error: damage either way
        raise DamagedCheckpointError(
            manager.directory, step, f"config/metadata is unreadable: {damage.short_error(err)}"
        ) from None
    expected = getattr(config_type, "algorithm", None)  # DQNConfig's "dqn"; AlphaZero: none
    found = stored.get("algorithm")
    if found != expected:
        raise ValueError(f"{Path(str(manager.directory)).parent} is {_run_kind(found)}, "
                         f"not {_run_kind(expected)}, which this needs")
    return config_lib.from_dict(stored, config_type)


def _run_kind(algorithm: Any) -> str:
    """A run's kind in words, from its config's ``algorithm``: AlphaZero's config has
    no such field, the value-based engine's says ``dqn`` (not imported: it imports
    this module)."""
    if algorithm is None:
        return "an AlphaZero run (python -m c4jax.train)"
    return "a value-based run (python -m c4jax.dqn.train)"


def restore_state(manager: ocp.CheckpointManager, step: int, abstract_state):
    """The ``TrainState`` of checkpoint ``step``, placed as ``abstract_state`` says.

    Raises:
        DamagedCheckpointError: the checkpoint is damaged (see the module).
        ValueError: it is whole but of another c4jax version ("does not
            match this version of c4jax's training state").
    """
    _require_undamaged(manager, step)
    return _read_state(manager, step, abstract_state)


def restore_latest_good(
    manager: ocp.CheckpointManager,
    abstract_state,
    *,
    quarantine: Path | None = None,
    check_config: Callable[[Any], None] | None = None,
    config_type: type = config_lib.Config,
) -> Resumed | None:
    """The newest checkpoint that reads back whole, skipping damaged newer ones.

    Each skipped checkpoint gives one ``DamagedCheckpointWarning`` that names
    it, what is wrong, and the checkpoint used instead.

    Args:
        manager: the run's manager (``make_manager``).
        abstract_state: the wanted ``TrainState`` tree (``Trainer.abstract_state``).
        quarantine: where to move the damaged newer checkpoints (as
            ``quarantine/STEP``; nothing is deleted), so that the manager, which
            is reloaded, and later ones no longer list them. None: leave them.
            In a multi-process run, give it on one process only.
        check_config: called with the stored config of the checkpoint about to
            be read, before its state is; its ValueError (e.g. a field the
            resumed run may not change) propagates.
        config_type: the class of the stored config (``restore_config``).

    Returns:
        The newest good checkpoint, or None when there is no checkpoint at all.

    Raises:
        ValueError: every checkpoint is damaged (nothing is moved then), or the
            newest readable one is of another c4jax version ("does not match
            this version of c4jax's training state").
    """
    steps = sorted(manager.all_steps(), reverse=True)
    if not steps:
        return None

    def read(step: int) -> Resumed:
        _require_undamaged(manager, step)  # first: a missing file says so, not a side effect
        config = restore_config(manager, step, config_type)
        # A flipped bit in a readable config is damage, not a change of fields.
        _require_undamaged(manager, step, ("config", CHECKSUMS))
        if check_config is not None:
            check_config(config)
        state = _read_state(manager, step, abstract_state)
        return Resumed(state=state, step=int(step), config=config, skipped=())

    found, skipped = _first_good(manager, steps, read)
    notes = {}
    if quarantine is not None:
        for bad, _ in skipped:
            moved = damage.move_aside(Path(manager.directory) / str(bad), quarantine)
            notes[bad] = f"; moved it to {moved}"
        if skipped:
            manager.reload()
    _warn_skipped(manager, skipped, found.step, notes)
    return dataclasses.replace(found, skipped=tuple(skipped))


def _require_undamaged(
    manager: ocp.CheckpointManager, step: int, items: tuple[str, ...] = ()
) -> None:
    """Raises ``DamagedCheckpointError`` when ``check_damage`` finds something wrong
    with checkpoint ``step``, or when a file in its folders ``items`` differs from
    its SHA-256 in ``files.sha256`` (only reads of the whole state check files:
    a partial read checks the arrays it reads, so that damage elsewhere does
    not hide a good network)."""
    reason = check_damage(manager.directory, step)
    if reason is None and items:
        reason = damage.check_files(Path(manager.directory) / str(step), items)
    if reason is not None:
        raise DamagedCheckpointError(manager.directory, step, reason)


def _first_good(manager: ocp.CheckpointManager, candidates, read):
    """``(read(step), skipped)`` for the first of ``candidates`` that is not damaged;
    ``skipped`` lists ``(step, reason)`` of those before it. All damaged: ValueError."""
    skipped: list[tuple[int, str]] = []
    for step in candidates:
        try:
            return read(step), skipped
        except DamagedCheckpointError as err:
            skipped.append((step, err.reason))
    raise damage.all_damaged_error(manager.directory, skipped)


def _warn_skipped(
    manager, skipped, used: int, notes: dict | None = None, stacklevel: int = 3
) -> None:
    """One ``DamagedCheckpointWarning`` per skipped checkpoint, naming the one used
    (attributed ``stacklevel`` frames up: the public function's caller)."""
    for bad, reason in skipped:
        warnings.warn(
            DamagedCheckpointWarning(
                f"checkpoint {bad} in {manager.directory} is damaged ({reason}); "
                f"using checkpoint {used}{(notes or {}).get(bad, '')}"
            ),
            stacklevel=stacklevel,
        )


def best_step(manager: ocp.CheckpointManager) -> int | None:
    """The kept step with the highest score (the latest among equals)."""
    ranked = _by_score(manager)
    return ranked[0] if ranked else None


@dataclasses.dataclass(frozen=True)
class NetworkCheckpoint:
    """The network of one checkpoint of a run, without the rest of its training state."""

    config: config_lib.Config  # the run's configuration (network shape, search settings)
    variables: dict  # {'params', 'batch_stats'} network variables, on one device
    step: int  # the training iteration the checkpoint was taken at


def restore_variables(run_dir: str | Path, step: int | None = None) -> NetworkCheckpoint:
    """The network variables (params + batch_stats) of a run's checkpoint, and its config.

    A partial Orbax restore: only the ``learner.params`` and
    ``learner.batch_stats`` subtrees of the saved ``TrainState`` are read; the
    optimizer state, the replay buffer and the self-play games are not.
    Nothing on disk is changed.

    Args:
        run_dir: a run directory written by ``python -m c4jax.train``.
        step: which checkpoint; default the best by evaluation score (else the
            latest), and past a damaged one the next best (then the newest),
            with a ``DamagedCheckpointWarning``.

    Raises:
        ValueError: not a run directory, no checkpoint (at ``step``), the
            checkpoint at ``step`` is damaged (``DamagedCheckpointError``),
            every checkpoint is damaged, or the network part does not match
            the stored configuration.
    """
    return restore_part(run_dir, step, _read_network)


def restore_part(run_dir: str | Path, step: int | None, read: Callable[[Any, int], Any]) -> Any:
    """``read(manager, step)`` of a run's checkpoint ``step``, or of its best one.

    Without ``step``, the checkpoints are tried best score first (then newest),
    past damaged ones with a ``DamagedCheckpointWarning`` (``restore_variables``
    says more); ``read`` raises ``DamagedCheckpointError`` for a damaged one
    (``read_part`` does).

    Raises:
        ValueError: as ``restore_variables``.
    """
    run_dir = Path(run_dir)
    if not (run_dir / "checkpoints").is_dir():
        raise ValueError(f"{run_dir}: not a run directory (no checkpoints/ inside)")
    manager = open_for_reading(run_dir)
    try:
        steps = manager.all_steps()
        if not steps:
            raise ValueError(f"{run_dir}: no checkpoint saved yet")
        if step is not None:
            if step not in steps:
                raise ValueError(
                    f"{run_dir}: no checkpoint at step {step}; saved: {sorted(steps)}"
                )
            return read(manager, step)
        found, skipped = _first_good(
            manager, _by_score(manager), lambda candidate: read(manager, candidate)
        )
        _warn_skipped(manager, skipped, found.step, stacklevel=4)  # restore_variables' caller
        return found
    finally:
        manager.close()


def read_part(
    manager: ocp.CheckpointManager,
    step: int,
    part: Callable[[Any], dict],
    *,
    config_type: type = config_lib.Config,
    what: str = "the network",
) -> tuple[Any, dict]:
    """``(config, subtree)``: checkpoint ``step``'s config and the part of its state
    that ``part(config)`` describes (a tree of ``jax.ShapeDtypeStruct``), read alone.

    Raises:
        DamagedCheckpointError: the checkpoint is damaged.
        ValueError: ``what`` in the checkpoint does not match its configuration.
    """
    _require_undamaged(manager, step)
    config = restore_config(manager, step, config_type)
    target = part(config)
    args = ocp.args.PyTreeRestore(
        item=target,
        restore_args=ocp.checkpoint_utils.construct_restore_args(target),
        partial_restore=True,
    )
    mismatch = f"{what} in checkpoint {step} does not match its configuration"
    restored = _restore_or_explain(manager, step, args, target, partial=True, mismatch=mismatch)
    return config, restored.state


def _read_network(manager: ocp.CheckpointManager, step: int) -> NetworkCheckpoint:
    """The network of checkpoint ``step`` (``DamagedCheckpointError`` if damaged)."""
    config, state = read_part(
        manager, step, lambda config: {"learner": _abstract_variables(config.network)}
    )
    learner_part = state["learner"]
    variables = {"params": learner_part["params"], "batch_stats": learner_part["batch_stats"]}
    return NetworkCheckpoint(config=config, variables=variables, step=int(step))


def _read_state(manager: ocp.CheckpointManager, step: int, abstract_state):
    """Orbax's restore of the whole state, its errors told apart as the module says,
    then checked against the recorded SHA-256 of its arrays and of its files."""
    args = ocp.args.StandardRestore(abstract_state)
    mismatch = f"checkpoint {step} does not match this version of c4jax's training state"
    state = _restore_or_explain(
        manager, step, args, abstract_state, partial=False, mismatch=mismatch
    ).state
    # Last: Orbax's own error says more about a truncated file; this finds the
    # flipped bits that no array read shows (e.g. in index nodes Orbax skips).
    _require_undamaged(manager, step, damage.SEALED_ITEMS)
    return state


def _restore_or_explain(manager, step: int, args, target, *, partial: bool, mismatch: str):
    """``manager.restore`` of the ``state`` item; a failure becomes a ValueError
    saying ``mismatch`` when the stored tree does not fit ``target``, else a
    ``DamagedCheckpointError``."""
    damage.quiet_orbax_leftovers()
    try:
        restored = manager.restore(step, args=ocp.args.Composite(state=args))
    except Exception as err:  # Orbax and TensorStore raise many types, even Exception
        step_dir = Path(manager.directory) / str(step)
        if damage.stored_tree_fits(step_dir, target, partial=partial) is False:
            # A flipped bit in the stored tree (state/_METADATA) can make it look
            # like another version's: files that differ from their seal are damage.
            changed = damage.check_files(step_dir, ("state",))
            if changed is not None:
                raise DamagedCheckpointError(manager.directory, step, changed) from None
            raise ValueError(
                f"{manager.directory}: {mismatch} ({damage.short_error(err, step_dir)})"
            ) from None
        raise DamagedCheckpointError(
            manager.directory, step, damage.short_error(err, step_dir)
        ) from None
    reason = integrity.check_leaves(restored.state, _recorded_digests(manager, step))
    if reason is not None:
        raise DamagedCheckpointError(manager.directory, step, reason)
    return restored


def _recorded_digests(manager: ocp.CheckpointManager, step: int) -> dict[str, str]:
    """The SHA-256 of each array saved in checkpoint ``step`` (``save``), or ``{}``
    for a checkpoint of an older c4jax, saved without them.

    Raises:
        DamagedCheckpointError: its ``checksums`` item is unreadable.
    """
    if not (Path(manager.directory) / str(step) / CHECKSUMS).is_dir():
        return {}  # check_damage has said whether it should be there
    try:
        restored = manager.restore(
            step, args=ocp.args.Composite(**{CHECKSUMS: ocp.args.JsonRestore()})
        )
        stored = restored[CHECKSUMS]
        if stored.get("algorithm") != integrity.ALGORITHM:
            raise ValueError(f"unknown algorithm {stored.get('algorithm')!r}")
        digests = stored["leaves"]
        if not isinstance(digests, dict):
            raise ValueError("no 'leaves' object")
    except Exception as err:  # a JSON, OS or Orbax error: damage either way
        raise DamagedCheckpointError(
            manager.directory,
            step,
            f"{CHECKSUMS}/metadata is unreadable: {damage.short_error(err)}",
        ) from None
    return digests


def _by_score(manager: ocp.CheckpointManager) -> list[int]:
    """The kept steps, best score first (unscored last), newest first among equals."""
    scored = []
    for step in manager.all_steps():
        metrics = manager.metrics(step) or {}
        scored.append((metrics.get(SCORE, -float("inf")), step))
    return [step for _, step in sorted(scored, reverse=True)]


def _abstract_variables(network_config: config_lib.NetworkConfig) -> dict:
    """``{'params', 'batch_stats'}`` of ``jax.ShapeDtypeStruct`` placed on the first device."""
    module = network.make_network(network_config)
    shapes = jax.eval_shape(functools.partial(network.init_variables, module), jax.random.key(0))
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), shapes
    )


def quiet_orbax_logs() -> None:
    """Hides Orbax's absl warnings about read-only checkpoint managers, and its
    tracebacks of a failed write, which ``save`` raises as one ``OSError``
    (for command lines)."""
    absl.logging.set_verbosity(absl.logging.ERROR)
    absl_logger = logging.getLogger("absl")
    if _drop_write_errors not in absl_logger.filters:
        absl_logger.addFilter(_drop_write_errors)


def _drop_write_errors(record: logging.LogRecord) -> bool:
    """A ``logging`` filter: False (drop) for Orbax's log of a failed file write."""
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None and damage.os_error(exc) is not None:
        return False
    try:
        message = record.getMessage()
    except Exception:  # a record whose arguments do not fit its format
        return True
    return "os_error_code=" not in message
