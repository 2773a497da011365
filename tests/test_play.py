"""The terminal game: scripted input, bad input re-prompts, whole games, quitting,
rematches, starting positions, and Ctrl-C in a real process."""

import itertools
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from c4jax import env, play
from c4jax.player import Analysis, Player
from c4jax.run import cli


class FirstLegalPlayer:
    """A stand-in agent that always plays the leftmost open column."""

    def best_move(self, moves: str) -> int:
        legal = np.asarray(env.legal_action_mask(env.from_moves(moves)))
        return int(np.argmax(legal))

    def analyse(self, moves: str) -> Analysis:
        policy = np.zeros(env.NUM_ACTIONS, np.float32)
        action = self.best_move(moves)
        policy[action] = 1.0
        return Analysis(policy=policy, value=0.25, action=action)


def scripted(lines):
    """An ``input``-like function that answers with ``lines`` and then hits end of input."""
    answers = iter(lines)
    prompts = []

    def input_fn(prompt):
        prompts.append(prompt)
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None

    input_fn.prompts = prompts
    return input_fn


def test_bad_input_reprompts_with_a_reason_then_human_wins():
    # The agent fills columns 1-3 with the human (x o x o x o in each); the
    # human then completes the bottom row with column 4.
    lines = ["", "abc", "9", "0", " 1 ", "1", "1", "1", "2", "2", "2", "3", "3", "3", "4"]
    input_fn = scripted(lines)
    printed = []
    result = play.play_loop(FirstLegalPlayer(), input_fn, printed.append, human_first=True)
    assert result == "human"
    text = "\n".join(printed)
    assert "type a column number 1-7" in text  # empty line
    assert "'abc' is not a column number" in text
    assert "there is no column 9" in text
    assert "there is no column 0" in text
    assert "column 1 is full" in text
    assert "You win" in text
    assert len(input_fn.prompts) == len(lines)
    # The board is shown with a column-number line, and the agent's analysis.
    assert play.board_text("1") in printed
    assert "value of the position: +0.25" in text and "100.0%" in text and "^ play" in text


@pytest.mark.parametrize("ending", [["q"], ["quit"], []])  # [] = end of input
def test_quitting_returns_cleanly(ending):
    printed = []
    result = play.play_loop(FirstLegalPlayer(), scripted(["4", *ending]), printed.append, True)
    assert result == "quit"
    assert "quit" in printed[-1].lower()


def test_ask_human_first_reprompts():
    printed = []
    assert play.ask_human_first(scripted(["maybe", "N"]), printed.append) is False
    assert "'maybe'" in printed[0]
    assert play.ask_human_first(scripted(["y"]), printed.append) is True
    with pytest.raises(play.Quit):
        play.ask_human_first(scripted([]), printed.append)


def test_a_long_or_capitalised_answer_is_shown_short_and_as_typed():
    """The column prompt showed a long line cut short; the y/n prompts echoed it whole
    (100,000 characters), lowercased."""
    printed = []
    assert play.ask_human_first(scripted(["Maybe", "yes please " + "x" * 100_000, "y"]),
                                printed.append) is True
    assert printed[0].startswith("'Maybe': answer")
    assert len(printed[1]) < 300 and printed[1].startswith("'yes please xxx")


def test_check_column():
    assert play.check_column("3", "") == (2, None)
    assert play.check_column("7", "111111") == (6, None)
    assert play.check_column("1", "111111")[1] == "column 1 is full; choose another"
    assert play.check_column("-1", "")[0] is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("\u00b2", "'\u00b2' is not a column number"),  # "²".isdigit() is True, int() fails
        ("\u2460", "'\u2460' is not a column number"),  # circled 1, the same
        ("\u0663", "'\u0663' is not a column number"),  # Arabic-Indic 3: int() says 3
        ("+1", "'+1' is not a column number"),
        ("1_0", "'1_0' is not a column number"),
        ("08", "there is no column 8"),
        ("1" * 100_000, "there is no column 11111111111111111111... (100000 digits)"),
        ("x" * 100_000, "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'... (100000 characters)"),
    ],
)
def test_check_column_takes_ascii_digits_only(text, reason):
    column, message = play.check_column(text, "")
    assert column is None and reason in message and len(message) < 200, message
    assert play.check_column("04", "") == (3, None)


