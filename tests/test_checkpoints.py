"""Checkpoints: scores on disk, the best kept across processes and rotations."""

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
