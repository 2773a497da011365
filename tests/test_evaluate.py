"""The evaluate CLI: agent specs, match / elo / solver JSON, bad input exits 2."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults import fill, small_fs  # a real tmpfs: read-only, or full

from c4jax import evaluate, inputs
from c4jax.judge import arena, registry
from c4jax.store import outputs

ROOT = Path(__file__).resolve().parent.parent


def test_parse_lists():
    assert evaluate.parse_sims("0, 64,600") == [0, 64, 600]
    assert evaluate.parse_sims(f"0,{inputs.MAX_SIMULATIONS}") == [0, 4096]
    for bad in ("", "0,x", "-1", "1,1", "0,00", "64,0064", "\u0663", "\u00b2", "4097",
                "9" * 100_000):
        with pytest.raises(ValueError, match="--sims"):
            evaluate.parse_sims(bad)
    assert evaluate.parse_sets("L1_R1,L3_R1") == ["L1_R1", "L3_R1"]
    with pytest.raises(ValueError, match="unknown set 'L9_R9'.*allowed: L3_R1"):
        evaluate.parse_sets("L1_R1,L9_R9")


def test_help_lists_the_agent_specs_and_the_named_checkpoints(capsys):
    with pytest.raises(SystemExit):
        evaluate.main(["--help"])
    out = capsys.readouterr().out
    assert registry.describe() in out
    assert "runs/X:last@64" in out and "last (the newest checkpoint)" in out


# --- Progress: a bar on a terminal, one plain line per step elsewhere. ---


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere():
    assert arena.progress_mode(True, _Terminal()) == "bar"
    assert arena.progress_mode(True, io.StringIO()) == "lines"
    assert arena.progress_mode(False, _Terminal()) == "off"
    lines = io.StringIO()
    items = arena.progress_steps("ab", desc="test", unit="step", label=str.upper, stream=lines)
    assert list(items) == ["a", "b"]
    printed = lines.getvalue().splitlines()
    assert [line.split(",")[0] for line in printed] == ["test: step 1/2 (A)", "test: step 2/2 (B)"]
    bar = _Terminal()
    assert list(arena.progress_steps("ab", desc="test", unit="step", stream=bar)) == ["a", "b"]
    assert "\r" in bar.getvalue() and "2/2" in bar.getvalue()


def test_match_and_solver_print_one_line_per_step_when_not_on_a_terminal(capsys):
    argv = ["match", "lookahead", "random", "--games", "4", "--batch-size", "2"]
    assert evaluate.main(argv) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    steps = [line for line in err.splitlines() if line.startswith("lookahead vs random: chunk")]
    assert [line.split(",")[0] for line in steps] == [
        "lookahead vs random: chunk 1/2", "lookahead vs random: chunk 2/2"
    ]
    argv = ["solver", "--baselines", "random", "--sets", "L1_R1,L3_R1", "--positions", "4"]
    assert evaluate.main(argv) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    steps = [line.split(",")[0] for line in err.splitlines() if line.startswith("solver:")]
    assert steps == ["solver: set 1/2 (random on L1_R1)", "solver: set 2/2 (random on L3_R1)"]


@pytest.mark.slow
def test_output_piped_to_a_file_has_no_bar_frames(tmp_path):
    log = tmp_path / "elo.log"
    with log.open("w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "c4jax.evaluate", "elo", "lookahead", "win-if-you-can",
             "--games", "2"],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, timeout=300,
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
        )
    text = log.read_text()
    assert proc.returncode == 0, text
    assert "\r" not in text
    steps = [line for line in text.splitlines() if line.startswith("round robin: match")]
    assert [line.split(" (")[0] for line in steps] == [
        f"round robin: match {i}/3" for i in (1, 2, 3)  # random joins: three pairs
    ]
    assert "(random vs lookahead)" in steps[0]


# --- Bad input on the command line: message, exit 2, no traceback. ---


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["match", "mcst", "random"], "'mcst'"),
        (["match", "random", "nowhere/run@8"], "no run directory 'nowhere/run'"),
        (["match", "random", "lookahead", "--games", "0"], "--games"),
        (["elo", "random", "minimax-x"], "'minimax-x'"),
        (["solver", "--checkpoint", "nowhere/run"], "--checkpoint: 'nowhere/run'"),
        (["solver", "--sets", "L1_R1,L9"], "unknown set 'L9'"),
        (["solver", "--sims", "0,64"], "--sims needs --checkpoint"),
        (["solver", "--baselines", "random,bogus"], "'bogus'"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv, problem, capsys):
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err


@pytest.mark.parametrize(
    "argv, problem",
    [
        # Before: accepted (--batch-size 0 played on).
        (["match", "random", "random", "--batch-size", "0"], "--batch-size: got 0, allowed: 2-"),
        # A batch of one game played two (a pair) at once.
        (["match", "random", "random", "--batch-size", "1"], "--batch-size: got 1, allowed: 2-"),
        (["elo", "lookahead", "--batch-size", "1"], "--batch-size: got 1, allowed: 2-"),
        (["elo", "lookahead", "--batch-size", "99999"], "--batch-size: got 99999"),
        (["solver", "--batch-size", "0"], "--batch-size: got 0, allowed: 1-"),
        (["solver", "--positions", "0"], "--positions: got 0, allowed: 1-"),
        (["match", "random", "random", "--games", "9" * 25], "--games: got 9999"),  # traceback
        (["match", "random", "random", "--games", "\u0663"], "--games: got '\u0663'"),
        (["match", "random", "random", "--games", "1" * 100_000], "(100000 digits)"),
        (["match", "random", "random", "--openings", "21"], "--openings: got 21, allowed: 0-20"),
        (["match", "random", "random", "--seed", "-1"], "--seed: got '-1'"),
        (["elo", "random", "lookahead", "--games", "2", "--nope"], "unrecognized arguments"),
        (["match", "mcts-\u0663", "random"], "simulations '\u0663' is not a whole number"),
        (["match", "mcts-5000", "random"], "simulations 5000 is out of range (1-4096)"),
        (["match", "random", "pretrained@" + "9" * 30], "is out of range (0-4096)"),  # traceback
        (["match", "x" * 100_000, "random"], "(100000 characters): longer than 4096"),
        (["elo", "random", "lookahead", "--plot", "elo.txt"], "--plot: 'elo.txt' must be a .png"),
    ],
)
def test_numbers_are_ascii_digits_within_bounds(argv, problem, capsys):
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err, err
    assert err.count("\n") == 1 and len(err) < 600, err


def test_solver_sims_beyond_the_cap_is_one_line(tmp_path, capsys):
    argv = ["solver", "--checkpoint", str(tmp_path), "--sims", "0,4097", "--baselines", ""]
    assert evaluate.main(argv) == 2
    assert capsys.readouterr().err == "error: --sims: got 4097, allowed: 0-4096\n"


# --- Outputs that cannot be written: refused before the evaluation starts. ---


@pytest.fixture
def no_evaluation(monkeypatch):
    """Fails the test if an evaluation starts (an agent is built)."""

    def started(*args, **kwargs):
        raise AssertionError("the evaluation started")

    monkeypatch.setattr(registry, "make_agent", started)
    monkeypatch.setattr(registry, "make_agents", started)


def test_an_unwritable_json_or_plot_is_refused_before_the_evaluation(
    tmp_path, capsys, no_evaluation
):
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    for argv, problem in [
        (["--json", str(tmp_path)], f"error: --json: {str(tmp_path)!r} is a folder; give a file"),
        (["--json", str(blocker / "r.json")], f"error: --json: cannot write"
         f" {str(blocker / 'r.json')!r}: part of it is a file, not a folder"),
        (["--plot", str(blocker / "sub" / "e.png")], "error: --plot: cannot write"),
        (["--json", str(tmp_path / "x.png"), "--plot", str(tmp_path / "x.png")],
         f"error: --json and --plot: both name {str(tmp_path / 'x.png')!r}; give two files"),
    ]:
        assert evaluate.main(["elo", "random", "lookahead", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(problem) and err.count("\n") == 1, err
    assert blocker.read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["a-file"]


def test_the_output_check_leaves_nothing_when_the_evaluation_then_fails(tmp_path, capsys):
    out = tmp_path / "results" / "match.json"
    assert evaluate.main(["match", "mcst", "random", "--json", str(out)]) == 2
    assert "bad agent spec 'mcst'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # no results/ folder, no probe file


def test_a_read_only_json_folder_is_refused_before_the_evaluation(tmp_path, capsys, no_evaluation):
    with small_fs(tmp_path / "ro", "64k", read_only=True) as ro:
        out = ro / "results" / "match.json"
        assert evaluate.main(["match", "random", "lookahead", "--json", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: --json: cannot write {str(out)!r}: a read-only file system; give a path on a"
        " writable one\n"
    )


def test_a_full_disk_is_refused_before_the_evaluation_with_exit_74(tmp_path, capsys, no_evaluation):
    with small_fs(tmp_path / "full", "64k") as disk:
        fill(disk)
        code = evaluate.main(["match", "random", "lookahead", "--json", str(disk / "m.json")])
        left = os.listdir(disk)
    err = capsys.readouterr().err
    assert code == outputs.EXIT_IO == 74, err
    assert err.startswith(f"error: --json: cannot write {str(disk / 'm.json')!r}: No space left")
    assert err.count("\n") == 1 and left == ["filler"]


def test_a_disk_that_fills_up_during_the_evaluation_is_exit_74_and_leaves_nothing_partial(
    tmp_path, capsys
):
    """8 KB free: the 4 KB probes pass, the Elo chart (over 10 KB) does not fit."""
    with small_fs(tmp_path / "small", "8k") as disk:
        argv = ["elo", "lookahead", "--games", "2", "--plot"]
        code = evaluate.main([*argv, str(disk / "elo.png"), "--json", str(disk / "e.json")])
        left = os.listdir(disk)
    out, err = capsys.readouterr()
    assert code == 74, err
    assert "anchor random = 0" in out  # the results were printed
    assert err.splitlines()[-1] == (  # after the progress lines
        f"error: --plot: cannot write {str(disk / 'elo.png')!r}: No space left on device (the"
        " disk is full or failing); free some space or give a path on another disk; the results"
        " are printed above, not saved"
    )
    assert "Traceback" not in err and err.count("error:") == 1
    assert left == []  # no partial PNG, no temporary file


@pytest.mark.slow
def test_bad_sims_with_a_real_run_exits_2(tiny_run, capsys):
    argv = ["solver", "--checkpoint", str(tiny_run), "--sims", "0,abc", "--baselines", ""]
    assert evaluate.main(argv) == 2
    assert "--sims: 'abc'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_bad_spec_prints_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "c4jax.evaluate", "match", "randm", "lookahead", "--games", "2"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "bad agent spec 'randm'" in proc.stderr


# --- The subcommands on the tiny run. ---


@pytest.mark.slow
def test_match_json(tiny_run, tmp_path, capsys):
    out = tmp_path / "match.json"
    argv = ["match", f"{tiny_run}@0", "lookahead", "--games", "6", "--openings", "1"]
    assert evaluate.main([*argv, "--seed", "3", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wins" in printed and "95% CI" in printed
    result = json.loads(out.read_text())
    assert result["command"] == "match"
    assert result["a"].endswith("@0") and result["b"] == "lookahead"
    assert result["games"] == 6
    assert result["wins"] + result["draws"] + result["losses"] == 6
    for key in ("win", "draw", "loss", "score"):
        rate = result[f"{key}_rate" if key != "score" else "score"]
        low, high = result[f"{key}_ci"]
        assert 0.0 <= low <= rate <= high <= 1.0
    assert result["as_first"]["games"] == result["as_second"]["games"] == 3
    assert result["openings"] == 1 and result["seed"] == 3


@pytest.mark.slow
def test_a_run_without_a_step_names_the_checkpoint_it_chose(tiny_run, capsys):
    newest = registry.newest_step(tiny_run)
    argv = ["match", f"{tiny_run}@0", f"{tiny_run}:last@0", "--games", "2", "--openings", "1"]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    notes = [line for line in printed if line.startswith(f"{tiny_run}: ")]
    assert len(notes) == 1  # the :last agent needs none
    chosen = registry.make_agent(f"{tiny_run}@0").name
    step = int(chosen.rsplit("@", 1)[0].rsplit(":", 1)[1])
    assert notes[0] == registry.checkpoint_note(tiny_run, step, newest=f"{tiny_run}:last")
    assert any(f"{tiny_run}:{newest}@0" in line for line in printed)  # the :last agent


def test_match_from_every_opening(tmp_path, capsys):
    out = tmp_path / "match.json"
    argv = ["match", "lookahead", "random", "--openings", "1", "--every-opening"]
    assert evaluate.main([*argv, "--json", str(out)]) == 0
    assert "every 1-ply opening once per colour" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["games"] == 14 and result["every_opening"] is True
    assert evaluate.main(["match", "random", "random", "--openings", "5", "--every-opening"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --every-opening with --openings: ") and "got 5" in err
    assert "allowed: 0..4" in err


@pytest.mark.slow
def test_elo_json_and_plot(tiny_run, tmp_path, capsys):
    out, png = tmp_path / "elo.json", tmp_path / "elo.png"
    argv = ["elo", f"{tiny_run}@0", "lookahead", "--games", "4"]
    assert evaluate.main([*argv, "--plot", str(png), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Elo" in printed and "anchor random = 0" in printed
    result = json.loads(out.read_text())
    assert result["players"][0] == "random"  # added automatically
    assert len(result["players"]) == 3
    assert result["anchor"] == "random"
    assert result["ratings"]["random"]["elo"] == 0.0
    for rating in result["ratings"].values():
        low, high = rating["ci"]
        assert low <= rating["elo"] + 1e-6 and rating["elo"] <= high + 1e-6
        assert rating["games"] == 8  # 4 games against each of the 2 others
    assert len(result["matches"]) == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_solver_json(tiny_run, tmp_path, capsys):
    out = tmp_path / "solver.json"
    argv = ["solver", "--checkpoint", str(tiny_run), "--sims", "0,2", "--sets", "L1_R1,L3_R1"]
    argv += ["--positions", "8", "--baselines", "random", "--json", str(out)]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    assert "L1_R1: 8 positions" in printed and "exact best move" in printed
    notes = [line for line in printed.splitlines() if line.startswith(f"{tiny_run}: ")]
    assert len(notes) == 1 and "by evaluation score, iteration" in notes[0]
    result = json.loads(out.read_text())
    assert result["sets"] == ["L1_R1", "L3_R1"]
    assert result["agents"][0] == "random"
    assert [a.rsplit("@", 1)[1] for a in result["agents"][1:]] == ["0", "2"]
    for per_set in result["results"].values():
        assert set(per_set) == {"L1_R1", "L3_R1"}
        for r in per_set.values():
            assert r["positions"] == 8
            for key in ("mistake", "nontrivial_mistake", "exact_best"):
                low, high = r[f"{key}_ci"]
                rate = r[f"{key}_rate"]
                assert rate is None or 0.0 <= low <= rate <= high <= 1.0


def test_solver_checkpoint_takes_an_exported_network_and_points_a_value_based_run_away(
        tmp_path, capsys):
    """An exported folder is an agent spec everywhere else; ``--checkpoint`` called it
    "not a run directory", and a value-based run (``dqn:RUN`` or its folder) too."""
    from c4jax.dqn.config import ALGORITHM

    shipped = str(Path(evaluate.__file__).parent / "pretrained")
    argv = ["solver", "--checkpoint", shipped, "--sims", "0", "--sets", "L1_R1",
            "--positions", "4", "--baselines", ""]
    assert evaluate.main(argv) == 0
    assert f"{shipped}@0" in capsys.readouterr().out
    assert evaluate.main([*argv[:2], f"{shipped}:3", *argv[3:]]) == 2
    assert "is an exported network, which holds one step: drop :STEP" in capsys.readouterr().err
    (tmp_path / "config.json").write_text(json.dumps({"algorithm": ALGORITHM}))
    for spec in (f"dqn:{tmp_path}", str(tmp_path)):
        assert evaluate.main([*argv[:2], spec, *argv[3:]]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --checkpoint: ") and err.count("\n") == 1
        assert err.endswith(" is a value-based run, which does not search: give it in"
                            " --baselines\n")


def test_solver_refuses_an_agent_given_by_both_lists(tiny_run, capsys):
    """Two agents of one name would overwrite each other's results in the report."""
    argv = ["solver", "--checkpoint", str(tiny_run), "--sims", "0", "--sets", "L1_R1",
            "--positions", "2", "--baselines", f"random,{tiny_run}@0"]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: agent ") and "given twice: by --baselines and by" in err


@pytest.mark.slow
def test_a_damaged_best_checkpoint_is_skipped_with_one_warning_line(tiny_run_copy):
    run, best = tiny_run_copy
    (run / "checkpoints" / str(best) / "state" / "_METADATA").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "c4jax.evaluate", "match", f"{run}@0", "random", "--games", "2"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, proc.stderr
    assert f"checkpoint {best} in" in warnings[0]
    assert "is damaged (state/_METADATA is missing); using checkpoint" in warnings[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_ctrl_c_exits_130_without_a_traceback(tiny_run):
    proc = subprocess.Popen(
        [sys.executable, "-m", "c4jax.evaluate", "solver", "--checkpoint", str(tiny_run),
         "--sims", "2000", "--baselines", ""],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"},
    )
    time.sleep(8)  # loading, compiling or searching: all must stop the same way
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip().endswith("Interrupted.") and "Traceback" not in err