@pytest.mark.slow
def test_odd_digits_and_a_huge_line_on_stdin_reprompt_in_a_real_process():
    """``python -m c4jax.play`` fed ``²``, ``①`` and a 100,000-digit line: each is
    re-prompted with a reason (before: a traceback on the first), then q quits."""
    lines = ["\u00b2", "\u2460", "1" * 100_000, "q"]
    proc = subprocess.run(
        [sys.executable, "-m", "c4jax.play", "--sims", "0", "--first", "human"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "'\u00b2' is not a column number" in proc.stdout
    assert "'\u2460' is not a column number" in proc.stdout
    assert "there is no column 11111111111111111111... (100000 digits)" in proc.stdout
    assert proc.stdout.rstrip().endswith("You quit. Bye.")
    assert max(len(line) for line in proc.stdout.splitlines()) < 300


@pytest.mark.slow
def test_whole_game_against_the_tiny_agent(tiny_run):
    """The real agent, moving first, against a human who cycles through the columns."""
    player = Player.from_checkpoint(tiny_run, num_simulations=0)
    columns = itertools.cycle("1234567")
    printed = []
    result = play.play_loop(player, lambda prompt: next(columns), printed.append, False)
    assert result in ("human", "agent", "draw")
    text = "\n".join(printed)
    assert "Agent (x) plays column" in text and "policy" in text and "thinking..." in text
    assert printed[-1] in ("You win. Congratulations!", "The agent wins.", "The game is a draw.")


def _value_based_player():
    """A real value-based agent (a Grogu with untrained weights): no search."""
    import jax

    from c4jax.dqn import config as dqn_config
    from c4jax.dqn import qnet
    from c4jax.dqn.player import QPlayer

    config = dqn_config.DQNConfig(model=dqn_config.ModelConfig(kind="linear"))
    return QPlayer(config, qnet.init_params(qnet.make_q_network(config.model), jax.random.key(0)))


def test_a_value_based_agent_is_not_said_to_compile_a_search():
    printed = []
    result = play.play_loop(_value_based_player(), scripted(["q"]), printed.append, False)
    assert result == "quit"
    text = "\n".join(printed)
    assert "thinking... (the first move also compiles the network)" in text
    assert "compiles the search" not in text
    assert play.first_move_note(FirstLegalPlayer()) == "the first move also compiles the network"


def test_an_agent_that_searches_compiles_its_search_on_the_first_move():
    class Searching(FirstLegalPlayer):
        num_simulations = 16

    printed = []
    play.play_loop(Searching(), scripted(["q"]), printed.append, False)
    thinking = [line for line in printed if line.startswith("thinking...")]
    assert thinking == ["thinking... (the first move also compiles the search)"]


def test_step_accepts_an_iteration_last_or_best(capsys):
    assert [cli.checkpoint_step(t) for t in ("40", "last", "best")] == [40, "last", "best"]
    assert play.main(["runs/X", "--step", "newest"]) == 2
    err = capsys.readouterr().err
    assert "'newest' is not a checkpoint step: give an iteration, last or best" in err


@pytest.mark.slow
def test_main_names_the_checkpoint_it_chose_and_plays_the_newest_with_step_last(
    tiny_run, monkeypatch, capsys
):
    from c4jax.judge import registry
    from c4jax.store import checkpoints

    reader = checkpoints.open_for_reading(tiny_run)
    best, newest = checkpoints.best_step(reader), max(reader.all_steps())
    reader.close()
    monkeypatch.setattr("builtins.input", lambda prompt="": "q")
    assert play.main([str(tiny_run), "--sims", "0", "--first", "human"]) == 0
    out = capsys.readouterr().out
    assert f"Loaded {tiny_run}, iteration {best} (0 simulations per move)." in out
    assert registry.checkpoint_note(tiny_run, best, newest="--step last") in out
    assert play.main([str(tiny_run), "--sims", "0", "--first", "human", "--step", "last"]) == 0
    out = capsys.readouterr().out
    assert f"Loaded {tiny_run}, iteration {newest} (0 simulations per move)." in out
    assert "evaluation score" not in out  # a step given: no note


def test_main_missing_run_exits_2(tmp_path, capsys):
    assert play.main([str(tmp_path / "nope"), "--first", "human"]) == 2
    assert "not a run directory" in capsys.readouterr().err


@pytest.mark.parametrize("run_dir", ["", " ", "dqn:"])
def test_an_empty_run_dir_is_refused_not_read_as_this_folder(run_dir, tmp_path, monkeypatch,
                                                             capsys):
    """``play "$RUN"`` with RUN unset said it loaded the pretrained agent, then read the
    current folder as a run (a run directory there: that run, named as pretrained)."""
    (tmp_path / "checkpoints").mkdir()
    monkeypatch.chdir(tmp_path)
    assert play.main([run_dir, "--first", "human"]) == 2
    out, err = capsys.readouterr()
    assert err == ("error: run_dir: empty; give a run directory, or leave it out for the"
                   " pretrained agent\n") and "Loading" not in out


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--sims", "-3"], "argument --sims: got '-3', allowed: a whole number 0-4096"),
        # Before: accepted, and the search grew until the kernel's OOM killer (15.8 GB).
        (["--sims", "100000000"], "argument --sims: got 100000000, allowed: 0-4096"),
        (["--sims", "\u00b2"], "argument --sims: got '\u00b2', allowed: a whole number 0-4096"),
        (["--sims", "\u0663"], "argument --sims: got '\u0663'"),  # an Arabic-Indic 3
        (["--sims", "1" * 100_000], "(100000 digits), allowed: 0-4096"),
        (["runs/X", "--step", "\u00b2"], "argument --step: '\u00b2' is not a checkpoint step"),
        (["runs/X", "--step", "1" * 11], "argument --step: got 11111111111, allowed: 0-1000000000"),
        (["runs/X", "--step", "-1"], "argument --step: '-1' is not a checkpoint step"),
    ],
)
def test_number_options_are_ascii_digits_within_bounds(argv, problem, capsys):
    assert play.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and problem in err, err
    assert err.endswith(" (see: python -m c4jax.play --help)\n") and err.count("\n") == 1, err
    assert len(err) < 300, err


