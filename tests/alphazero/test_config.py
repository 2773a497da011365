"""Config: presets load and validate; bad values are rejected naming the field."""

import dataclasses
import json
from pathlib import Path

import pytest

from c4jax.alphazero import config as config_lib
from c4jax.alphazero.config import Config

# The tuned recipe: the dataclass defaults, which every preset but tiny keeps.
RECIPE = {
    "seed": 0, "network.kernel_size": 3, "network.value_channels": 1, "network.bfloat16": False,
    "search.algorithm": "gumbel", "search.max_num_considered_actions": 7,
    "search.gumbel_noise_moves": 42, "search.evaluation_move": "halving",
    "train.selfplay_batch": 256, "train.selfplay_steps": 32, "train.minibatch_size": 256,
    "train.sgd_steps": 32, "train.optimizer": "adamw", "train.lr_schedule": "cosine",
    "train.weight_decay": 1e-4, "train.random_opening_moves": 12, "train.value_target_q": 0.5,
    "train.value_target_lambda": 0.0, "train.opening_targets": "drop", "train.time_budget": "",
    "train.full_search_fraction": 1.0, "train.mirror_augment": True,
    "eval.every": 10, "eval.games": 64, "eval.solver_positions": 0,
    "eval.solver_sets": "L1_R1,L1_R2,L2_R2", "eval.gating": 0.0,
    "checkpoint_every": 10, "keep_checkpoints": 3,
}
ALL_SETS = "L3_R1,L2_R1,L2_R2,L1_R1,L1_R2,L1_R3"
BIG = {
    "network.num_blocks": 6, "network.channels": 128, "network.bfloat16": True,
    "search.num_simulations": 64, "train.num_iterations": 400, "train.selfplay_batch": 2048,
    "train.replay_capacity": 1_000_000, "train.minibatch_size": 1024, "train.sgd_steps": 64,
    "train.learning_rate": 0.001, "train.warmup_steps": 500, "eval.games": 128,
    "eval.num_simulations": 64,
}
# What each preset resolves to, beyond the recipe (pinned when the presets were cut
# down to what differs from the defaults: every value is the one it had before).
PRESETS = {
    "cpu": {
        "network.num_blocks": 3, "network.channels": 32, "network.threat_planes": True,
        "search.num_simulations": 4, "train.num_iterations": 400, "train.selfplay_steps": 16,
        "train.replay_capacity": 400_000, "train.sgd_steps": 64, "train.minibatch_size": 128,
        "train.learning_rate": 0.002, "train.warmup_steps": 50, "eval.num_simulations": 16,
        "eval.solver_positions": 250, "eval.solver_sets": ALL_SETS,
    },
    "strong": {
        "network.num_blocks": 5, "network.channels": 48, "network.global_pool": 16,
        "network.final_board_head": True, "network.threat_planes": True,
        "search.num_simulations": 4,
        "train.num_iterations": 2000, "train.time_budget": "2h", "train.selfplay_steps": 16,
        "train.replay_capacity": 600_000, "train.sgd_steps": 64, "train.minibatch_size": 128,
        "train.learning_rate": 0.002,
        "train.warmup_steps": 50, "train.surprise_starts": 0.5,
        "train.endgame_sample_weight": 0.25, "eval.num_simulations": 16,
        "eval.solver_positions": 250, "eval.solver_sets": ALL_SETS, "keep_checkpoints": 30,
    },
    "gpu": BIG,
    "tpu": BIG,
    "tiny": {
        "network.num_blocks": 1, "network.channels": 8, "search.num_simulations": 4,
        "train.num_iterations": 4, "train.selfplay_batch": 16, "train.selfplay_steps": 8,
        "train.replay_capacity": 2048, "train.minibatch_size": 32, "train.sgd_steps": 2,
        "train.learning_rate": 0.003, "train.warmup_steps": 0, "train.lr_schedule": "constant",
        "train.random_opening_moves": 0, "train.value_target_q": 0.0, "eval.every": 2,
        "eval.games": 8, "eval.num_simulations": 4, "checkpoint_every": 2,
        "keep_checkpoints": 2,
    },
}


