"""A tiny value-based run shared by the tests of ``c4jax.dqn`` (they only read it)."""

import pytest

from c4jax.dqn import config as dqn_config
from c4jax.run import train_dqn


@pytest.fixture(scope="session")
def tiny_dqn_run(tmp_path_factory):
    """A run directory trained with the ``tiny`` value-based preset (seconds after compiling)."""
    run_dir = tmp_path_factory.mktemp("tiny_dqn_run")
    train_dqn.train_and_evaluate(dqn_config.load("tiny"), run_dir, progress=False)
    return run_dir
