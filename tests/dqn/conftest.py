"""A tiny value-based run shared by the tests of ``c4jax.dqn`` (they only read it)."""

import pytest

from c4jax.dqn import config as dqn_config
from c4jax.run import train_dqn


@pytest.fixture(scope="session")
def tiny_dqn_run(train_once):
    """A run directory trained with the ``tiny`` value-based preset (seconds after compiling)."""
    return train_once(
        "tiny_dqn_run",
        lambda run_dir: train_dqn.train_and_evaluate(
            dqn_config.load("tiny"), run_dir, progress=False
        ),
    )
