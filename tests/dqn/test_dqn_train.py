"""``python -m c4jax.dqn.train``: a run directory, resuming bit for bit, clear errors."""

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from c4jax import train as c4jax_train
from c4jax.alphazero import config as config_lib
from c4jax.dqn import config as dqn_config
from c4jax.dqn import train
from c4jax.run import train_dqn


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_resume_with_more_iterations_says_that_exploration_rises(tmp_path, capsys):
    config = dqn_config.load("tiny")
    n = config.train.num_iterations
    train_dqn.train_and_evaluate(config, tmp_path, progress="off")
    longer = dataclasses.replace(config, train=dataclasses.replace(
        config.train, num_iterations=4 * n))
    train_dqn.train_and_evaluate(longer, tmp_path, progress="lines", stop_after=1)
    out = capsys.readouterr().out
    assert f"resuming {tmp_path} from iteration {n} of {4 * n}" in out
    assert f"note: train.num_iterations is {4 * n}, not the {n} this run was started with" in out


@pytest.mark.slow
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


def _runs_with(tmp_path, tiny_dqn_run, *, alphazero_newer: bool):
    """runs/ holding a copy of the tiny value-based run and an AlphaZero run's config."""
    runs = tmp_path / "runs"
    shutil.copytree(tiny_dqn_run, runs / "dqn-run")
    (runs / "az-run").mkdir()
    config_lib.save(config_lib.load("tiny"), runs / "az-run" / "config.json")
    now = time.time()
    for path in (runs / "dqn-run").iterdir():
        os.utime(path, (now, now))
    stamp = now + (100 if alphazero_newer else -100)
    os.utime(runs / "az-run" / "config.json", (stamp, stamp))
    return runs


@pytest.mark.slow
def test_the_alphazero_command_line_continues_the_newest_run_when_it_is_value_based(
    tmp_path, tiny_dqn_run, monkeypatch, capsys
):
    """``python -m c4jax.train --resume`` on a value-based run: the value-based trainer."""
    _runs_with(tmp_path, tiny_dqn_run, alphazero_newer=False)
    monkeypatch.chdir(tmp_path)
    done = dqn_config.load("tiny").train.num_iterations
    argv = ["--resume", "--no-progress", "--train.num-iterations", str(done + 1)]
    assert c4jax_train.main(argv) == 0
    out = capsys.readouterr().out
    picked = Path("runs") / "dqn-run"
    assert f"--resume: continuing {picked}, the run in runs/ written to last" in out
    assert f"resuming {picked} from iteration {done} of {done + 1}" in out
    steps = [json.loads(line)["step"] for line in (picked / "metrics.jsonl").open()]
    assert steps == list(range(1, done + 2))


@pytest.mark.slow
def test_resume_here_takes_the_newest_value_based_run(tmp_path, tiny_dqn_run, monkeypatch,
                                                      capsys):
    _runs_with(tmp_path, tiny_dqn_run, alphazero_newer=True)
    monkeypatch.chdir(tmp_path)
    call = train.parse_args(["--resume"])
    assert call.kind == "dqn" and call.workdir == Path("runs") / "dqn-run"
    assert call.picked.startswith(f"--resume: continuing {Path('runs') / 'dqn-run'}")
    assert c4jax_train.parse_args(["--resume"]).workdir == Path("runs") / "az-run"


@pytest.mark.parametrize("argv", [["--config", "dqn/grogu"], ["--config", "dqn/tiny"]])
def test_value_based_presets_through_the_alphazero_command_line(argv, tmp_path, capsys):
    assert c4jax_train.main([*argv, "--workdir", str(tmp_path / "x"), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["algorithm"] == "dqn"
    assert printed == config_lib.to_dict(dqn_config.load(argv[1].split("/")[1]))


@pytest.mark.slow
def test_the_run_directory_picks_the_trainer(tiny_dqn_run, capsys):
    assert c4jax_train.main(["--workdir", str(tiny_dqn_run), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "dqn"
    code = c4jax_train.main(["--workdir", str(tiny_dqn_run), "--config", "tiny"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "an AlphaZero configuration, but --workdir" in err and "a value-based run" in err


def test_multi_process_flags_are_refused_for_a_value_based_run(tmp_path, capsys):
    argv = ["--config", "dqn/tiny", "--workdir", str(tmp_path), "--coordinator", "h:1"]
    assert c4jax_train.main(argv) == 2
    assert "a value-based run trains in one process" in capsys.readouterr().err


@pytest.mark.slow
def test_an_edited_config_json_names_the_field_and_the_command_that_continues(
        tmp_path, tiny_dqn_run, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_dqn_run, run)
    edited = json.loads((run / "config.json").read_text())
    hidden = edited["model"]["hidden"]
    edited["model"]["hidden"] = "64,64"
    (run / "config.json").write_text(json.dumps(edited))
    assert train.main(["--workdir", str(run)]) == 2
    err = capsys.readouterr().err
    fix = f"python -m c4jax.dqn.train --workdir {run} --model.hidden {hidden}"
    assert err.startswith(f"error: {run / 'config.json'} says model.hidden '64,64', but the "
                          f"checkpoints in {run / 'checkpoints'} were trained with model.hidden "
                          f"{hidden!r} (config.json was edited since)"), err
    assert f": {fix}; or train the new values in a new --workdir\n" in err
    assert train.main(fix.split()[3:]) == 0  # accepted: nothing left to do
    assert "nothing to do" in capsys.readouterr().out


def test_a_longer_resumed_run_says_how_far_exploration_goes_back_up():
    """Epsilon decays over a share of num_iterations: continuing a finished run with
    more iterations raised it again without a word."""
    stored = dqn_config.load("ddqn")
    n = stored.train.num_iterations
    longer = dataclasses.replace(stored, train=dataclasses.replace(
        stored.train, num_iterations=n * 10 // 3))
    note = train_dqn.exploration_change(stored, longer, n)
    end = stored.train.epsilon_end
    assert note.startswith(f"note: train.num_iterations is {n * 10 // 3}, not the {n} ")
    assert f"epsilon at iteration {n} goes from {end:.2f} to " in note
    assert float(note.rsplit(" ", 1)[1]) > end + 0.2
    assert train_dqn.exploration_change(stored, stored, n) is None
    # Past the decay either way: nothing changes, nothing said.
    flat = dataclasses.replace(stored, train=dataclasses.replace(stored.train, epsilon_decay=0))
    assert train_dqn.exploration_change(
        flat, dataclasses.replace(flat, train=dataclasses.replace(
            flat.train, num_iterations=2 * n)), n) is None


def test_a_preset_name_is_not_a_config(tmp_path):
    with pytest.raises(TypeError, match=r"config: got str 'ddqn'; give a DQNConfig"):
        train_dqn.train_and_evaluate("ddqn", tmp_path)
    with pytest.raises(ValueError, match="progress: got 'verbose'"):
        train_dqn.train_and_evaluate(dqn_config.load("tiny"), tmp_path, progress="verbose")
    assert not any(tmp_path.iterdir())  # refused before anything is written
