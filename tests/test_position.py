"""The host-side Position agrees with the JAX env on rules, winners and legal moves."""

import random

import numpy as np
import pytest

from c4jax import env
from c4jax.position import Position


def test_random_games_agree_with_env():
    rng = random.Random(0)
    for _ in range(40):
        pos = Position.parse("")
        while not pos.over:
            pos = pos.play(rng.choice(pos.legal))
        for moves in (pos.moves, pos.moves[: rng.randrange(len(pos.moves))]):
            mine, state = Position.parse(moves), env.from_moves(moves)
            assert mine.over == bool(state.terminated)
            assert (mine.winner if mine.winner is not None else -1) == int(state.winner)
            legal = np.asarray(env.legal_action_mask(state))
            assert list(mine.legal) == [c for c in range(7) if legal[c]]
            assert env.render(state).replace("\n", "") == "".join(
                ".xo"[mine.grid[r][c] + 1] for r in reversed(range(6)) for c in range(7)
            )


def test_winning_lines_and_last_move():
    pos = Position.parse("1212121")
    assert pos.winner == 0 and pos.result() == "x"
    assert pos.winning_line == ((0, 0), (1, 0), (2, 0), (3, 0)) and pos.last_move == (3, 0)
    # A move that completes two lines at once marks both (7 cells).
    both = Position.parse("656551376443").play(5)
    assert both.winner == 0 and len(both.winning_line) == 7
    assert Position.parse("").last_move is None and Position.parse("").result() is None


@pytest.mark.parametrize(
    "moves, reason",
    [("12a", "'a' is not a column"), ("1111111", "column 1 is full"),
     ("12121213", "the game already ended"), (None, "must be a string")],
)
def test_bad_move_strings(moves, reason):
    with pytest.raises(ValueError, match=reason):
        Position.parse(moves)
    with pytest.raises(ValueError):
        Position.parse("").play(7)


def test_a_numpy_column_is_played_and_a_bool_is_not():
    """``pos.play(np.argmax(analysis.policy))`` was refused as "column np.int64(2):
    allowed 0-6", and ``play(True)`` played column 2."""
    start = Position.parse("4453")
    assert start.play(np.int64(2)).moves == start.play(2).moves == "44533"
    assert start.play(np.int32(6)).moves == "44537"
    for bad in (True, 2.0, np.float32(2), 7, np.int64(-1)):
        with pytest.raises(ValueError, match="allowed 0-6"):
            start.play(bad)