def test_sims_cap_is_the_shared_one(capsys):
    from c4jax import inputs

    assert play.main(["--sims", str(inputs.MAX_SIMULATIONS + 1)]) == 2
    assert f"allowed: 0-{inputs.MAX_SIMULATIONS}" in capsys.readouterr().err
    assert cli.checkpoint_step(str(inputs.MAX_STEP)) == inputs.MAX_STEP
    assert [cli.checkpoint_step(t) for t in ("0", "40", "last", "best")] == [0, 40, "last", "best"]


def test_a_very_long_moves_option_is_one_short_line(capsys):
    assert play.main(["--moves", "4" * 100_000]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --moves: got '4444") and "(100000 characters)" in err
    assert "at most 42 moves" in err and err.count("\n") == 1 and len(err) < 200


def test_board_text_marks_the_last_move_and_the_winning_line():
    text = play.board_text("1212121")  # x wins in column 1
    lines = text.splitlines()
    assert lines[-1].split() == list("1234567")
    assert "[X]" in lines[2]  # the last stone, part of the four
    assert sum(line.count("X") for line in lines) == 4 and "x" not in text
    assert text.count("o") == 3
    assert "\033[" not in text
    coloured = play.board_text("44", colour=True)
    assert "\033[31m" in coloured and "\033[33m" in coloured
    assert "[" in play.board_text("4") and "[" not in play.board_text("")


def test_format_analysis_marks_the_chosen_column():
    policy = np.array([0.05, 0.4, 0.0, 0.3, 0.1, 0.1, 0.05], np.float32)
    q = np.array([0.1, -0.2, np.nan, 0.5, 0.0, 0.0, -0.1], np.float32)
    visits = np.array([1, 3, 0, 8, 2, 1, 1], np.int32)
    analysis = Analysis(policy, 0.2, 3, q=q, visits=visits, rule="the most visited move")
    lines = play.format_analysis(analysis, "o").splitlines()
    assert lines[0].startswith("Agent (o) plays column 4.")
    columns = lines[1].split()[1:]
    marker = lines[-2]
    # The "^ play" marker stands under column 4's number.
    assert marker.index("^") == lines[1].index(columns[3]) - len("^ play") + 1
    assert "40.0%" in lines[2] and lines[3].split()[3] == "-"  # full column: no value
    assert lines[4].split()[1:] == [str(v) for v in visits]
    assert "the most visited move" in lines[-1]


def test_format_analysis_of_a_value_based_agent_shows_every_open_column():
    """A one-hot policy and no visits: the open columns are those with a value."""
    q = np.array([0.1, -0.2, np.nan, 0.5, 0.0, 0.0, -0.1], np.float32)  # column 3 full
    policy = np.eye(7, dtype=np.float32)[3]
    lines = play.format_analysis(Analysis(policy, 0.5, 3, q=q, rule="the highest Q")).splitlines()
    assert lines[2].split()[1:] == ["0.0%", "0.0%", "-", "100.0%", "0.0%", "0.0%", "0.0%"]
    assert lines[3].split()[1:] == ["+0.10", "-0.20", "-", "+0.50", "+0.00", "+0.00", "-0.10"]


def test_game_from_a_position_and_a_rematch():
    # From "23" (x to move) the human plays x and stacks four in column 7 while
    # the agent fills column 1; rematch, the agent plays x this time, and the
    # human quits.
    printed = []
    lines = ["y", "7", "7", "7", "7", "y", "n", "q"]
    results = play.play_games(
        FirstLegalPlayer(), scripted(lines), printed.append, None, moves="23"
    )
    assert results == ["human", "quit"]
    text = "\n".join(printed)
    assert "You win" in text and "You quit" in text
    assert play.board_text("23") in printed  # each game starts from the given position


def test_decline_rematch_and_fixed_first():
    printed = []
    lines = ["7", "7", "7", "7", "no"]
    assert play.play_games(FirstLegalPlayer(), scripted(lines), printed.append, "human") == [
        "human"
    ]
    assert printed[-1] == "Bye."
    # End of input at the rematch prompt also ends cleanly.
    assert play.play_games(FirstLegalPlayer(), scripted(lines[:4]), [].append, "human") == [
        "human"
    ]


def test_main_rejects_bad_starting_moves(capsys):
    assert play.main(["--moves", "44x"]) == 2
    assert "--moves" in capsys.readouterr().err
    assert play.main(["--moves", "1212121"]) == 2
    assert "already over" in capsys.readouterr().err


@pytest.mark.slow
def test_main_plays_from_a_position(tiny_run, monkeypatch, capsys):
    answers = iter(["1", "q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    assert play.main([str(tiny_run), "--sims", "0", "--first", "agent", "--moves", "4453"]) == 0
    out = capsys.readouterr().out
    assert "Loaded" in out and "thinking..." in out and "Agent (x) plays column" in out
    assert play.board_text("4453") in out


def _run_and_interrupt(args, marker, delay):
    """Starts ``python -m c4jax.play ARGS``, sends SIGINT ``delay`` s after ``marker``
    appears in its output; returns (exit code, output)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "c4jax.play", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu"},
    )
    chunks = []
    seen = threading.Event()

    def read():
        for line in proc.stdout:
            chunks.append(line)
            if marker in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(120), f"never printed {marker!r}: {''.join(chunks)}"
        time.sleep(delay)
        assert proc.poll() is None, "".join(chunks)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    finally:
        proc.kill()
    reader.join(10)
    return code, "".join(chunks)


@pytest.mark.slow
@pytest.mark.parametrize(
    "marker, delay", [("Loading", 0.1), ("thinking...", 0.2)], ids=["loading", "thinking"]
)
def test_ctrl_c_exits_130_with_a_short_message(tiny_run, marker, delay):
    # 2000 simulations: the first agent move compiles and searches for seconds.
    args = [str(tiny_run), "--sims", "2000", "--first", "agent"]
    code, out = _run_and_interrupt(args, marker, delay)
    assert code == 130, out
    assert "Interrupted. Bye." in out
    assert "Traceback" not in out and "Segmentation" not in out
    after = out.split(marker, 1)[1].strip().splitlines()
    assert after[-1] == "Interrupted. Bye." and len(after) <= 3, out


@pytest.mark.slow
def test_keys_typed_while_the_agent_thinks_are_not_echoed_and_dropped(tiny_run):
    """In a real terminal (a pty): "5<enter>" typed during the agent's first move
    neither shows up nor becomes the human's move."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "c4jax.play", str(tiny_run), "--sims", "2000",
         "--first", "agent"],
        stdin=slave, stdout=slave, stderr=slave, close_fds=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu", "NO_COLOR": "1"},
    )
    os.close(slave)
    output = bytearray()

    def read_until(text, timeout=120):
        deadline = time.monotonic() + timeout
        while text.encode() not in output:
            assert time.monotonic() < deadline, f"never printed {text!r}: {output.decode()}"
            try:
                output.extend(os.read(master, 4096))
            except OSError:  # the child closed the terminal
                assert text.encode() in output, output.decode()
        return output.decode()

    try:
        read_until("thinking...")
        os.write(master, b"5\n")
        read_until("your move")
        time.sleep(0.5)  # a typed-ahead "5" would be read as the move by now
        os.write(master, b"q\n")
        read_until("Bye.")
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        os.close(master)
    text = output.decode()
    thinking = text.split("thinking...", 1)[1].split("Agent (x) plays", 1)[0]
    assert "5" not in thinking  # not echoed into the board
    assert "You play column 5" not in text and "You quit" in text
