"""bench/judge_run.py: the battery's files are the record's, its tables reproduce the
record's numbers from them, bad flags are named, and a tiny run is judged and resumed."""

import json
import shutil
from pathlib import Path

import pytest

from bench import judge_run

ROOT = Path(__file__).resolve().parents[2]
STRENGTH = ROOT / "bench" / "results" / "strength"


def test_the_default_battery_writes_the_files_the_record_keeps():
    # The endgame-weight entry of docs/experiments/replay.md ran these six commands.
    prefix = STRENGTH / "strong_xeon_eg25"
    battery = judge_run.stages("runs/strong_xeon_eg25", judge_run.Settings())
    assert [s.name for s in battery] == list(judge_run.STAGES)
    for stage in battery:
        assert judge_run.output(prefix, stage).is_file(), stage
        recorded = json.loads(judge_run.output(prefix, stage).read_text())
        if recorded["command"] == "match":  # the same agents as the command that made it
            assert stage.argv[1] == recorded["a"].replace(":1443@", ":last@")
            assert stage.argv[2] == recorded["b"]
            assert ("--judge" in stage.argv) == ("judged" in recorded)
    assert battery[0].argv[:4] == ("solver", "--checkpoint", "runs/strong_xeon_eg25:last",
                                   "--sims")
    # A step given is kept; without one, the last checkpoint.
    assert judge_run.stages("runs/X:700", judge_run.Settings())[1].argv[1] == "runs/X:700@64"


def test_the_report_reproduces_the_record_s_tables():
    text = judge_run.report([STRENGTH / "strong_xeon_eg25", STRENGTH / "strong_xeon_s0"],
                            judge_run.Settings())
    lines = text.splitlines()
    # Full sets, as in the endgame-weight entry: L1_R3 and the mean at 0 / 64 / 600.
    assert "| strong_xeon_eg25 (1443) | 0 | 2.9 | 1.9 | 6.6 | 1.3 | 3.5 | 10.9 | 4.52 |" in lines
    assert "| strong_xeon_s0 (1488) | 64 | 0.0 | 0.2 | 1.9 | 0.0 | 1.1 | 8.5 | 1.95 |" in lines
    assert "| strong_xeon_eg25 (1443) | 600 | 0.0 | 0.0 | 1.6 | 0.0 | 0.9 | 4.0 | 1.08 |" in lines
    row = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in lines}
    assert row["results kept against `perfect` (of 98)"] == ["73 / 98", "71 / 98 |"]
    assert row["non-trivial mistakes there at 0-9 stones"][0] == "21 / 233 = 9.0%"
    score = row["against `perfect` at 600 simulations, same openings: score"][0]
    assert score == "35.2% [26.5, 45.1] (+23 =23 -52)"
    empty = row["empty board, first player, 10 games at 600 simulations"]
    assert empty == ["+10 =0 -0 (0 mistakes in 410 moves)",
                     "+8 =0 -2 (4 mistakes in 361 moves) |"]


def test_missing_files_are_na_not_an_error(tmp_path):
    shutil.copy(STRENGTH / "strong_xeon_eg25_0_64.json", tmp_path / "part_0_64.json")
    text = judge_run.report([tmp_path / "part"], judge_run.Settings())
    assert "| part (1443) | 64 | 0.0 | 0.1 | 3.0 | 0.1 | 2.4 | 6.8 | 2.07 |" in text
    assert "| part | 600 | n/a |" in text
    assert "| results kept against `perfect` (of 98) | n/a |" in text


def test_a_prefix_with_no_file_is_an_error_not_a_table_of_na(tmp_path, capsys):
    """``--report`` or ``--compare`` with a typo printed tables of n/a, exit status 0
    (with a run: after the whole battery)."""
    for argv in (["--report", str(tmp_path / "typo")],
                 ["runs/X", "--out", str(tmp_path / "o"), "--compare", str(tmp_path / "typo")],
                 ["--report", str(STRENGTH / "strong_xeon_s0"), "--compare",
                  str(tmp_path / "typo")]):
        assert judge_run.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --") and "no file of the battery at" in err
        assert "typo_0_64.json" in err
    assert judge_run.main(["--report", str(STRENGTH / "strong_xeon_s0")]) == 0


