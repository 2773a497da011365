"""The perfect player: exact scores match the Pons labels, no mistakes, a clear
error without the optional solver."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from c4jax import env
from c4jax.judge import arena, perfect, registry, solver

pytest.importorskip("bitbully", reason="the [solver] extra (bitbully) is not installed")

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = 40  # positions per set: the hard L1_R3 ones take up to ~2 s each


def _sample(name):
    return solver.load_set(name).head(SAMPLE)


@pytest.mark.parametrize("name", solver.SET_NAMES)
def test_move_scores_match_the_published_labels(name):
    pons = _sample(name)
    scores = perfect.move_scores(pons.states())
    labels = np.where(pons.legal, pons.move_scores, 0)
    np.testing.assert_array_equal(np.where(pons.legal, scores, 0), labels)
    assert np.all(scores[~pons.legal] == perfect.ILLEGAL)


def test_perfect_makes_no_mistake_and_plays_an_exact_best_move():
    _, agent = registry.make_agent("perfect")
    results = solver.evaluate_agent(agent, jax.random.key(0), solver.SET_NAMES, SAMPLE)
    for name, r in results.items():
        assert r["mistakes"] == 0 and r["illegal"] == 0, name
        assert r["exact_best_rate"] == 1.0, name


def test_boards_use_absolute_colours():
    #   .......
    #   .......
    #   .......
    #   ...o...    (after 4144)
    #   ...x...
    #   o..x...    x (first player) = 1, o = 2, whoever is to move
    for moves in ["414", "4144"]:
        board = perfect.boards(env.stack([env.from_moves(moves)]))[0]
        assert board[5, 3] == 1 and board[4, 3] == 1 and board[5, 0] == 2
        assert (board > 0).sum() == len(moves)
    assert perfect.boards(env.stack([env.from_moves("4144")]))[0][3, 3] == 2


def test_perfect_wins_from_the_empty_board_as_first_player_and_never_loses():
    _, agent = registry.make_agent("perfect")
    result = arena.play_games(agent, registry.make_agent("lookahead").agent, jax.random.key(0), 4)
    assert result.losses == 0 and result.wins == 4, str(result)


@pytest.mark.slow
def test_without_the_extra_a_clear_error_says_how_to_install(tmp_path):
    (tmp_path / "bitbully.py").write_text("raise ImportError('simulated: not installed')\n")
    env_vars = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "c4jax.evaluate", "match", "perfect", "random", "--games", "2"],
        capture_output=True, text=True, env=env_vars, cwd=ROOT, timeout=300,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "pip install 'c4jax[solver]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_move_judge_finds_no_mistake_of_perfect_and_many_of_random():
    _, perfect_agent = registry.make_agent("perfect")
    _, random_agent = registry.make_agent("random")
    for agent, opponent, is_perfect in [
        (perfect_agent, random_agent, True),
        (random_agent, perfect_agent, False),
    ]:
        judge = perfect.make_move_judge()
        arena.play_games(agent, opponent, jax.random.key(1), 4, observer=judge, opening_moves=2)
        summary = judge.summary()
        assert summary["positions"] == len(judge) > 4
        stages = judge.by_stage()
        assert sum(s["positions"] for s in stages) == summary["positions"]
        assert sum(s["mistakes"] for s in stages) == summary["mistakes"]
        assert all(s["mistakes"] == s["win_to_draw"] + s["win_to_loss"] + s["draw_to_loss"]
                   for s in stages)
        if is_perfect:
            assert summary["mistakes"] == 0 and summary["exact_best_rate"] == 1.0
        else:
            assert summary["mistakes"] > 0


@pytest.mark.slow
def test_match_judge_flag_prints_the_solver_verdict():
    out = subprocess.run(
        [sys.executable, "-m", "c4jax.evaluate", "match", "lookahead", "random", "--games", "4",
         "--judge"],
        capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "moves in these games, judged by the perfect solver" in out.stdout


def test_opening_values_are_the_known_connect_four_results():
    # The empty board is a first-player win; after one stone the second player wins
    # against a, b, f, g, draws against c and e, and loses against the centre.
    assert perfect.opening_values(0).tolist() == [1]
    assert perfect.opening_values(1).tolist() == [1, 1, 0, -1, 0, 1, 1]
    two = perfect.opening_values(2)
    assert two.shape == (49,) and two[3 * 7 + 3] == 1  # d d: the first player still wins
    with pytest.raises(ValueError, match="finished game"):
        perfect.position_values(solver.states_from_moves(["1212121"]))


def test_kept_results_count_the_games_that_kept_the_opening_s_result():
    # After one ply the player to move (the second) is owed [1, 1, 0, -1, 0, 1, 1].
    # Game 2i plays opening i with agent_a first (then agent_a is not the one to move),
    # game 2i + 1 the same opening with agent_a second (to move).
    owed_to_mover = np.repeat([1, 1, 0, -1, 0, 1, 1], 2)
    a_first = np.tile([True, False], 7)
    owed_to_a = np.where(a_first, -owed_to_mover, owed_to_mover)
    assert perfect.kept_results(owed_to_a.astype(np.int8), a_first, 1).all()
    outcomes = owed_to_a.copy()
    outcomes[3] = 0  # opening b, agent_a to move and owed a win: a draw drops it
    outcomes[6] = 0  # opening d, agent_a first and owed a win: a draw drops it
    outcomes[0] = 1  # opening a, agent_a first and owed a loss: a win is more than kept
    kept = perfect.kept_results(outcomes.astype(np.int8), a_first, 1)
    assert np.flatnonzero(~kept).tolist() == [3, 6]


def test_a_perfect_agent_keeps_every_opening_s_result_and_random_does_not():
    _, perfect_agent = registry.make_agent("perfect")
    _, random_agent = registry.make_agent("random")
    key = jax.random.key(3)
    ours = arena.play_games(perfect_agent, random_agent, key, 14, opening_moves=1,
                            every_opening=True)
    assert perfect.kept_results(ours.outcomes, ours.a_first, 1).all()
    theirs = arena.play_games(random_agent, perfect_agent, key, 14, opening_moves=1,
                              every_opening=True)
    kept = perfect.kept_results(theirs.outcomes, theirs.a_first, 1)
    assert kept.sum() < 14


def test_match_judge_from_every_opening_counts_the_kept_results(tmp_path, capsys):
    from c4jax import evaluate

    path = tmp_path / "m.json"
    argv = ["match", "perfect", "random", "--openings", "1", "--every-opening", "--judge",
            "--json", str(path)]
    assert evaluate.main(argv) == 0
    assert "perfect ended 14 of 14 games with at least the game-theoretic result" in (
        capsys.readouterr().out)
    saved = json.loads(path.read_text())
    assert saved["kept_result"] == {"kept": 14, "games": 14}
    assert sum(s["positions"] for s in saved["judged_by_stage"]) == saved["judged"]["positions"]
    assert sum(s["mistakes"] for s in saved["judged_by_stage"]) == 0
