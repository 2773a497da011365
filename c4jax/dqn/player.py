"""A value-based run's Q-network as an agent: loading, the greedy agent, and ``QPlayer``.

    player = QPlayer.from_checkpoint("runs/dqn-X")
    player.best_move("4453")     # Move(index, column), the legal move with the highest Q
    player.analyse("4453")       # Analysis: q [7] per column, value = max Q, action

Only the online network's parameters are read from a checkpoint
(``checkpoints.read_part``), never the replay buffer or the optimizer.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import jax
import numpy as np

from c4jax import env
from c4jax.dqn import qnet, trainer
from c4jax.dqn.config import DQNConfig
from c4jax.player import Analysis, Move, _quiet_absl
from c4jax.store import checkpoints

RULE = "the highest Q-value (greedy, no search)"


@dataclasses.dataclass(frozen=True)
class QCheckpoint:
    """The Q-network of one checkpoint of a value-based run."""

    config: DQNConfig
    params: dict  # the online network's parameters, on one device
    step: int


def _abstract_params(config: DQNConfig) -> dict:
    module = qnet.make_q_network(config.model)
    shapes = jax.eval_shape(functools.partial(qnet.init_params, module), jax.random.key(0))
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device), shapes)


def _read(manager, step: int) -> QCheckpoint:
    config, state = checkpoints.read_part(
        manager, step, lambda c: {"learner": {"params": _abstract_params(c)}},
        config_type=DQNConfig, what="the Q-network",
    )
    return QCheckpoint(config=config, params=state["learner"]["params"], step=int(step))


def restore_q(run_dir: str | Path, step: int | None = None) -> QCheckpoint:
    """The Q-network of a value-based run's checkpoint ``step`` (default: the best by
    evaluation score, past damaged ones with a warning).

    Raises:
        ValueError: not a run directory, no (such) checkpoint, all damaged.
    """
    with _quiet_absl():
        return checkpoints.restore_part(run_dir, step, _read)


def make_q_agent(run_dir: str | Path, step: int | None = None):
    """``(name, act)``: the greedy agent of a run, named ``dqn:RUN_DIR:STEP``."""
    restored = restore_q(run_dir, step)
    apply = qnet.make_apply(qnet.make_q_network(restored.config.model))
    act = functools.partial(trainer.q_act, apply, restored.params)
    return f"dqn:{run_dir}:{restored.step}", act


class QPlayer:
    """The greedy Q-agent behind the move-string API of ``c4jax.Player``.

    It does not search: ``num_simulations`` is 0, and ``analyse`` shows the
    Q-value of each column (as the policy, the greedy choice: 1 on the move
    played).
    """

    num_simulations = 0
    rule = RULE

    def __init__(self, config: DQNConfig, params: dict, *, step: int | None = None, seed=0):
        self.config = config
        self.params = params
        self.step = step
        self._key = jax.random.key(seed)
        self._apply = qnet.make_apply(qnet.make_q_network(config.model))
        self._q = jax.jit(lambda p, s: self._apply(p, env.observe(s)))
        self.act = functools.partial(trainer.q_act, self._apply, params)
        """The agent ``act(key, state[B]) -> [B]`` for ``arena`` and ``solver``."""

    @classmethod
    def from_checkpoint(cls, run_dir: str | Path, *, step: int | None = None) -> QPlayer:
        restored = restore_q(run_dir, step)
        return cls(restored.config, restored.params, step=restored.step)

    def analyse(self, moves: str) -> Analysis:
        """The Q-value of each legal column and the greedy move after ``moves``."""
        state = env.from_moves(moves)
        if bool(state.terminated):
            raise ValueError(f"moves {moves!r}: the game is over, there is no move to choose")
        legal = np.asarray(env.legal_action_mask(state))
        q = np.asarray(self._q(self.params, env.stack([state]))[0], np.float32)
        best = np.flatnonzero(legal & (q == np.max(np.where(legal, q, -np.inf))))
        self._key, key = jax.random.split(self._key)
        action = int(best[int(jax.random.randint(key, (), 0, len(best)))])
        policy = np.zeros(env.NUM_ACTIONS, np.float32)
        policy[action] = 1.0
        return Analysis(
            policy=policy, value=float(q[action]), action=action,
            q=np.where(legal, q, np.nan).astype(np.float32), rule=RULE,
        )

    def best_move(self, moves: str) -> Move:
        """The greedy move after ``moves``: ``.index`` 0-based, ``.column`` 1-based."""
        return self.analyse(moves).move

    def play(self, moves: str) -> str:
        """The move string after ``moves`` and the agent's reply."""
        return moves + self.best_move(moves).char
