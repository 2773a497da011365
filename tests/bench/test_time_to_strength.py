"""bench/time_to_strength.py: the first checkpoint at each target, the checkpoints timed
from the launch of a real training process, and a second call that continues."""

import json

import pytest

from bench import time_to_strength


def _row(step, seconds, mean):
    return {"step": step, "seconds": seconds, "mean": mean}


def test_the_first_checkpoint_at_or_below_each_target_counts():
    rows = [_row(30, 300.0, 5.0), _row(10, 100.0, 9.0), _row(20, 200.0, 6.0),
            _row(40, 400.0, 2.5)]
    reached = time_to_strength.first_reaching(rows, (6.0, 3.0, 1.0))
    assert reached == {"6": _row(20, 200.0, 6.0), "3": _row(40, 400.0, 2.5), "1": None}
    assert time_to_strength.first_reaching([], (6.0,)) == {"6": None}


@pytest.mark.parametrize("argv, message", [
    (["--targets", "6,x"], "--targets: got '6,x'"),
    (["--targets", "150"], "allowed: percents in 0..100"),
    (["--sets", "L1_R1,L9_R9"], "--sets: got ['L9_R9']"),
    (["--sims", "-1"], "--sims: got -1"),
    (["--minutes", "0"], "--minutes: got 0, allowed: a number > 0"),
    # -5 judged all but the last 5 positions; 0 failed after the whole training.
    (["--positions", "-5"], "--positions: got '-5', allowed: a whole number >= 1"),
    (["--positions", "0"], "--positions: got '0', allowed: a whole number >= 1"),
])
def test_bad_arguments_name_the_flag(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        time_to_strength.main(["--workdir", str(tmp_path / "w"), "--out", str(tmp_path / "o"),
                               *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_flags_after_a_double_dash_go_to_the_trainer():
    args, train = time_to_strength.parse_args(
        ["--workdir", "w", "--out", "o", "--", "--train.num-iterations", "3"])
    assert args.config == "cpu" and args.targets == (6.0, 3.0) and args.sims == 64
    assert train == ["--train.num-iterations", "3"]


_TINY = ["--config", "tiny", "--sims", "2", "--sets", "L1_R1,L2_R1", "--positions", "25",
         "--targets", "100,0", "--", "--no-progress", "--train.num-iterations", "3",
         "--checkpoint-every", "1", "--eval.every", "0"]


@pytest.mark.slow
def test_a_tiny_run_is_timed_from_its_launch_judged_and_continued(tmp_path, capsys):
    run, out = tmp_path / "run", tmp_path / "tts"
    argv = ["--workdir", str(run), "--out", str(out), *_TINY]
    assert time_to_strength.main(argv) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["train_command"] == record["command"]
    seconds = record["checkpoint_seconds"]
    assert list(seconds) == ["1", "2", "3"]  # every checkpoint kept and timed
    assert 0 < seconds["1"] <= seconds["2"] <= seconds["3"] <= record["train_seconds"]
    assert record["train_exit_code"] == 0 and record["device"]["cpu_count"] >= 1
    # 100% is reached by the first checkpoint; 0% by none, so all three are judged.
    assert record["targets"]["100"]["step"] == 1
    assert record["targets"]["100"]["seconds"] == seconds["1"]
    assert record["targets"]["0"] is None
    assert [r["step"] for r in record["rows"]] == [1, 2, 3]
    for row in record["rows"]:
        assert set(row["rates"]) == {"L1_R1", "L2_R1"}
        assert row["mean"] == pytest.approx(sum(row["rates"].values()) / 2)
        assert 0 < row["mean"] <= 100
    printed = capsys.readouterr().out
    assert "mean mistake rate <= 100%: " in printed
    assert "mean mistake rate <= 0%: not reached" in printed
    assert out.with_suffix(".png").stat().st_size > 0

    # The same call again: no training, nothing judged twice, the same answer.
    before = {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()}
    assert time_to_strength.main(argv) == 0
    assert json.loads(out.with_suffix(".json").read_text())["rows"] == record["rows"]
    assert {p.name: p.stat().st_mtime_ns for p in (run / "checkpoints").iterdir()} == before
    assert "step " not in capsys.readouterr().out

    # Another record for the same, trained folder: refused, its checkpoints untouched.
    assert time_to_strength.main(["--workdir", str(run), "--out", str(tmp_path / "other"),
                                  *_TINY]) == 2
    assert "already has checkpoints" in capsys.readouterr().err


def test_the_devices_are_asked_for_after_the_training(tmp_path, monkeypatch):
    """Asking starts JAX's backend in this process: on a GPU it would take the memory
    the training, a child process, needs."""
    calls = []
    monkeypatch.setattr(time_to_strength, "train_and_watch",
                        lambda *a, **k: calls.append("train") or ({}, 1.0, 3))
    monkeypatch.setattr(time_to_strength.bench_env, "device_info",
                        lambda *a, **k: calls.append("devices") or {})
    out = tmp_path / "tts"
    assert time_to_strength.main(["--workdir", str(tmp_path / "run"), "--out", str(out),
                                  *_TINY]) == 1  # the stand-in training "exited with 3"
    assert calls == ["train", "devices"]
