"""A value-based run as an agent: agent specs, ``QPlayer``, ``play``."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import baselines, env
from c4jax.dqn import config as dqn_config
from c4jax.dqn import qnet
from c4jax.dqn.player import QPlayer, restore_q
from c4jax.judge import arena, registry


def _player_preferring(column: int) -> QPlayer:
    """A Grogu whose Q-values ignore the board and rank the columns, ``column`` first."""
    config = dqn_config.DQNConfig(model=dqn_config.ModelConfig(kind="linear"))
    params = qnet.init_params(qnet.make_q_network(config.model), jax.random.key(0))
    bias = -jnp.abs(jnp.arange(7) - column).astype(jnp.float32)
    params = {"Dense_0": {"kernel": jnp.zeros_like(params["Dense_0"]["kernel"]), "bias": bias}}
    return QPlayer(config, params)


def test_qplayer_plays_the_highest_legal_q():
    player = _player_preferring(2)
    assert player.best_move("").column == 3
    # Column 3 full: the next best are columns 2 and 4 (a tie, broken at random).
    full = "333333"
    assert {player.best_move(full).column for _ in range(20)} == {2, 4}
    analysis = player.analyse(full)
    assert np.isnan(analysis.q[2]) and analysis.policy.sum() == 1.0
    assert player.play("4") == "43"  # move strings are 1-based: index 2 is column 3
    with pytest.raises(ValueError, match="game is over"):
        player.analyse("1212121")


@pytest.mark.slow
def test_specs_name_a_value_based_run(tiny_dqn_run):
    restored = restore_q(tiny_dqn_run)
    name, agent = registry.make_agent(f"dqn:{tiny_dqn_run}")
    assert name == f"dqn:{tiny_dqn_run}:{restored.step}"
    bare_name, _ = registry.make_agent(str(tiny_dqn_run))  # a bare run directory works too
    assert bare_name == name
    first = min(restore_q(tiny_dqn_run, 2).step, restored.step)
    assert registry.make_agent(f"dqn:{tiny_dqn_run}:{first}")[0].endswith(f":{first}")
    with pytest.raises(ValueError, match="does not search"):
        registry.make_agent(f"{tiny_dqn_run}@16")
    with pytest.raises(ValueError, match="no checkpoint at step 3"):
        registry.make_agent(f"dqn:{tiny_dqn_run}:3")
    result = arena.play_games(agent, baselines.random_agent, jax.random.key(0), 8)
    assert result.num_games == 8
    moves = np.asarray(jax.jit(agent)(jax.random.key(1), env.stack([env.from_moves("4453")])))
    assert 0 <= int(moves[0]) < 7


@pytest.mark.slow
def test_play_runs_a_value_based_agent(tiny_dqn_run):
    out = subprocess.run(
        [sys.executable, "-m", "c4jax.play", str(tiny_dqn_run), "--first", "human"],
        input="4\nq\n", capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_COLOR": "1", "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 0, out.stderr
    assert "greedy on its Q-values, no search" in out.stdout
    assert "the highest Q-value" in out.stdout and "You quit" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "c4jax.play", str(tiny_dqn_run), "--sims", "8"],
        input="", capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert bad.returncode == 2 and "does not search" in bad.stderr
