"""Typed, frozen configuration of a value-based run; presets in ``c4jax/configs/dqn/``.

The same conventions as the AlphaZero ``c4jax.alphazero.config``: every field can be
overridden from the command line, and ``validate`` rejects impossible values
with a message that names the field, before anything compiles. The field
``algorithm`` marks a run directory's ``config.json`` as a value-based run, so
that agent specs and ``play`` know how to load it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from c4jax.alphazero import config as config_lib
from c4jax.alphazero.config import check

PRESET_DIR = config_lib.PRESET_DIR / "dqn"
ALGORITHM = "dqn"
SOLVER_SETS = ("L1_R1", "L1_R2", "L1_R3", "L2_R1", "L2_R2", "L3_R1")


@dataclass(frozen=True)
class ModelConfig:
    """The Q-function ``Q(s, .) -> [A]``, from the side of the player to move."""

    kind: Literal["mlp", "linear", "linear_plus"] = "mlp"
    """mlp: the 42 cells (+1 own, -1 opponent, 0 empty) through ReLU layers
    ("Yoda"); linear: one matrix product against the 42 cells and the 69
    alignment sums ("Grogu"); linear_plus: one matrix product against those and
    42 threat features of each column's playable cell ("Grogu+")."""
    hidden: str = "180,180,180"
    """mlp: comma-separated hidden layer widths."""


