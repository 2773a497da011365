"""Typed, frozen configuration of a value-based run; presets in ``c4jax/configs/dqn/``.

The same conventions as the AlphaZero config (both built on ``c4jax.schema``):
every field can be overridden from the command line; each field's type, choices
and limits are written beside it, and ``validate`` rejects impossible values
with a message that names the field, before anything compiles; a preset states
only what differs from the defaults. The field ``algorithm`` marks a run
directory's ``config.json`` as a value-based run, so that agent specs and
``play`` know how to load it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from c4jax import inputs, schema
from c4jax.schema import check

PRESET_DIR = Path(__file__).resolve().parent.parent / "configs" / "dqn"
ALGORITHM = "dqn"
SOLVER_SETS = schema.SOLVER_SETS
_HIDDEN_ALLOWED = "comma-separated integers >= 1, e.g. 180,180,180"


def _widths(hidden: str) -> list[str]:
    return [p.strip() for p in hidden.split(",") if p.strip()]


def _is_widths(hidden: str) -> bool:
    parts = _widths(hidden)
    return bool(parts) and all(p.isascii() and p.isdigit() and int(p) >= 1 for p in parts)


@dataclass(frozen=True)
class ModelConfig:
    """The Q-function ``Q(s, .) -> [A]``, from the side of the player to move."""

    kind: Literal["mlp", "linear", "linear_plus"] = "mlp"
    """mlp: the 42 cells (+1 own, -1 opponent, 0 empty) through ReLU layers
    ("Yoda"); linear: one matrix product against the 42 cells and the 69
    alignment sums ("Grogu"); linear_plus: one matrix product against those and
    42 threat features of each column's playable cell ("Grogu+")."""
    hidden: str = schema.field("180,180,180", rule=_is_widths, allowed=_HIDDEN_ALLOWED)
    """mlp: comma-separated hidden layer widths."""


@dataclass(frozen=True)
class DQNTrainConfig:
    """Acting, replay and learning."""

    num_iterations: int = schema.field(100, ge=1, le=inputs.MAX_STEP)
    """Fused iterations (env steps + SGD steps) to run."""
    num_envs: int = schema.field(512, ge=1)
    """Games played in parallel (B)."""
    env_steps: int = schema.field(16, ge=1)
    """Learner moves per game and iteration (T); each adds B transitions."""
    replay_capacity: int = schema.field(200_000, ge=1)
    """Transitions kept in the replay buffer."""
    minibatch_size: int = schema.field(256, ge=1)
    """Transitions per SGD step."""
    sgd_steps: int = schema.field(32, ge=1)
    """SGD steps per iteration."""
    learning_rate: float = schema.field(1e-3, gt=0)
    """Adam learning rate."""
    gamma: float = schema.field(0.99, ge=0, le=1)
    """Discount per learner move (rewards come only at the end: +1 win, 0 draw, -1 loss)."""
    double: bool = True
    """Double DQN: the online network picks the next move, the target network values it."""
    target_tau: float = schema.field(0.01, gt=0, le=1)
    """Soft update of the target network after each SGD step (1.0 = no target
    network: the targets use the current parameters, plain Q-learning)."""
    loss: Literal["huber", "mse"] = "huber"
    """Regression loss of Q(s, a) against its target."""
    epsilon_start: float = schema.field(1.0, ge=0, le=1)
    """Exploration rate at the start (epsilon-greedy)."""
    epsilon_end: float = schema.field(0.1, ge=0, le=1)
    """Exploration rate after the decay."""
    epsilon_decay: float = schema.field(0.5, ge=0, le=1)
    """Share of the run over which epsilon falls linearly from start to end."""
    opponent_random: float = schema.field(1.0, ge=0)
    """Weight of games against the uniformly random player."""
    opponent_win: float = schema.field(1.0, ge=0)
    """Weight of games against win-if-you-can (wins in one when it can, else random)."""
    opponent_lookahead: float = schema.field(1.0, ge=0)
    """Weight of games against lookahead (win, else block, else random)."""
    opponent_self: float = schema.field(1.0, ge=0)
    """Weight of games against a frozen copy: the target network, greedy with
    epsilon_end exploration (with ``target_tau`` 1, the learner as it was when
    the iteration began)."""
    mirror_augment: bool = True
    """Mirror sampled transitions left-right with probability 1/2."""


@dataclass(frozen=True)
class DQNEvalConfig(schema.EvalBase):
    """Periodic evaluation of the greedy agent during training, against random,
    win-if-you-can and lookahead (the fields every engine shares)."""


@dataclass(frozen=True)
class DQNConfig:
    """A whole value-based run."""

    algorithm: Literal["dqn"] = ALGORITHM
    """Marks the run as value-based (fixed)."""
    seed: int = schema.field(0, ge=0, le=inputs.MAX_SEED)
    """Seed of the one root PRNG key."""
    model: ModelConfig = field(default_factory=ModelConfig)
    train: DQNTrainConfig = field(default_factory=DQNTrainConfig)
    eval: DQNEvalConfig = field(default_factory=DQNEvalConfig)
    checkpoint_every: int = schema.field(10, ge=1)
    """Save a checkpoint every this many iterations (the last one is always saved)."""
    keep_checkpoints: int = schema.field(3, ge=1)
    """Latest checkpoints kept (the best by evaluation score is kept besides)."""


def hidden_sizes(model: ModelConfig) -> tuple[int, ...]:
    """The widths of ``model.hidden`` as integers (ValueError naming the field)."""
    check(_is_widths(model.hidden), "model.hidden", _HIDDEN_ALLOWED, model.hidden)
    return tuple(int(p) for p in _widths(model.hidden))


def opponent_weights(train: DQNTrainConfig) -> tuple[float, float, float, float]:
    """(random, win-if-you-can, lookahead, self) weights, in ``OPPONENTS`` order."""
    return (train.opponent_random, train.opponent_win, train.opponent_lookahead,
            train.opponent_self)


def validate(config: DQNConfig) -> DQNConfig:
    """Raises ValueError naming the field if ``config`` cannot run; returns it.

    Each field is checked against its own annotation and limits
    (``schema.check_fields``); the rules below tie several fields together.
    """
    schema.check_fields(config)
    t = config.train
    check(t.replay_capacity >= t.num_envs * t.env_steps, "train.replay_capacity",
          f">= one iteration's transitions, num_envs * env_steps ({t.num_envs * t.env_steps})",
          t.replay_capacity)
    weights = opponent_weights(t)
    check(sum(weights) > 0,
          "train.opponent_random, train.opponent_win, train.opponent_lookahead and "
          "train.opponent_self", "opponent weights not all 0", weights)
    return config


def preset_names() -> list[str]:
    """Names of the value-based presets."""
    return schema.preset_names(PRESET_DIR)


def load(path_or_name: str) -> DQNConfig:
    """A value-based preset by name (``grogu``) or a JSON file path; missing fields
    take the defaults."""
    return schema.load(path_or_name, cls=DQNConfig, preset_dir=PRESET_DIR)


def is_dqn_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir/config.json`` describes a value-based run."""
    path = Path(run_dir) / "config.json"
    try:
        return json.loads(path.read_text()).get("algorithm") == ALGORITHM
    except (OSError, ValueError, AttributeError):
        return False
