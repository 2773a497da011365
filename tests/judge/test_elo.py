"""Bradley-Terry / Elo fitting."""

import warnings

import numpy as np
import pytest

from c4jax.judge import elo
from c4jax.judge.arena import MatchResult

PLAYERS = ("random", "lookahead", "mcts", "minimax", "weak")
TRUE = np.array([0.0, 250.0, 600.0, 750.0, -150.0])


def _simulate(ratings, games_per_pair, draw_rate=0.1, seed=0):
    """Round robin with draws: win and loss probabilities keep the BT expected score."""
    rng = np.random.default_rng(seed)
    num = len(ratings)
    wins = np.zeros((num, num), np.int64)
    draws = np.zeros((num, num), np.int64)
    for i in range(num):
        for j in range(i + 1, num):
            e = 1.0 / (1.0 + 10 ** ((ratings[j] - ratings[i]) / 400))
            d = min(draw_rate, 2 * e, 2 * (1 - e))
            w, dr, lo = rng.multinomial(games_per_pair, [e - d / 2, d, 1 - e - d / 2])
            wins[i, j], wins[j, i], draws[i, j] = w, lo, dr
    return wins, draws


def test_recovers_known_ratings():
    wins, draws = _simulate(TRUE, 2000)
    fitted = elo.fit_ratings(PLAYERS, wins, draws, prior_draws=0.0)
    assert fitted[0] == 0.0
    np.testing.assert_allclose(fitted, TRUE, atol=40)
    # The small default prior barely moves well-measured ratings.
    np.testing.assert_allclose(elo.fit_ratings(PLAYERS, wins, draws), fitted, atol=5)


def test_intervals_contain_the_ratings_and_cover_the_truth():
    wins, draws = _simulate(TRUE, 400, seed=1)
    result = elo.rate(PLAYERS, wins, draws)
    assert result.anchor == "random" and result.ratings[0] == 0.0
    assert result.ci_low[0] == result.ci_high[0] == 0.0
    assert np.all(result.ci_low <= result.ratings + 1e-9)
    assert np.all(result.ratings <= result.ci_high + 1e-9)
    covered = (result.ci_low - 10 <= TRUE) & (TRUE <= result.ci_high + 10)
    assert covered.sum() >= 4, (result.table(), TRUE)
    width = result.ci_high[1:] - result.ci_low[1:]
    assert np.all((width > 20) & (width < 250)), width
    text = result.table()
    assert text.splitlines()[1].split()[1] == "minimax"
    assert "random" in text and "profile-likelihood" in text and "95% CI" in text


def test_intervals_cover_the_true_ratings_about_95_percent_of_the_time():
    """200 simulated pools of three, 60 games a pair, no draws (the model exactly):
    the 95% intervals of the two rated players should cover their true ratings in
    roughly 95% of the pools (measured: 94.5%)."""
    truth = np.array([0.0, 200.0, 350.0])
    hits = []
    for seed in range(200):
        wins, draws = _simulate(truth, 60, draw_rate=0.0, seed=seed)
        result = elo.rate(["random", "b", "c"], wins, draws)
        hits.extend((result.ci_low[1:] <= truth[1:]) & (truth[1:] <= result.ci_high[1:]))
    assert 0.90 <= np.mean(hits) <= 0.98, np.mean(hits)


# The round robin of the shipped agent, 40 games a pair (bench/results/strength/
# elo_strong_zen5_1285.json): every pair above lookahead is nearly a clean sweep.
SATURATED_PLAYERS = ("random", "lookahead", "minimax-5", "mcts-1000", "net@0", "net@64")
SATURATED_WINS = np.array([
    [0, 1, 0, 0, 0, 0], [39, 0, 0, 0, 0, 0], [40, 40, 0, 16, 0, 0],
    [40, 40, 22, 0, 0, 0], [40, 40, 40, 39, 0, 4], [40, 40, 40, 40, 24, 0]])
SATURATED_DRAWS = np.zeros((6, 6), np.int64)
SATURATED_DRAWS[2, 3], SATURATED_DRAWS[3, 4], SATURATED_DRAWS[4, 5] = 2, 1, 12


def test_a_pool_of_clean_sweeps_has_intervals_around_its_ratings():
    """Measured with the bootstrap this replaced: net@64 rated 1697 with [1056, 1572],
    every resample below the fit. Each interval must contain its rating, and the
    sweeps bound the strong players from below well above the searchers."""
    result = elo.rate(SATURATED_PLAYERS, SATURATED_WINS, SATURATED_DRAWS)
    assert np.all(result.ci_low <= result.ratings) and np.all(result.ratings <= result.ci_high)
    top, net0, mcts, minimax = (SATURATED_PLAYERS.index(n)
                                for n in ("net@64", "net@0", "mcts-1000", "minimax-5"))
    assert result.ci_low[top] > result.ratings[mcts] + 150
    assert result.ci_low[net0] > result.ratings[minimax] + 150
    # 40-0 sweeps bound a rating far better from below than from above.
    assert (result.ci_high[top] - result.ratings[top]
            > result.ratings[top] - result.ci_low[top])


def test_an_interval_end_is_where_the_likelihood_falls_by_1_92():
    """Two players, pure MLE: the profile is the likelihood itself, 9 log s(d) + log
    s(-d) with s the logistic function; its maximum is at d = ln 9."""

    def loglik(elo_points):
        d = elo_points / elo.ELO_PER_NAT
        return -9 * np.logaddexp(0.0, -d) - np.logaddexp(0.0, d)

    r = elo.rate(["random", "a"], np.array([[0, 1], [9, 0]]), prior_draws=0.0)
    assert r.ratings[1] == pytest.approx(400 * np.log10(9), abs=1e-6)
    drop = 0.5 * 1.959963984540054 ** 2
    for end in (r.ci_low[1], r.ci_high[1]):
        assert loglik(end) == pytest.approx(loglik(r.ratings[1]) - drop, abs=1e-6)
    assert r.ci_low[1] < r.ratings[1] < r.ci_high[1]
    wider = elo.rate(["random", "a"], np.array([[0, 1], [9, 0]]), prior_draws=0.0, level=0.99)
    assert wider.ci_low[1] < r.ci_low[1] and wider.ci_high[1] > r.ci_high[1]
    assert "99% CI" in wider.table()


