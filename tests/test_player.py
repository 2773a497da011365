"""Player on the tiny checkpoint: legal moves, wins in one, analyses, bad input."""

import numpy as np
import pytest

from c4jax import env
from c4jax.player import Player


@pytest.fixture(scope="module")
def player(tiny_run):
    # 16 Gumbel simulations visit every root move at least once, and terminal
    # values are exact, so even an untrained network takes a win in one.
    return Player.from_checkpoint(tiny_run, num_simulations=16)


@pytest.fixture(scope="module")
def network_only(tiny_run):
    return Player.from_checkpoint(tiny_run, num_simulations=0)


def _winning_columns(moves: str) -> list[int]:
    wins = []
    for column in range(env.NUM_COLS):
        try:
            state = env.from_moves(moves + str(column + 1))
        except ValueError:
            continue
        if int(state.winner) == len(moves) % 2:
            wins.append(column)
    return wins


@pytest.mark.parametrize("moves", ["", "4", "111111", "1111112222223"])
def test_best_move_is_a_legal_zero_based_column(player, network_only, moves):
    legal = np.asarray(env.legal_action_mask(env.from_moves(moves)))
    for p in (player, network_only):
        move = p.best_move(moves)
        assert isinstance(move, int)
        assert 0 <= move < env.NUM_COLS and legal[move]


@pytest.mark.parametrize("moves", ["112233", "121212", "556677", "7121212", "445566"])
def test_search_takes_a_win_in_one(player, moves):
    wins = _winning_columns(moves)
    assert wins, "test position must have a win in one"
    assert player.best_move(moves) in wins


@pytest.mark.parametrize("moves", ["", "111111", "111111222222333333"])
def test_analyse_policy_is_a_distribution_over_open_columns(player, network_only, moves):
    legal = np.asarray(env.legal_action_mask(env.from_moves(moves)))
    for p in (player, network_only):
        analysis = p.analyse(moves)
        assert analysis.policy.shape == (env.NUM_ACTIONS,)
        assert np.all(analysis.policy >= 0)
        assert analysis.policy.sum() == pytest.approx(1.0, abs=1e-5)
        assert np.all(analysis.policy[~legal] == 0)
        assert -1.0 <= analysis.value <= 1.0


@pytest.mark.parametrize(
    "moves",
    [
        "12a",  # not a digit
        "0",  # column out of range
        "8",
        "1111111",  # a full column
        "1212121",  # the game is over (vertical four)
    ],
)
def test_bad_move_strings_raise_value_error(player, moves):
    with pytest.raises(ValueError):
        player.best_move(moves)
    with pytest.raises(ValueError):
        player.analyse(moves)


def test_missing_run_directory_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="not a run directory"):
        Player.from_checkpoint(tmp_path / "nope", num_simulations=0)


def test_player_is_exported_at_the_package_level():
    import c4jax

    assert c4jax.Player is Player
    with pytest.raises(AttributeError):
        c4jax.NoSuchThing  # noqa: B018


def test_analysis_action_is_the_best_move(player):
    for moves in ["", "4453", "121212"]:
        assert player.analyse(moves).action == player.best_move(moves)