@pytest.mark.parametrize("argv, message", [
    (["runs/X"], "--out: give the prefix"),
    ([], "give a run to judge, or --report PREFIX"),
    (["runs/X", "--out", "o", "--report", "p"], "not both"),
    (["runs/X", "--out", "o", "--stages", "sets,nope"], "--stages: got 'sets,nope'"),
    (["runs/X", "--out", "o", "--empty-games", "3"], "--empty-games: got 3"),
    (["runs/X", "--out", "o", "--low", "0"], "--low: got '0'"),
    (["runs/X", "--out", "o", "--against", "pretrained@64"], "--against: got"),
    # A reference agent cannot play "@64": refused before the first stage, not at h2h.
    (["runs/X", "--out", "o", "--against", "random"],
     "--against: got 'random', allowed: an agent that searches"),
    (["runs/X", "--out", "o", "--against", "mcts-200"], "--against: got 'mcts-200'"),
])
def test_bad_arguments_name_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        judge_run.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_a_tiny_run_is_judged_and_a_second_call_resumes(tiny_run, tmp_path, capsys):
    out = tmp_path / "judged" / "tiny"
    argv = [str(tiny_run), "--out", str(out), "--low", "2", "--high", "3",
            "--empty-games", "2", "--openings", "1", "--positions", "8"]
    assert judge_run.main(argv) == 0
    printed = capsys.readouterr().out
    names = sorted(p.name for p in out.parent.iterdir())
    assert names == sorted(["tiny_0_2.json", "tiny_vs_pretrained_2_every1.json",
                            "tiny_3_vs_perfect_every1.json", "tiny_3_vs_perfect_empty2.json",
                            "tiny_2_vs_perfect_empty2.json", "tiny_3.json"])
    kept = json.loads((out.parent / "tiny_3_vs_perfect_every1.json").read_text())
    assert kept["games"] == 14 and 0 <= kept["kept_result"]["kept"] <= 14
    assert f"| results kept against `perfect` (of 14) | {kept['kept_result']['kept']} / 14 |" \
        in printed
    for sims in (0, 2, 3):  # every simulation count has its row of numbers
        assert any(line.startswith("| tiny (") and f"| {sims} | " in line and "n/a" not in line
                   for line in printed.splitlines()), printed
    # A second call runs only what is missing.
    (out.parent / "tiny_3.json").unlink()
    assert judge_run.main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("exists, skipped") == 5
    assert "sets_high: python -m c4jax.evaluate solver" in printed
    assert (out.parent / "tiny_3.json").is_file()
    # The checkpoint is pinned once, and a file of another one (or of other
    # positions) is not taken for this one's.
    ckpt = judge_run.pinned(str(tiny_run))
    assert ckpt.startswith(f"{tiny_run}:") and ckpt.rsplit(":", 1)[1].isdigit()
    assert f"judging {ckpt}" in printed
    h2h = out.parent / "tiny_vs_pretrained_2_every1.json"
    assert json.loads(h2h.read_text())["a"] == f"{ckpt}@2"
    for key, other in (("a", f"{tiny_run}:1@2"), ("b", "runs/elsewhere:5@2")):
        data = json.loads(h2h.read_text())
        h2h.write_text(json.dumps({**data, key: other}))
        assert judge_run.main(argv) == 2
        err = capsys.readouterr().err
        assert f"is not the h2h stage of {ckpt} ({key} '{other}'" in err
        h2h.write_text(json.dumps(data))
    sets = out.parent / "tiny_0_2.json"
    sets.write_text(json.dumps({**json.loads(sets.read_text()), "positions": 9}))
    assert judge_run.main(argv) == 2
    assert "is not the sets stage of" in capsys.readouterr().err
    assert judge_run.main([*argv, "--force", "--stages", "sets"]) == 0