def test_the_tuned_recipe_is_the_default():
    for name, value in RECIPE.items():
        assert config_lib.field_value(Config(), name) == value, name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_resolve_to_their_pinned_values(name):
    cfg = config_lib.load(name)
    for field, value in {**RECIPE, **PRESETS[name]}.items():
        assert config_lib.field_value(cfg, field) == value, field
        assert type(config_lib.field_value(cfg, field)) is type(value), field


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_state_only_what_differs_from_the_defaults(name):
    data = json.loads((config_lib.PRESET_DIR / f"{name}.json").read_text())
    for key, value in data.items():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for field, v in items:
            dotted = f"{key}.{field}" if field else key
            assert v != config_lib.field_value(Config(), dotted), dotted


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
        ("train", "replay_window", -1, "train.replay_window"),
        ("train", "replay_window_power", 0.0, "train.replay_window_power"),
        ("train", "replay_window_power", 1.5, "train.replay_window_power"),
        ("train", "opening_targets", "keep", "train.opening_targets"),
        ("train", "full_search_fraction", 0.0, "train.full_search_fraction"),
        ("train", "lr_schedule", "linear", "train.lr_schedule"),
        ("train", "full_search_fraction", 1.5, "train.full_search_fraction"),
        ("train", "policy_surprise_weight", 1.5, "train.policy_surprise_weight"),
        ("train", "policy_surprise_weight", -0.5, "train.policy_surprise_weight"),
        ("train", "surprise_starts", 1.5, "train.surprise_starts"),
        ("train", "surprise_pool", 0, "train.surprise_pool"),
        ("train", "surprise_start_moves", 42, "train.surprise_start_moves"),
        ("train", "endgame_sample_weight", 0.0, "train.endgame_sample_weight"),
        ("train", "endgame_sample_weight", 1.5, "train.endgame_sample_weight"),
        ("train", "endgame_stones", 0, "train.endgame_stones"),
        ("train", "endgame_stones", 43, "train.endgame_stones"),
        ("search", "evaluation_move", "best", "search.evaluation_move"),
        ("search", "c_scale", 0.0, "search.c_scale"),
        ("search", "c_visit", -1.0, "search.c_visit"),
        ("search", "gumbel_noise_moves", 43, "search.gumbel_noise_moves"),
        ("search", "gumbel_noise_moves", 2.5, "search.gumbel_noise_moves"),
        ("search", "algorithm", "ucb", "search.algorithm"),
        ("search", "dirichlet_fraction", 1.5, "search.dirichlet_fraction"),
        ("train", "optimizer", "adam", "train.optimizer"),
        ("train", "learning_rate", float("nan"), "train.learning_rate"),
        ("train", "learning_rate", float("inf"), "train.learning_rate"),
        ("train", "min_replay_size", 4096, "train.min_replay_size"),
        ("eval", "solver_sets", "L1_R1,L9_R9", "eval.solver_sets"),
        ("eval", "gating", 1.0, "eval.gating"),
        ("eval", "gating_games", 3, "eval.gating_games"),
        ("eval", "every", -1, "eval.every"),
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
    # Off (fraction 1), the fast count is not used: its default passes (above the
    # tiny preset's 4 simulations), any other is refused as a setting nothing reads.
    config_lib.validate(cfg)
    assert cfg.train.fast_search_simulations > cfg.search.num_simulations
    off = dataclasses.replace(cfg.train, fast_search_simulations=64)
    with pytest.raises(ValueError, match=r"train\.fast_search_simulations.*unless "
                                         r"train\.full_search_fraction is on"):
        config_lib.validate(dataclasses.replace(cfg, train=off))


@pytest.mark.parametrize(
    "section, field, value, allowed",
    [
        ("search", "algorithm", "ucb", "gumbel, puct"),
        ("search", "evaluation_move", "best", "halving, policy, q"),
        ("network", "kernel_size", 4, "1, 3, 5, 7"),
        ("network", "num_blocks", 0, "an integer >= 1"),
        ("train", "value_target_q", 1.5, "0..1"),
        ("train", "random_opening_moves", 42, "an integer in 0..41 (0 = off)"),
        ("train", "full_search_fraction", 0.0, "in (0, 1] (1 = off)"),
        ("eval", "games", 3, "an even integer >= 2"),
    ],
)
def test_the_allowed_text_comes_from_the_field(section, field, value, allowed):
    cfg = config_lib.load("tiny")
    sub = dataclasses.replace(getattr(cfg, section), **{field: value})
    with pytest.raises(ValueError) as err:
        config_lib.validate(dataclasses.replace(cfg, **{section: sub}))
    assert str(err.value) == f"config field {section}.{field}: got {value!r}, allowed: {allowed}"