@pytest.mark.parametrize("level", [0.0, 1.0, 95.0, -0.5])
def test_a_level_outside_0_1_is_refused(level):
    with pytest.raises(ValueError, match="level"):
        elo.rate(["random", "a"], np.array([[0, 1], [9, 0]]), level=level)


def test_two_players_closed_form():
    # Player 0 scores 60 wins + 40 draws / 2 = 80 points in 120 games (2/3), so
    # player 1 is 400 log10(2) below: the MLE matches the observed score exactly.
    wins = np.array([[0, 60], [20, 0]])
    draws = np.array([[0, 40], [0, 0]])
    r = elo.fit_ratings(["random", "b"], wins, draws, prior_draws=0.0)
    assert r[0] == 0.0
    assert r[1] == pytest.approx(-400 * np.log10(2.0), abs=1e-6)
    # Draws may be recorded in either cell; the default prior adds one virtual draw.
    r = elo.fit_ratings(["random", "b"], wins, draws.T)
    assert r[1] == pytest.approx(-400 * np.log10(80.5 / 40.5), abs=1e-6)


def test_perfect_scores_need_the_prior():
    wins = np.array([[0, 0], [100, 0]])
    with pytest.raises(ValueError, match="infinite"):
        elo.fit_ratings(["random", "mcts"], wins, prior_draws=0.0)
    r = elo.fit_ratings(["random", "mcts"], wins)
    assert r[1] == pytest.approx(400 * np.log10(100.5 / 0.5), abs=1e-6)


def test_a_perfect_score_has_an_interval_not_a_point():
    """100-0: 100 games cannot rule out a 2-3% loss rate (the lower end), nor bound the
    gap from above beyond what the one virtual draw allows (the upper end)."""
    result = elo.rate(["random", "a"], np.array([[0, 0], [100, 0]]))
    assert result.ratings[1] == pytest.approx(400 * np.log10(100.5 / 0.5), abs=1e-6)
    assert result.ci_low[1] < result.ratings[1] - 150, (result.ci_low, result.ci_high)
    assert result.ci_high[1] > result.ratings[1] + 150
    # More games narrow it from below (the lower end rises), as they should.
    more = elo.rate(["random", "a"], np.array([[0, 0], [1000, 0]]))
    assert more.ci_low[1] > result.ci_low[1] + 150


def test_disconnected_players_are_rejected():
    wins = np.zeros((3, 3))
    wins[0, 1] = wins[1, 0] = 5
    with pytest.raises(ValueError, match="connect"):
        elo.fit_ratings(["random", "a", "b"], wins)


def test_add_match_and_plot(tmp_path):
    players = ["random", "lookahead", "mcts"]
    wins = np.zeros((3, 3), np.int64)
    draws = np.zeros((3, 3), np.int64)

    def match(w, d, lo):
        empty = np.zeros(0)
        return MatchResult(w, d, lo, empty, empty, empty)

    elo.add_match(wins, draws, 1, 0, match(90, 2, 8))
    elo.add_match(wins, draws, 2, 0, match(99, 0, 1))
    elo.add_match(wins, draws, 2, 1, match(70, 10, 20))
    assert wins[0, 1] == 8 and wins[1, 0] == 90 and draws[1, 0] == 2
    result = elo.rate(players, wins, draws)
    assert result.ratings[2] > result.ratings[1] > 0
    path = elo.plot(result, tmp_path / "elo.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_long_names_are_cut_to_distinct_ends_and_the_plot_still_fits(tmp_path):
    base = "/home/user/" + "experiments/" * 8
    names = ["random", base + "a/run@64", base + "b/run@64", "/x/" + "y" * 60 + "/run@64"]
    labels = elo.tick_labels(names)
    assert labels[0] == "random" and all(len(label) <= 40 for label in labels)
    assert labels[1].endswith("a/run@64") and labels[2].endswith("b/run@64")
    assert labels[3] == "..." + names[3][-37:]
    twins = ["/a/" + "z" * 50 + "/run@64", "/b/" + "z" * 50 + "/run@64"]
    assert elo.tick_labels(twins) == twins  # no cut keeps them apart: in full
    result = elo.EloResult(
        players=tuple(names), ratings=np.array([0.0, 300.0, 310.0, 200.0]),
        ci_low=np.array([0.0, 250.0, 260.0, 150.0]), ci_high=np.array([0.0, 350.0, 360.0, 250.0]),
        anchor="random", points=np.zeros((4, 4)), games=np.zeros((4, 4)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Tight layout not applied" with the names in full
        path = elo.plot(result, tmp_path / "elo.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_infinite_interval_end_is_drawn_to_the_edge(tmp_path):
    """Without a prior an end can be infinite; the chart still draws the interval."""
    result = elo.EloResult(
        players=("random", "lookahead", "minimax"), ratings=np.array([0.0, 532.0, 700.0]),
        ci_low=np.array([0.0, 400.0, 600.0]), ci_high=np.array([0.0, 648.0, np.inf]),
        anchor="random", points=np.zeros((3, 3)), games=np.zeros((3, 3)))
    path = elo.plot(result, tmp_path / "elo.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
