"""bench.training_curve: a run's in-training solver sample against its wall time."""

import json

import pytest

from bench import training_curve


def _run(tmp_path):
    """A run directory with 4 iterations of 30 s, evaluated after the 2nd and 4th."""
    run = tmp_path / "run"
    run.mkdir()
    rows = [
        {"step": 1, "seconds": 30.0},
        {"step": 2, "seconds": 30.0, "mistake_rate": 0.10,
         "mistake/L1_R3": 0.25, "mistake/L3_R1": 0.02},
        {"step": 3, "seconds": 30.0},
        {"step": 4, "seconds": 30.0, "mistake_rate": 0.05,
         "mistake/L1_R3": 0.125, "mistake/L3_R1": 0.0},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"eval": {"solver_positions": 250, "num_simulations": 16}}
    (run / "config.json").write_text(json.dumps(config))
    return run


def test_the_points_are_the_evaluated_iterations_at_their_summed_time(tmp_path):
    records = [json.loads(line) for line in (_run(tmp_path) / "metrics.jsonl").open()]
    steps, minutes, values = training_curve.curve(records)
    assert steps == [2, 4]
    assert minutes == [1.0, 2.0]  # 2 and 4 iterations of 30 s
    assert sorted(values) == ["mistake/L1_R3", "mistake/L3_R1", "mistake_rate"]
    assert training_curve.points(steps, minutes, values) == [
        {"step": 2, "minutes": 1.0, "mean": 10.0, "L1_R3": 25.0, "L3_R1": 2.0},
        {"step": 4, "minutes": 2.0, "mean": 5.0, "L1_R3": 12.5, "L3_R1": 0.0},
    ]


def test_the_command_writes_the_figure_and_the_points(tmp_path, capsys):
    run = _run(tmp_path)
    png, points = tmp_path / "curve.png", tmp_path / "curve.json"
    assert training_curve.main([str(run), "--out", str(png), "--json", str(points)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads(points.read_text())
    assert [row["step"] for row in rows] == [2, 4] and rows[-1]["mean"] == 5.0
    assert "last: 2 min, mean 5.0%" in capsys.readouterr().out


def test_a_run_without_a_sample_is_one_error_line(tmp_path, capsys):
    run = tmp_path / "bare"
    run.mkdir()
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "seconds": 3.0}) + "\n")
    assert training_curve.main([str(run), "--out", str(tmp_path / "c.png")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_an_unwritable_json_path_is_refused_before_the_figure(tmp_path, capsys):
    run = _run(tmp_path)
    (tmp_path / "a_file").write_text("")
    png = tmp_path / "c.png"
    with pytest.raises(SystemExit) as stop:
        training_curve.main([str(run), "--out", str(png), "--json",
                             str(tmp_path / "a_file" / "y.json")])
    assert stop.value.code == 2
    assert "--json" in capsys.readouterr().err
    assert not png.exists()