def test_top_level_fields_are_checked():
    cfg = config_lib.load("tiny")
    for name in ("checkpoint_every", "keep_checkpoints"):
        with pytest.raises(ValueError, match=f"config field {name}: got 0"):
            config_lib.validate(dataclasses.replace(cfg, **{name: 0}))
    # JAX keeps a seed's low 32 bits: 2**32 would silently rerun seed 0, -1 seed 2**32 - 1.
    for seed in (2**32, -1, 2**63):
        with pytest.raises(ValueError) as err:
            config_lib.validate(dataclasses.replace(cfg, seed=seed))
        assert str(err.value) == (f"config field seed: got {seed!r}, "
                                  "allowed: an integer in 0..4294967295")
    config_lib.validate(dataclasses.replace(cfg, seed=2**32 - 1))


def test_a_run_longer_than_the_schedule_can_count_is_refused():
    """The learning-rate schedule counts SGD steps in int32: a longer run would wrap
    around and train at the schedule's floor without a word."""
    cfg = config_lib.load("cpu")  # 64 SGD steps an iteration
    fits = (2**31 - 1) // 64
    config_lib.validate(dataclasses.replace(
        cfg, train=dataclasses.replace(cfg.train, num_iterations=fits)))
    with pytest.raises(ValueError) as err:
        config_lib.validate(dataclasses.replace(
            cfg, train=dataclasses.replace(cfg.train, num_iterations=fits + 1)))
    assert str(err.value).startswith(f"config field train.num_iterations: got {fits + 1}, "
                                     f"allowed: at most {fits} with train.sgd_steps 64")
    with pytest.raises(ValueError, match=r"train\.num_iterations: got 1000000001"):
        config_lib.validate(dataclasses.replace(
            cfg, train=dataclasses.replace(cfg.train, num_iterations=10**9 + 1, sgd_steps=1)))


def test_evaluation_shares_its_base_with_the_value_based_engine():
    from c4jax import schema
    from c4jax.dqn.config import DQNEvalConfig

    assert issubclass(config_lib.EvalConfig, schema.EvalBase)
    assert issubclass(DQNEvalConfig, schema.EvalBase)
    shared = [f.name for f in dataclasses.fields(schema.EvalBase)]
    assert shared == ["every", "games", "solver_positions", "solver_sets"]
    assert [f.name for f in dataclasses.fields(config_lib.EvalConfig)][:4] == shared


def test_config_files_of_older_versions_still_load():
    """A full config.json in the old field order (eval.num_simulations third), as
    saved runs and earlier shipped agents hold, loads field by field."""
    old = {
        "seed": 1,
        "network": {"num_blocks": 2, "channels": 16, "kernel_size": 3, "bfloat16": False},
        "search": {"algorithm": "gumbel", "num_simulations": 8},
        "train": {"random_opening_moves": 0, "value_target_q": 0.0},
        "eval": {"every": 5, "games": 16, "num_simulations": 8, "solver_positions": 0,
                 "solver_sets": "L1_R1", "gating": 0.0, "gating_games": 64},
        "checkpoint_every": 5,
        "keep_checkpoints": 3,
    }
    cfg = config_lib.validate(config_lib.from_dict(old))
    assert cfg.eval.num_simulations == 8 and cfg.eval.every == 5
    assert cfg.train.random_opening_moves == 0 and cfg.train.value_target_q == 0.0
    # The agent shipped until 2026-11-29, saved before opening_search_games existed.
    earlier = (Path(__file__).resolve().parents[2] / "bench" / "results" / "strength"
               / "candidates" / "strong_pst_661" / "config.json")
    shipped = config_lib.PRESET_DIR.parent / "pretrained" / "config.json"
    _assert_loads_field_by_field(shipped)
    data, loaded = _assert_loads_field_by_field(earlier)
    assert "opening_search_games" not in data["train"]
    assert loaded["train"]["opening_search_games"] == 0  # a field newer than the file: its default


def _assert_loads_field_by_field(path: Path) -> tuple[dict, dict]:
    """Checks that every value the config file at ``path`` holds survives loading;
    returns the file's data and the loaded config as dicts."""
    data = json.loads(path.read_text())
    loaded = config_lib.to_dict(config_lib.validate(config_lib.load(str(path))))
    for key, value in data.items():
        if isinstance(value, dict):
            assert {k: loaded[key][k] for k in value} == value, (path, key)
        else:
            assert loaded[key] == value, (path, key)
    return data, loaded


