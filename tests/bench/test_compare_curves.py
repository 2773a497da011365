"""Several runs' curves in one figure, from strength_curve and time_to_strength files."""

import json

from bench import compare_curves


def _strength_curve(tmp_path):
    rows = [{"step": s, "minutes": m,
             "results": {"A": {"mistake_rate": r}, "B": {"mistake_rate": r / 2}}}
            for s, m, r in ((50, 14.0, 0.08), (100, 24.0, 0.06))]
    path = tmp_path / "curve.json"
    path.write_text(json.dumps({"sims": 64, "rows": rows}))
    return path


def _time_to_strength(tmp_path):
    rows = [{"step": 80, "seconds": 770.0, "mean": 6.9},
            {"step": 40, "seconds": 420.0, "mean": 8.1}]
    path = tmp_path / "tts.json"
    path.write_text(json.dumps({"sims": 64, "rows": rows, "targets": {"6": None, "3": None}}))
    return path


def test_both_kinds_of_file_give_minutes_and_mean_rates(tmp_path):
    data = json.loads(_strength_curve(tmp_path).read_text())
    assert compare_curves.curve(data) == ([14.0, 24.0], [6.0, 4.5])
    data = json.loads(_time_to_strength(tmp_path).read_text())
    minutes, rates = compare_curves.curve(data)  # put in time order
    assert [round(m, 2) for m in minutes] == [7.0, 12.83] and rates == [8.1, 6.9]


def test_one_figure_for_both_kinds(tmp_path, capsys):
    out = tmp_path / "fig" / "both.png"
    argv = [str(_strength_curve(tmp_path)), str(_time_to_strength(tmp_path)),
            "--label", "a", "--label", "b", "--out", str(out)]
    assert compare_curves.main(argv) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {out}" in capsys.readouterr().out


def test_bad_input_is_one_error_line(tmp_path, capsys):
    curve = str(_strength_curve(tmp_path))
    assert compare_curves.main([curve, "--label", "a", "--label", "b",
                                "--out", str(tmp_path / "x.png")]) == 2
    assert "error: --label: 2 for 1 files" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"rows": [{"step": 1}]}))
    assert compare_curves.main([str(other), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {other}: not a strength_curve or time_to_strength file")
    assert not (tmp_path / "x.png").exists()
