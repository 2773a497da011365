"""The value-based config: presets resolve to their pinned values; bad values are
rejected naming the field and what it allows."""

import dataclasses
import json

import pytest

from c4jax import schema
from c4jax.dqn import config as dqn_config
from c4jax.dqn.config import DQNConfig

_BIG = {"train.num_iterations": 300, "train.num_envs": 1024, "train.minibatch_size": 512,
        "eval.every": 25, "eval.games": 200}
_MIXED = {"train.opponent_random": 1.0, "train.opponent_win": 1.0,
          "train.opponent_lookahead": 2.0, "train.opponent_self": 2.0}
# What each preset resolves to beyond the defaults (pinned when the presets were cut
# down to what differs from the defaults: every value is the one it had before).
PRESETS = {
    "ddqn": {**_BIG, **_MIXED, "model.kind": "mlp", "train.replay_capacity": 500_000,
             "train.learning_rate": 0.0005},
    "qlearning": {**_BIG, **_MIXED, "model.kind": "mlp", "train.replay_capacity": 500_000,
                  "train.learning_rate": 0.0005, "train.double": False,
                  "train.target_tau": 1.0, "train.loss": "mse"},
    "grogu": {**_BIG, "model.kind": "linear", "train.replay_capacity": 200_000,
              "train.learning_rate": 0.003, "train.opponent_random": 0.0,
              "train.opponent_win": 1.0, "train.opponent_lookahead": 0.0,
              "train.opponent_self": 0.0},
    "grogu_plus": {**_BIG, **_MIXED, "model.kind": "linear_plus",
                   "train.replay_capacity": 200_000, "train.learning_rate": 0.003},
    "tiny": {"model.hidden": "32", "train.num_iterations": 4, "train.num_envs": 64,
             "train.env_steps": 4, "train.replay_capacity": 4096, "train.minibatch_size": 64,
             "train.sgd_steps": 4, "eval.every": 2, "eval.games": 8, "checkpoint_every": 2,
             "keep_checkpoints": 2},
}
DEFAULTS = {
    "algorithm": "dqn", "seed": 0, "model.hidden": "180,180,180", "train.env_steps": 16,
    "train.sgd_steps": 32, "train.gamma": 0.99, "train.double": True, "train.target_tau": 0.01,
    "train.loss": "huber", "train.epsilon_start": 1.0, "train.epsilon_end": 0.1,
    "train.epsilon_decay": 0.5, "train.mirror_augment": True, "eval.solver_positions": 0,
    "eval.solver_sets": "L1_R1,L1_R2,L2_R2", "checkpoint_every": 10, "keep_checkpoints": 3,
}


def test_every_preset_is_pinned():
    assert sorted(PRESETS) == dqn_config.preset_names()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_resolve_to_their_pinned_values(name):
    cfg = dqn_config.validate(dqn_config.load(name))
    for field, value in {**DEFAULTS, **PRESETS[name]}.items():
        assert schema.field_value(cfg, field) == value, field
        assert type(schema.field_value(cfg, field)) is type(value), field


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_state_only_what_differs_from_the_defaults(name):
    data = json.loads((dqn_config.PRESET_DIR / f"{name}.json").read_text())
    for key, value in data.items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for field, v in items:
            dotted = f"{key}.{field}" if field else key
            assert v != schema.field_value(DQNConfig(), dotted), dotted


@pytest.mark.parametrize(
    "section, field, value, allowed",
    [
        ("model", "kind", "conv", "mlp, linear, linear_plus"),
        ("model", "hidden", "180,x", "comma-separated integers >= 1, e.g. 180,180,180"),
        ("model", "hidden", "", "comma-separated integers >= 1, e.g. 180,180,180"),
        ("train", "num_envs", 0, "an integer >= 1"),
        ("train", "num_iterations", 10**12, "an integer in 1..1000000000"),
        ("train", "gamma", 1.5, "0..1"),
        ("train", "target_tau", 0.0, "in (0, 1]"),
        ("train", "loss", "l1", "huber, mse"),
        ("train", "epsilon_end", -0.1, "0..1"),
        ("train", "opponent_self", -1.0, ">= 0"),
        ("train", "learning_rate", float("nan"), "a finite number"),
        ("eval", "games", 3, "an even integer >= 2"),
        ("eval", "solver_sets", "L9_R9", "a comma-separated subset of "
                                         "L1_R1,L1_R2,L1_R3,L2_R1,L2_R2,L3_R1"),
    ],
)
def test_bad_values_name_the_field_and_what_it_allows(section, field, value, allowed):
    cfg = dqn_config.load("tiny")
    sub = dataclasses.replace(getattr(cfg, section), **{field: value})
    with pytest.raises(ValueError) as err:
        dqn_config.validate(dataclasses.replace(cfg, **{section: sub}))
    assert str(err.value) == f"config field {section}.{field}: got {value!r}, allowed: {allowed}"


def test_rules_across_fields():
    cfg = dqn_config.load("tiny")
    small = dataclasses.replace(cfg.train, replay_capacity=64 * 4 - 1)
    with pytest.raises(ValueError, match=r"train\.replay_capacity.*one iteration's"):
        dqn_config.validate(dataclasses.replace(cfg, train=small))
    idle = dataclasses.replace(cfg.train, opponent_random=0.0, opponent_win=0.0,
                               opponent_lookahead=0.0, opponent_self=0.0)
    with pytest.raises(ValueError, match=r"config field train\.opponent_random, "
                       r"train\.opponent_win, train\.opponent_lookahead and "
                       r"train\.opponent_self: .*opponent weights not all 0"):
        dqn_config.validate(dataclasses.replace(cfg, train=idle))
    with pytest.raises(ValueError, match="config field algorithm: got 'az', allowed: dqn"):
        dqn_config.validate(dataclasses.replace(cfg, algorithm="az"))
    for name in ("checkpoint_every", "keep_checkpoints"):
        with pytest.raises(ValueError, match=f"config field {name}: got 0"):
            dqn_config.validate(dataclasses.replace(cfg, **{name: 0}))
    with pytest.raises(ValueError, match=r"config field seed: got 4294967296, allowed: "
                                         r"an integer in 0\.\.4294967295"):
        dqn_config.validate(dataclasses.replace(cfg, seed=2**32))


def test_hidden_sizes():
    assert dqn_config.hidden_sizes(dqn_config.ModelConfig(hidden="64, 32")) == (64, 32)
    with pytest.raises(ValueError, match="config field model.hidden"):
        dqn_config.hidden_sizes(dqn_config.ModelConfig(hidden="0"))


def test_evaluation_shares_its_base_and_solver_sets():
    assert issubclass(dqn_config.DQNEvalConfig, schema.EvalBase)
    assert dqn_config.SOLVER_SETS == schema.SOLVER_SETS
    assert dqn_config.PRESET_DIR.is_dir()
