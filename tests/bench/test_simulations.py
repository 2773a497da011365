"""bench.simulations: a sweep over simulation counts that continues where it stopped,
its table and its figure."""

import json

import pytest

from bench import simulations
from c4jax.judge import solver

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
    assert "| rollout MCTS | 1 |" in text and "| pretrained | 0 |" in text


def test_the_table_has_a_row_per_point_in_order():
    def point(rate, score, kept):
        return {"solver": {s: {"mistake_rate": rate} for s in solver.SET_NAMES},
                "perfect": {"score": score, "kept": kept, "games": 98}}

    record = {"agent": "runs/x", "points": {
        "network": {"64": point(0.01, 0.3, 70), "0": point(0.05, 0.1, 50)},
        "rollouts": {"8": point(0.3, 0.0, 30)}}}
    lines = simulations.table(record).splitlines()
    assert lines[2].startswith("| runs/x | 0 | 5.0 |") and lines[2].endswith("| 10.0% | 50 / 98 |")
    assert lines[3].startswith("| runs/x | 64 | 1.0 |")
    assert lines[4].startswith("| rollout MCTS | 8 | 30.0 |")
