"""Player on the tiny checkpoint: legal moves, wins in one, analyses, bad input."""

import logging

import jax
import numpy as np
import pytest

from c4jax import env
from c4jax.judge import arena, registry
from c4jax.player import Move, Player
from c4jax.store import checkpoints


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


@pytest.mark.slow
@pytest.mark.parametrize("moves", ["", "4", "111111", "1111112222223"])
def test_best_move_is_a_legal_zero_based_column(player, network_only, moves):
    legal = np.asarray(env.legal_action_mask(env.from_moves(moves)))
    for p in (player, network_only):
        move = p.best_move(moves)
        assert isinstance(move, Move)
        assert 0 <= move.index < env.NUM_COLS and legal[move.index]
        assert move.column == move.index + 1 and move.char == str(move.column)
        assert p.play(moves) == moves + move.char


@pytest.mark.slow
@pytest.mark.parametrize("moves", ["112233", "121212", "556677", "7121212", "445566"])
def test_search_takes_a_win_in_one(player, moves):
    wins = _winning_columns(moves)
    assert wins, "test position must have a win in one"
    assert player.best_move(moves).index in wins


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_analysis_action_is_the_best_move(player):
    for moves in ["", "4453", "121212"]:
        analysis = player.analyse(moves)
        assert analysis.action == player.best_move(moves).index
        assert analysis.move == player.best_move(moves)


@pytest.mark.slow
@pytest.mark.parametrize("moves", ["", "111111", "4453"])
def test_analysis_shows_what_the_search_decided_with(player, network_only, moves):
    legal = np.asarray(env.legal_action_mask(env.from_moves(moves)))
    analysis = player.analyse(moves)
    assert analysis.q.shape == analysis.visits.shape == (env.NUM_ACTIONS,)
    assert analysis.visits.sum() == player.num_simulations
    assert np.all(np.isnan(analysis.q[~legal])) and np.all(analysis.visits[~legal] == 0)
    visited = analysis.visits > 0
    assert np.all(np.abs(analysis.q[visited]) <= 1.0)
    assert np.all(np.isnan(analysis.q[~visited]))
    # The tiny preset plays the survivor of sequential halving: a most visited move.
    assert player.config.search.evaluation_move == "halving"
    assert analysis.visits[analysis.action] == analysis.visits.max()
    assert "sequential halving" in analysis.rule
    alone = network_only.analyse(moves)
    assert np.all(alone.visits == 0) and np.all(np.isnan(alone.q))
    assert alone.action == int(np.argmax(alone.policy))
    assert "network alone" in alone.rule


@pytest.mark.slow
def test_with_simulations_shares_the_network(player):
    other = player.with_simulations(8)
    assert other.num_simulations == 8 and other.variables is player.variables
    assert other.analyse("4453").visits.sum() == 8


@pytest.mark.slow
def test_with_simulations_keeps_the_seed(tiny_run):
    seeded = Player.from_checkpoint(tiny_run, num_simulations=16, seed=7)
    other = seeded.with_simulations(0)
    fresh = Player(seeded.config, seeded.variables, num_simulations=0, seed=7)
    assert other.seed == 7
    # the same random stream as a new player with that seed: the same tie-breaks
    np.testing.assert_array_equal(
        jax.random.key_data(other._key), jax.random.key_data(fresh._key)
    )
    assert not np.array_equal(
        jax.random.key_data(other._key), jax.random.key_data(jax.random.key(0))
    )


@pytest.mark.slow
def test_loading_prints_no_absl_warnings(tiny_run, caplog):
    with caplog.at_level(logging.WARNING):
        Player.from_checkpoint(tiny_run, num_simulations=0)
    assert not [r for r in caplog.records if r.name == "absl"], caplog.text


@pytest.mark.slow
def test_the_pretrained_agent_loads_and_beats_lookahead():
    """The agent shipped in the package (c4jax/pretrained): network variables only."""
    player = Player.pretrained(num_simulations=16)
    assert player.num_simulations == 16
    assert player.best_move("41414").index == 3  # o blocks x's vertical three in column 4
    name, agent = registry.make_agent("pretrained@16")
    assert name == "pretrained@16"
    lookahead = registry.make_agent("lookahead").agent
    result = arena.play_games(agent, lookahead, jax.random.key(0), 40, opening_moves=2)
    assert result.score >= 0.8, str(result)


@pytest.mark.slow
def test_a_damaged_best_checkpoint_falls_back_with_a_warning(tiny_run_copy):
    run, best = tiny_run_copy
    data = max((run / "checkpoints" / str(best) / "state").glob("**/d/*"),
               key=lambda p: p.stat().st_size)
    data.write_bytes(b"")  # an emptied data file
    with pytest.warns(checkpoints.DamagedCheckpointWarning, match=f"checkpoint {best} in"):
        player = Player.load(run, num_simulations=0)
    assert player.step != best
    assert 0 <= player.best_move("").index < 7
    with pytest.raises(ValueError, match=rf"checkpoint {best} in .* is damaged \(an empty data"):
        Player.load(run, step=best)
