"""Shared fixtures: one tiny training run for the tests that need a checkpoint."""

import pytest

from c4jax import config as config_lib
from c4jax import train


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A run directory trained with the ``tiny`` preset (about 1-2 minutes on a CPU).

    Trained once per test session and shared: tests must only read it.
    """
    run_dir = tmp_path_factory.mktemp("tiny_run")
    train.train_and_evaluate(config_lib.load("tiny"), run_dir, progress=False)
    return run_dir
