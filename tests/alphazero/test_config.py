"""Config: presets load and validate; bad values are rejected naming the field."""

import dataclasses
import json

import pytest

from c4jax.alphazero import config as config_lib
from c4jax.alphazero.config import Config


@pytest.mark.parametrize("name", ["tiny", "cpu", "gpu", "tpu", "strong"])
def test_presets_load_and_validate(name):
    cfg = config_lib.load(name)
    config_lib.validate(cfg)
    assert cfg == config_lib.load(f"configs/{name}.json")


def test_tpu_preset_spreads_over_eight_chips():
    config_lib.validate(config_lib.load("tpu"), num_devices=8)


def test_round_trip_through_json(tmp_path):
    cfg = config_lib.load("cpu")
    config_lib.save(cfg, tmp_path / "c.json")
    assert config_lib.load(str(tmp_path / "c.json")) == cfg


@pytest.mark.parametrize(
    "section, field, value, message",
    [
        ("train", "selfplay_batch", 0, "train.selfplay_batch"),
        ("search", "num_simulations", 0, "search.num_simulations"),
        ("train", "minibatch_size", 4096, "train.replay_capacity"),
        ("search", "max_num_considered_actions", 9, "search.max_num_considered_actions"),
        ("eval", "games", 3, "eval.games"),
        ("network", "kernel_size", 4, "network.kernel_size"),
        ("network", "value_channels", 0, "network.value_channels"),
        ("train", "random_opening_moves", -1, "train.random_opening_moves"),
        ("train", "random_opening_moves", 42, "train.random_opening_moves"),
        ("train", "value_target_q", 1.5, "train.value_target_q"),
        ("train", "value_target_lambda", 1.0, "train.value_target_lambda"),
        ("train", "value_length_shaping", 1.0, "train.value_length_shaping"),
        ("train", "opening_targets", "keep", "train.opening_targets"),
        ("train", "full_search_fraction", 0.0, "train.full_search_fraction"),
        ("train", "lr_schedule", "linear", "train.lr_schedule"),
        ("train", "full_search_fraction", 1.5, "train.full_search_fraction"),
        ("search", "evaluation_move", "best", "search.evaluation_move"),
        ("search", "c_scale", 0.0, "search.c_scale"),
        ("search", "c_visit", -1.0, "search.c_visit"),
        ("search", "gumbel_noise_moves", 43, "search.gumbel_noise_moves"),
        ("search", "gumbel_noise_moves", 2.5, "search.gumbel_noise_moves"),
    ],
)
def test_impossible_values_name_the_field(section, field, value, message):
    cfg = config_lib.load("tiny")
    sub = dataclasses.replace(getattr(cfg, section), **{field: value})
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        config_lib.validate(dataclasses.replace(cfg, **{section: sub}))


def test_value_target_lambda_needs_a_search_value_share():
    cfg = config_lib.load("tiny")
    train = dataclasses.replace(cfg.train, value_target_q=0.0, value_target_lambda=0.5)
    with pytest.raises(ValueError, match=r"train\.value_target_lambda.*value_target_q is 0"):
        config_lib.validate(dataclasses.replace(cfg, train=train))
    train = dataclasses.replace(train, value_target_q=0.5)
    assert config_lib.validate(dataclasses.replace(cfg, train=train)).train == train


def test_batch_must_divide_by_device_count():
    cfg = config_lib.load("tiny")
    message = r"train\.selfplay_batch.*multiple of the device count \(3\)"
    with pytest.raises(ValueError, match=message):
        config_lib.validate(cfg, num_devices=3)


def test_unknown_and_mistyped_fields_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown config field 'train.bogus'"):
        config_lib.from_dict({"train": {"bogus": 1}})
    with pytest.raises(ValueError, match="config field network.channels: got 'wide'"):
        config_lib.from_dict({"network": {"channels": "wide"}})
    path = tmp_path / "broken.json"
    path.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        config_lib.load(str(path))
    with pytest.raises(ValueError, match="presets: cpu, gpu, strong, tiny, tpu"):
        config_lib.load("nonexistent")


def test_defaults_are_valid():
    config_lib.validate(Config())
    assert json.loads(json.dumps(config_lib.to_dict(Config())))["network"]["num_blocks"] == 5


def test_fast_searches_must_be_cheaper_than_the_full_ones():
    cfg = config_lib.load("tiny")  # 4 simulations
    capped = dataclasses.replace(cfg.train, full_search_fraction=0.25, fast_search_simulations=4)
    with pytest.raises(ValueError, match=r"train\.fast_search_simulations.*below search"):
        config_lib.validate(dataclasses.replace(cfg, train=capped))
    ok = dataclasses.replace(capped, fast_search_simulations=2)
    validated = config_lib.validate(dataclasses.replace(cfg, train=ok))
    assert validated.train.fast_search_simulations == 2
    # Off (fraction 1), the fast count is not used and any positive one passes.
    off = dataclasses.replace(cfg.train, fast_search_simulations=64)
    config_lib.validate(dataclasses.replace(cfg, train=off))
