"""``python -m c4jax.dqn.train``: a run directory, resuming bit for bit, clear errors."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn import train
from c4jax.run import train_dqn


def test_a_run_directory_like_alphazeros(tiny_dqn_run):
    config = dqn_config.load("tiny")
    for name in ("config.json", "metrics.jsonl", "tb", "checkpoints"):
        assert (tiny_dqn_run / name).exists(), name
    assert dqn_config.is_dqn_run(tiny_dqn_run)
    steps = [json.loads(line)["step"] for line in (tiny_dqn_run / "metrics.jsonl").open()]
    assert steps == list(range(1, config.train.num_iterations + 1))
    last = json.loads((tiny_dqn_run / "metrics.jsonl").read_text().splitlines()[-1])
    for key in ("loss", "epsilon", "win_rate/win-if-you-can", "score/lookahead", "score"):
        assert key in last, key


def test_resume_is_bit_for_bit(tmp_path):
    config = dqn_config.load("tiny")
    straight = train_dqn.train_and_evaluate(config, tmp_path / "a")
    first = train_dqn.train_and_evaluate(config, tmp_path / "b", stop_after=1)
    assert first["done"] == 1
    resumed = train_dqn.train_and_evaluate(config, tmp_path / "b")
    assert resumed["done"] == config.train.num_iterations - 1
    for a, b in zip(jax.tree.leaves(straight["state"].learner),
                    jax.tree.leaves(resumed["state"].learner), strict=True):
        np.testing.assert_array_equal(a, b)
    again = train_dqn.train_and_evaluate(config, tmp_path / "b")
    assert again["done"] == 0  # nothing to do


def test_bad_values_and_directories_are_one_error_line(tmp_path, capsys, tiny_dqn_run):
    cases = [
        (["--config", "tiny", "--train.gamma", "2"], "train.gamma"),
        (["--config", "tiny", "--model.hidden", "64,x"], "model.hidden"),
        (["--config", "tiny", "--train.opponent-random", "-1"], "train.opponent_random"),
        (["--config", "nosuch"], "presets: ddqn, grogu, grogu_plus, qlearning, tiny"),
        (["--workdir", str(tiny_dqn_run), "--train.num-envs", "32"], "train.num_envs"),
    ]
    for argv, needle in cases:
        code = train.main([*argv, "--workdir", str(tmp_path / "x")] if "--workdir" not in argv
                          else argv)
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error:") and needle in err, (argv, err)
        assert err.count("\n") == 1, err


def test_an_alphazero_run_is_not_continued_as_dqn(tmp_path, capsys):
    (tmp_path / "az").mkdir()
    config_lib.save(config_lib.load("tiny"), tmp_path / "az" / "config.json")
    assert train.main(["--workdir", str(tmp_path / "az")]) == 2
    assert "python -m c4jax.train" in capsys.readouterr().err
    assert not dqn_config.is_dqn_run(tmp_path / "az")


def test_print_config_and_overrides(tmp_path, capsys):
    argv = ["--config", "grogu", "--train.no-double", "--seed", "5",
            "--workdir", str(tmp_path / "x"), "--print-config"]
    assert train.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["algorithm"] == "dqn" and printed["model"]["kind"] == "linear"
    assert printed["train"]["double"] is False and printed["seed"] == 5
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", dqn_config.preset_names())
def test_presets_are_valid(name):
    config = dqn_config.validate(dqn_config.load(name))
    assert config.algorithm == "dqn"
    assert dataclasses.asdict(config) == dataclasses.asdict(
        config_lib.from_dict(config_lib.to_dict(config), dqn_config.DQNConfig)
    )
