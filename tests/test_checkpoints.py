"""Checkpoints: scores on disk, the best kept across processes and rotations, and
the network variables restored alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import checkpoints, trainer
from c4jax import config as config_lib


def test_best_checkpoint_is_known_to_later_processes_and_survives_resume(tmp_path):
    """Scores reach disk: a new manager finds the best step, and a resumed run's
    rotation of the latest checkpoints keeps it."""
    cfg = config_lib.load("tiny")
    state = trainer.Trainer(cfg).init(trainer.run_keys(0)[0])
    manager = checkpoints.make_manager(tmp_path, keep=1)
    for step, score in [(1, 0.9), (2, None), (3, 0.2)]:
        checkpoints.save(manager, step, state, cfg, score)
    manager.wait_until_finished()
    manager.close()
    reader = checkpoints.open_for_reading(tmp_path)
    assert checkpoints.best_step(reader) == 1
    reader.close()
    manager = checkpoints.make_manager(tmp_path, keep=1)  # as a resumed run does
    for step in (4, 5):
        checkpoints.save(manager, step, state, cfg, None)
    manager.wait_until_finished()
    assert sorted(manager.all_steps()) == [1, 5]
    manager.close()


def _assert_trees_equal(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_restore_variables_reads_the_network_alone(tmp_path):
    """The optimizer and replay parts of the checkpoint are damaged (another
    structure, other shapes): resuming training fails, playing still loads."""
    cfg = config_lib.load("tiny")
    run = trainer.Trainer(cfg)
    state = run.init(trainer.run_keys(0)[0])
    damaged = state.replace(
        learner=state.learner.replace(opt_state={"junk": jnp.zeros(3)}),
        replay={"junk": jnp.ones((2, 2))},
        selfplay=None,
    )
    manager = checkpoints.make_manager(tmp_path, keep=3)
    checkpoints.save(manager, 4, state, cfg, 0.1)
    checkpoints.save(manager, 7, damaged, cfg, 0.9)
    manager.wait_until_finished()
    manager.close()

    reader = checkpoints.open_for_reading(tmp_path)
    with pytest.raises(ValueError, match="does not match"):
        checkpoints.restore_state(reader, 7, run.abstract_state())
    reader.close()

    restored = checkpoints.restore_variables(tmp_path)  # the best: step 7
    assert restored.step == 7 and restored.config == cfg
    _assert_trees_equal(restored.variables, trainer.Trainer.variables(state))
    assert checkpoints.restore_variables(tmp_path, step=4).step == 4


def test_restore_variables_errors(tmp_path):
    with pytest.raises(ValueError, match="not a run directory"):
        checkpoints.restore_variables(tmp_path / "nope")
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(ValueError, match="no checkpoint saved yet"):
        checkpoints.restore_variables(tmp_path)
