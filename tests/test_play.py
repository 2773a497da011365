"""The terminal game: scripted input, bad input re-prompts, whole games, quitting."""

import itertools

import numpy as np
import pytest

from c4jax import env, play
from c4jax.player import Analysis, Player


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
    assert env.render(env.from_moves("1")) + play.COLUMN_LINE in printed
    assert "value estimate +0.25" in text and "1:100.0%" in text


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


def test_check_column():
    assert play.check_column("3", "") == (2, None)
    assert play.check_column("7", "111111") == (6, None)
    assert play.check_column("1", "111111")[1] == "column 1 is full; choose another"
    assert play.check_column("-1", "")[0] is None


def test_whole_game_against_the_tiny_agent(tiny_run):
    """The real agent, moving first, against a human who cycles through the columns."""
    player = Player.from_checkpoint(tiny_run, num_simulations=0)
    columns = itertools.cycle("1234567")
    printed = []
    result = play.play_loop(player, lambda prompt: next(columns), printed.append, False)
    assert result in ("human", "agent", "draw")
    text = "\n".join(printed)
    assert "Agent plays column" in text and "move probabilities" in text
    assert printed[-1] in ("You win. Congratulations!", "The agent wins.", "The game is a draw.")


def test_main_missing_run_exits_2(tmp_path, capsys):
    assert play.main([str(tmp_path / "nope"), "--first", "human"]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert play.main([str(tmp_path), "--sims", "-3"]) == 2
    assert "--sims" in capsys.readouterr().err
