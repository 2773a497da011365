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


def test_mean_curve_averages_the_runs_where_they_all_have_points():
    a = ([2.0, 4.0, 6.0], [8.0, 6.0, 4.0])
    b = ([3.0, 7.0], [10.0, 6.0])
    grid, mean = compare_curves.mean_curve([a, b], step=1.0)
    assert grid == [3.0, 4.0, 5.0, 6.0]  # the span both cover
    assert mean == [(7.0 + 10.0) / 2, (6.0 + 9.0) / 2, (5.0 + 8.0) / 2, (4.0 + 7.0) / 2]
    assert compare_curves.mean_curve([([1.0, 2.0], [5.0, 4.0]), ([3.0, 4.0], [5.0, 4.0])]) \
        == ([], [])


def test_runs_with_one_label_are_drawn_as_one_group(tmp_path, monkeypatch):
    import matplotlib.figure

    saved = []
    real_savefig = matplotlib.figure.Figure.savefig

    def savefig(fig, *args, **kwargs):
        saved.append(fig)
        return real_savefig(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    first = _time_to_strength(tmp_path)
    second = tmp_path / "tts_seed1.json"
    second.write_text(json.dumps({"sims": 64, "targets": {"6": None},
                                  "rows": [{"step": 40, "seconds": 400.0, "mean": 7.5},
                                           {"step": 80, "seconds": 800.0, "mean": 6.1}]}))
    out = tmp_path / "seeds.png"
    argv = [str(first), str(second), str(_strength_curve(tmp_path)),
            "--label", "preset", "--label", "preset", "--label", "other", "--out", str(out)]
    assert compare_curves.main(argv) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    (ax,) = saved[0].axes
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["preset (mean of 2 runs)", "other"]
    lines = ax.get_lines()  # two seeds, their mean, the other run, the 6% line
    seeds = [line for line in lines if line.get_label().startswith("_") and line.get_alpha()]
    (mean,) = [line for line in lines if line.get_label() == "preset (mean of 2 runs)"]
    assert len(seeds) == 2
    assert {s.get_color() for s in seeds} == {mean.get_color()}
    assert mean.get_xdata()[0] == 7.0 and mean.get_xdata()[-1] == 770.0 / 60
