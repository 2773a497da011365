"""bench.simulations: a sweep over simulation counts that continues where it stopped,
its table and its figure."""

import hashlib
import json
import shutil

import pytest

from bench import simulations
from c4jax.judge import solver
from c4jax.store import exported

pytest.importorskip("bitbully", reason="the [solver] extra (bitbully) is not installed")


@pytest.mark.slow
def test_a_sweep_measures_each_point_once_and_continues_where_it_stopped(tmp_path, capsys):
    out = tmp_path / "sims"
    argv = ["--sims", "0", "--rollouts", "none", "--positions", "3", "--openings", "1",
            "--out", str(out)]
    assert simulations.main(argv) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    point = record["points"]["network"]["0"]
    assert set(point["solver"]) == set(solver.SET_NAMES)
    assert all(r["positions"] == 3 for r in point["solver"].values())
    games = point["perfect"]
    assert games["games"] == 14 == games["wins"] + games["draws"] + games["losses"]
    assert 0 <= games["kept"] <= 14 and games["score"] < 0.5 + 1e-9  # nobody beats perfect
    assert record["device"]["cpu_count"] and record["command"].endswith(str(out))
    assert out.with_suffix(".png").stat().st_size > 10_000
    capsys.readouterr()
    # Run again with one more point: the first is not measured again.
    assert simulations.main(["--sims", "0", "--rollouts", "1", "--positions", "3",
                             "--openings", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pretrained@0" in text and "(done before)" in text
    again = json.loads(out.with_suffix(".json").read_text())
    assert again["points"]["network"]["0"] == point and "1" in again["points"]["rollouts"]
    # Each point keeps the command that measured it; the record has the latest.
    assert "--sims 0 --rollouts none" in point["command"]
    second = again["points"]["rollouts"]["1"]
    assert "--rollouts 1" in second["command"] and second["command"] == again["command"]
    assert point["device"]["cpu_count"] == second["device"]["cpu_count"] > 0
    assert "| rollout MCTS | 1 |" in text and "| pretrained | 0 |" in text


def test_the_table_has_a_row_per_point_in_order():
    def point(rate, score, kept, hard=None):
        rates = {s: {"mistake_rate": rate} for s in solver.SET_NAMES}
        if hard is not None:
            rates["L1_R3"] = {"mistake_rate": hard}
        return {"solver": rates, "perfect": {"score": score, "kept": kept, "games": 98}}

    record = {"agent": "runs/x", "points": {
        "network": {"64": point(0.01, 0.3, 70), "0": point(0.05, 0.1, 50, hard=0.11)},
        "rollouts": {"8": point(0.3, 0.0, 30)}}}
    lines = simulations.table(record).splitlines()
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert lines[1].startswith("|---|---:|")
    # Five sets at 5.0 and L1_R3 at 11.0: a mean of 6.00.
    assert lines[2].startswith("| runs/x | 0 | 5.0 |")
    assert lines[2].endswith("| 11.0 | 6.00 | 10.0% | 50 / 98 |")
    assert lines[3].startswith("| runs/x | 64 | 1.0 |")
    assert lines[4].startswith("| rollout MCTS | 8 | 30.0 |")


def _fake_point(spec, **_):
    return {"agent": spec, "seconds": {"solver": 0.0, "perfect": 0.0},
            "solver": {s: {"mistake_rate": 0.02} for s in solver.SET_NAMES},
            "perfect": {"games": 14, "score": 0.25, "wins": 1, "draws": 5, "losses": 8,
                        "kept": 9}}


def test_points_are_reused_only_for_the_same_weights(tmp_path, monkeypatch, capsys):
    """A sweep of an exported network whose weights changed (a newly shipped
    `pretrained`) measures every point again instead of mixing two agents."""
    agent = tmp_path / "agent"
    shutil.copytree(exported.PRETRAINED_DIR, agent)
    assert simulations.weights_id(str(agent)) == simulations.weights_id("pretrained")
    assert len(simulations.weights_id("pretrained")) == 64
    assert simulations.weights_id("mcts-8") is None
    measured = []
    monkeypatch.setattr(simulations, "measure",
                        lambda spec, **kw: measured.append(spec) or _fake_point(spec))
    out = tmp_path / "sweep"
    argv = ["--agent", str(agent), "--sims", "0,4", "--rollouts", "none", "--out", str(out)]
    assert simulations.main(argv) == 0
    assert measured == [f"{agent}@0", f"{agent}@4"]
    assert simulations.main(argv) == 0  # the same weights: nothing measured again
    assert len(measured) == 2 and "(done before)" in capsys.readouterr().out
    # Other weights under the same name: one changed byte, its checksum updated.
    variables = agent / exported.VARIABLES_FILE
    data = bytearray(variables.read_bytes())
    data[-1] ^= 1
    variables.write_bytes(bytes(data))
    checksums = json.loads((agent / exported.CHECKSUMS_FILE).read_text())
    checksums["files"][exported.VARIABLES_FILE] = hashlib.sha256(data).hexdigest()
    (agent / exported.CHECKSUMS_FILE).write_text(json.dumps(checksums))
    # The old sweep is not dropped without a word: refused, then started over on --redo.
    with pytest.raises(SystemExit) as exit_info:
        simulations.main(argv)
    assert exit_info.value.code == 2 and len(measured) == 2
    err = capsys.readouterr().err
    assert "holds a sweep with another weights" in err and "--redo to start it over" in err
    assert simulations.main([*argv, "--redo"]) == 0
    assert measured[2:] == [f"{agent}@0", f"{agent}@4"]
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["weights"] == checksums["files"][exported.VARIABLES_FILE]


def test_redo_measures_the_listed_points_again_and_keeps_the_others(tmp_path, monkeypatch):
    """``--redo --sims 64`` wrote a file holding that one point: the rest of the sweep
    was gone."""
    measured = []
    monkeypatch.setattr(simulations, "measure",
                        lambda spec, **kw: measured.append(spec) or _fake_point(spec))
    out = tmp_path / "sweep"
    base = ["--rollouts", "none", "--out", str(out)]
    assert simulations.main(["--sims", "0,4", *base]) == 0
    assert simulations.main(["--sims", "4", "--redo", *base]) == 0
    assert measured == ["pretrained@0", "pretrained@4", "pretrained@4"]
    record = json.loads(out.with_suffix(".json").read_text())
    assert sorted(record["points"]["network"]) == ["0", "4"]


@pytest.mark.parametrize("argv, said", [
    (["--rollouts", "0"], "argument --rollouts: got 0, allowed: 1-4096"),
    (["--sims", "4,x"], "argument --sims: got 'x', allowed: a whole number 0-4096"),
    (["--sims", "5000"], "argument --sims: got 5000, allowed: 0-4096"),
])
def test_counts_are_checked_before_the_sweep_starts(argv, said, tmp_path, monkeypatch, capsys):
    """A bad count was a traceback when the sweep reached it (mcts-0 after the whole
    network sweep)."""
    monkeypatch.setattr(simulations, "measure", lambda spec, **kw: pytest.fail("measured"))
    with pytest.raises(SystemExit) as exit_info:
        simulations.main([*argv, "--out", str(tmp_path / "s")])
    assert exit_info.value.code == 2 and said in capsys.readouterr().err


def test_a_training_run_is_pinned_to_one_checkpoint(tiny_run, tmp_path, monkeypatch, capsys):
    """`--agent RUN` plays the checkpoint chosen when the sweep starts, named in every
    point; a resumed sweep reuses the points of that checkpoint only."""
    measured = []
    monkeypatch.setattr(simulations, "measure",
                        lambda spec, **kw: measured.append(spec) or _fake_point(spec))
    pinned = simulations.pinned(str(tiny_run))
    run_dir, step = pinned.rsplit(":", 1)
    assert run_dir == str(tiny_run) and step.isdigit()
    assert simulations.pinned("mcts-8") == "mcts-8"
    out = tmp_path / "sweep"
    argv = ["--agent", str(tiny_run), "--sims", "0,2", "--rollouts", "none", "--out", str(out)]
    assert simulations.main(argv) == 0
    assert measured == [f"{pinned}@0", f"{pinned}@2"]
    assert json.loads(out.with_suffix(".json").read_text())["agent"] == pinned
    assert simulations.main(argv) == 0 and len(measured) == 2  # the same checkpoint
    capsys.readouterr()
    for bad in ("0", "-5"):  # -5 used to judge all but the last 5 positions
        with pytest.raises(SystemExit):
            simulations.main([*argv, "--positions", bad])
        assert f"--positions: got '{bad}', allowed: a whole number >= 1" in (
            capsys.readouterr().err)