@pytest.mark.parametrize("weight, head", [("opponent_policy_weight", "opponent_head"),
                                          ("final_board_weight", "final_board_head")])
def test_a_head_weight_is_refused_without_the_head_it_weighs(weight, head):
    cfg = config_lib.load("tiny")
    train = dataclasses.replace(cfg.train, **{weight: 0.5})
    with pytest.raises(ValueError, match=rf"train\.{weight}.*network\.{head}"):
        config_lib.validate(dataclasses.replace(cfg, train=train))
    network = dataclasses.replace(cfg.network, **{head: True})
    config_lib.validate(dataclasses.replace(cfg, train=train, network=network))


def test_surprise_starts_need_random_openings_played_at_once():
    cfg = config_lib.load("tiny")
    for change in ({"random_opening_moves": 0}, {"opening_targets": "search"}):
        options = {"surprise_starts": 0.25, "random_opening_moves": 4, **change}
        train = dataclasses.replace(cfg.train, **options)
        with pytest.raises(ValueError, match=r"train\.surprise_starts.*played at once"):
            config_lib.validate(dataclasses.replace(cfg, train=train))
    train = dataclasses.replace(cfg.train, surprise_starts=0.25, random_opening_moves=4)
    assert config_lib.validate(dataclasses.replace(cfg, train=train)).train == train


def test_the_start_pool_settings_are_refused_without_surprise_starts():
    cfg = config_lib.load("tiny")
    for change in ({"surprise_pool": 64}, {"surprise_start_moves": 8}):
        train = dataclasses.replace(cfg.train, **change)
        with pytest.raises(ValueError, match=r"unless train\.surprise_starts is on"):
            config_lib.validate(dataclasses.replace(cfg, train=train))
        on = dataclasses.replace(train, surprise_starts=0.25, random_opening_moves=4)
        assert config_lib.validate(dataclasses.replace(cfg, train=on)).train == on


def test_opening_searches_are_checked_against_the_batch_and_refused_when_off():
    cfg = config_lib.load("tiny")
    batch = cfg.train.selfplay_batch
    too_many = dataclasses.replace(cfg.train, opening_search_games=batch + 1)
    allowed = rf"train\.opening_search_games.*0\.\.train\.selfplay_batch \({batch}\)"
    with pytest.raises(ValueError, match=allowed):
        config_lib.validate(dataclasses.replace(cfg, train=too_many))
    unused = dataclasses.replace(cfg.train, opening_search_simulations=32)
    refused = r"train\.opening_search_simulations.*unless train\.opening_search_games is on"
    with pytest.raises(ValueError, match=refused):
        config_lib.validate(dataclasses.replace(cfg, train=unused))
    on = dataclasses.replace(unused, opening_search_games=batch)
    assert config_lib.validate(dataclasses.replace(cfg, train=on)).train == on


@pytest.mark.parametrize("setting, option", [
    ({"endgame_stones": 20}, {"endgame_sample_weight": 0.25}),
    ({"replay_window_power": 0.5}, {"replay_window": 1000}),
])
def test_a_setting_of_an_option_that_is_off_is_refused(setting, option):
    cfg = config_lib.load("tiny")
    unused = dataclasses.replace(cfg.train, **setting)
    (name,), (option_name,) = setting, option
    refused = rf"train\.{name}.*unless train\.{option_name} is on"
    with pytest.raises(ValueError, match=refused):
        config_lib.validate(dataclasses.replace(cfg, train=unused))
    on = dataclasses.replace(unused, **option)
    assert config_lib.validate(dataclasses.replace(cfg, train=on)).train == on


def test_global_pooling_pools_at_most_the_blocks_channels():
    cfg = config_lib.load("tiny")
    channels = cfg.network.channels
    for bad in (-1, channels + 1):
        too_many = dataclasses.replace(cfg.network, global_pool=bad)
        with pytest.raises(ValueError, match=r"network\.global_pool"):
            config_lib.validate(dataclasses.replace(cfg, network=too_many))
    every = dataclasses.replace(cfg.network, global_pool=channels)
    assert config_lib.validate(dataclasses.replace(cfg, network=every)).network == every