@dataclass(frozen=True)
class DQNTrainConfig:
    """Acting, replay and learning."""

    num_iterations: int = 100
    """Fused iterations (env steps + SGD steps) to run."""
    num_envs: int = 512
    """Games played in parallel (B)."""
    env_steps: int = 16
    """Learner moves per game and iteration (T); each adds B transitions."""
    replay_capacity: int = 200_000
    """Transitions kept in the replay buffer."""
    minibatch_size: int = 256
    """Transitions per SGD step."""
    sgd_steps: int = 32
    """SGD steps per iteration."""
    learning_rate: float = 1e-3
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount per learner move (rewards come only at the end: +1 win, 0 draw, -1 loss)."""
    double: bool = True
    """Double DQN: the online network picks the next move, the target network values it."""
    target_tau: float = 0.01
    """Soft update of the target network after each SGD step (1.0 = no target
    network: the targets use the current parameters, plain Q-learning)."""
    loss: Literal["huber", "mse"] = "huber"
    """Regression loss of Q(s, a) against its target."""
    epsilon_start: float = 1.0
    """Exploration rate at the start (epsilon-greedy)."""
    epsilon_end: float = 0.1
    """Exploration rate after the decay."""
    epsilon_decay: float = 0.5
    """Share of the run over which epsilon falls linearly from start to end."""
    opponent_random: float = 1.0
    """Weight of games against the uniformly random player."""
    opponent_win: float = 1.0
    """Weight of games against win-if-you-can (wins in one when it can, else random)."""
    opponent_lookahead: float = 1.0
    """Weight of games against lookahead (win, else block, else random)."""
    opponent_self: float = 1.0
    """Weight of games against a frozen copy: the target network, greedy with
    epsilon_end exploration."""
    mirror_augment: bool = True
    """Mirror sampled transitions left-right with probability 1/2."""


@dataclass(frozen=True)
class DQNEvalConfig:
    """Periodic evaluation of the greedy agent during training."""

    every: int = 10
    """Evaluate every this many iterations (0 = never)."""
    games: int = 64
    """Games against each reference opponent (random, win-if-you-can, lookahead)."""
    solver_positions: int = 0
    """Positions of each solver set in a mistake-rate sample (0 = skip it)."""
    solver_sets: str = "L1_R1,L1_R2,L2_R2"
    """Comma-separated Pons sets of the mistake-rate sample."""


@dataclass(frozen=True)
class DQNConfig:
    """A whole value-based run."""

    algorithm: Literal["dqn"] = ALGORITHM
    """Marks the run as value-based (fixed)."""
    seed: int = 0
    """Seed of the one root PRNG key."""
    model: ModelConfig = field(default_factory=ModelConfig)
    train: DQNTrainConfig = field(default_factory=DQNTrainConfig)
    eval: DQNEvalConfig = field(default_factory=DQNEvalConfig)
    checkpoint_every: int = 10
    """Save a checkpoint every this many iterations (the last one is always saved)."""
    keep_checkpoints: int = 3
    """Latest checkpoints kept (the best by evaluation score is kept besides)."""


def hidden_sizes(model: ModelConfig) -> tuple[int, ...]:
    """The widths of ``model.hidden`` as integers (ValueError naming the field)."""
    parts = [p.strip() for p in model.hidden.split(",") if p.strip()]
    ok = bool(parts) and all(p.isdigit() and int(p) >= 1 for p in parts)
    check(ok, "model.hidden", "comma-separated integers >= 1, e.g. 180,180,180", model.hidden)
    return tuple(int(p) for p in parts)


def opponent_weights(train: DQNTrainConfig) -> tuple[float, float, float, float]:
    """(random, win-if-you-can, lookahead, self) weights, in ``OPPONENTS`` order."""
    return (train.opponent_random, train.opponent_win, train.opponent_lookahead,
            train.opponent_self)


def validate(config: DQNConfig) -> DQNConfig:
    """Raises ValueError naming the field if ``config`` cannot run; returns it."""
    m, t, e = config.model, config.train, config.eval
    check(config.algorithm == ALGORITHM, "algorithm", ALGORITHM, config.algorithm)
    for section in ("model", "train", "eval"):
        for f in dataclasses.fields(getattr(config, section)):
            value = getattr(getattr(config, section), f.name)
            check(not isinstance(value, float) or math.isfinite(value),
                  f"{section}.{f.name}", "a finite number", value)
    check(
        m.kind in ("mlp", "linear", "linear_plus"), "model.kind", "mlp, linear, linear_plus",
        m.kind,
    )
    hidden_sizes(m)
    for name, value in [
        ("train.num_iterations", t.num_iterations),
        ("train.num_envs", t.num_envs),
        ("train.env_steps", t.env_steps),
        ("train.replay_capacity", t.replay_capacity),
        ("train.minibatch_size", t.minibatch_size),
        ("train.sgd_steps", t.sgd_steps),
        ("keep_checkpoints", config.keep_checkpoints),
        ("checkpoint_every", config.checkpoint_every),
    ]:
        check(isinstance(value, int) and value >= 1, name, "an integer >= 1", value)
    check(t.replay_capacity >= t.num_envs * t.env_steps, "train.replay_capacity",
          f">= one iteration's transitions, num_envs * env_steps ({t.num_envs * t.env_steps})",
          t.replay_capacity)
    check(t.learning_rate > 0, "train.learning_rate", "> 0", t.learning_rate)
    check(0 <= t.gamma <= 1, "train.gamma", "0..1", t.gamma)
    check(0 < t.target_tau <= 1, "train.target_tau", "in (0, 1]", t.target_tau)
    check(t.loss in ("huber", "mse"), "train.loss", "huber, mse", t.loss)
    for name in ("epsilon_start", "epsilon_end", "epsilon_decay"):
        check(0 <= getattr(t, name) <= 1, f"train.{name}", "0..1", getattr(t, name))
    weights = opponent_weights(t)
    for name, w in zip(("random", "win", "lookahead", "self"), weights, strict=True):
        check(w >= 0, f"train.opponent_{name}", ">= 0", w)
    check(sum(weights) > 0, "train.opponent_random", "opponent weights not all 0", weights)
    check(e.every >= 0, "eval.every", ">= 0 (0 = never)", e.every)
    check(e.games >= 2 and e.games % 2 == 0, "eval.games", "an even integer >= 2", e.games)
    check(e.solver_positions >= 0, "eval.solver_positions", ">= 0", e.solver_positions)
    check(all(s in SOLVER_SETS for s in e.solver_sets.split(",")), "eval.solver_sets",
          "a comma-separated subset of " + ",".join(SOLVER_SETS), e.solver_sets)
    return config


def preset_names() -> list[str]:
    """Names of the value-based presets."""
    return config_lib.preset_names(PRESET_DIR)


def load(path_or_name: str) -> DQNConfig:
    """A value-based preset by name (``grogu``) or a JSON file path."""
    return config_lib.load(path_or_name, DQNConfig, PRESET_DIR)


def is_dqn_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir/config.json`` describes a value-based run."""
    import json

    path = Path(run_dir) / "config.json"
    try:
        return json.loads(path.read_text()).get("algorithm") == ALGORITHM
    except (OSError, ValueError, AttributeError):
        return False
