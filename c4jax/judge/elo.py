"""Bradley-Terry (Elo) ratings from pairwise match results.

Model: player i scores against player j with expected score
``1 / (1 + 10 ** ((R_j - R_i) / 400))``; a draw counts as half a win for each
side. ``fit_ratings`` maximises the likelihood (Newton's method on the concave
log-likelihood) with one player anchored at 0 (by convention the random
player). ``rate`` adds 95% profile-likelihood intervals: for each player, the
ratings at which the log-likelihood, maximised over every other rating with
that one held fixed, falls ``chi2(1, 0.95) / 2 = 1.92`` below its maximum.
Such an interval always contains the fitted rating, and is lopsided where the
data are: 100-0 bounds a rating from below far better than from above. (A
percentile bootstrap can leave the ratings out where the top players score
nearly every point: every resample then falls at or below the fit.)

Perfect scores (say 100-0 against random) make the pure maximum likelihood
rating infinite, so by default every pair that played gets ``prior_draws = 1``
virtual drawn game (half a point to each side). This caps a 100-0 result at
about +920 Elo and barely moves ratings between close players; pass 0 for the
pure MLE (then ratings that would be infinite raise an error). With the prior,
the upper end of a perfect score's interval is set by it: 100-0 cannot rule out
a far larger gap.

Results tables: ``wins[i, j]`` games i won against j; ``draws[i, j]`` drawn
games recorded under the pair (i, j), so the draws between i and j are
``draws[i, j] + draws[j, i]`` (record each match once, in either cell).
``add_match`` fills both from an ``arena.MatchResult``.

Shapes: P players.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ELO_PER_NAT = 400.0 / math.log(10.0)  # Elo points per unit of the logistic scale
LEVEL = 0.95  # the intervals' confidence level
_BRACKET_NATS = 64.0  # an interval's end searched this far from the rating (~11,000 Elo)
_BISECTIONS = 40  # halvings of the bracket: far below a rating's printed precision


def add_match(wins: np.ndarray, draws: np.ndarray, i: int, j: int, result) -> None:
    """Adds a match of player i (agent_a) against j to the tables, in place.

    Args:
        wins: [P, P] int table.
        draws: [P, P] int table.
        i: index of agent_a.
        j: index of agent_b.
        result: anything with ``wins``, ``draws``, ``losses`` from i's side
            (an ``arena.MatchResult``).
    """
    wins[i, j] += result.wins
    wins[j, i] += result.losses
    draws[i, j] += result.draws


def _pair_tables(wins, draws) -> tuple[np.ndarray, np.ndarray]:
    """([P, P] points of row against column, [P, P] games between them)."""
    wins = np.asarray(wins, dtype=np.float64)
    draws = np.zeros_like(wins) if draws is None else np.asarray(draws, dtype=np.float64)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1] or draws.shape != wins.shape:
        raise ValueError(f"wins and draws must be square [P, P], got {wins.shape}, {draws.shape}")
    if (wins < 0).any() or (draws < 0).any():
        raise ValueError("negative counts in the results table")
    both_draws = draws + draws.T
    np.fill_diagonal(both_draws, 0.0)
    wins = wins.copy()
    np.fill_diagonal(wins, 0.0)
    points = wins + 0.5 * both_draws
    games = wins + wins.T + both_draws
    return points, games


def _reachable(adjacent: np.ndarray) -> set[int]:
    """Nodes reachable from node 0 along edges ``adjacent[i, j]``."""
    seen = {0}
    frontier = [0]
    while frontier:
        i = frontier.pop()
        for j in np.nonzero(adjacent[i])[0]:
            if int(j) not in seen:
                seen.add(int(j))
                frontier.append(int(j))
    return seen


def _check_connected(games: np.ndarray, players: Sequence[str]) -> None:
    seen = _reachable(games > 0)
    if len(seen) != games.shape[0]:
        missing = [p for k, p in enumerate(players) if k not in seen]
        raise ValueError(
            f"the games do not connect all players; not linked to {players[0]!r}: {missing}"
        )


def _check_finite(points: np.ndarray, games: np.ndarray) -> None:
    """Pure MLE is finite iff "scored against" is strongly connected."""
    scored = points > 0  # [P, P] row took at least half a point from column
    if len(_reachable(scored)) != points.shape[0] or len(_reachable(scored.T)) != points.shape[0]:
        raise ValueError(
            "maximum likelihood ratings are infinite: some group of players scored every"
            " point (or none) against the rest; use prior_draws > 0"
        )


def _loglik(points: np.ndarray, r: np.ndarray) -> float:
    """The log-likelihood of ratings ``r`` ([P], logistic scale): every ordered pair's
    ``points * log sigmoid(r_row - r_column)``."""
    diff = r[:, None] - r[None, :]
    return float(np.sum(points * -np.logaddexp(0.0, -diff)))


def _fit(points: np.ndarray, games: np.ndarray, anchor: int, *,
         fixed: dict[int, float] | None = None, start: np.ndarray | None = None,
         tol: float = 1e-10) -> np.ndarray:
    """[P] ratings on the logistic scale (anchor = 0) by damped Newton ascent.

    ``fixed`` holds more ratings at given values (a profile), ``start`` is where the
    free ratings start (default 0).
    """
    num = points.shape[0]
    held = {anchor: 0.0, **(fixed or {})}
    free = np.array([k for k in range(num) if k not in held], dtype=np.int64)
    r = np.zeros(num) if start is None else np.array(start, dtype=np.float64)
    for k, value in held.items():
        r[k] = value
    current = _loglik(points, r)
    if free.size == 0:
        return r
    for _ in range(200):
        diff = r[:, None] - r[None, :]
        p = 1.0 / (1.0 + np.exp(-diff))  # [P, P] expected score of row vs column
        grad = np.sum(points - games * p, axis=1)
        w = games * p * (1.0 - p)
        hess = np.diag(w.sum(axis=1)) - w  # negative Hessian (a weighted Laplacian)
        g, h = grad[free], hess[np.ix_(free, free)]
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(h, g, rcond=None)[0]
        t = 1.0
        while True:
            trial = r.copy()
            trial[free] += t * step
            value = _loglik(points, trial)
            if value >= current - 1e-12 or t < 1e-8:
                break
            t *= 0.5
        r, gain, current = trial, value - current, value
        if np.max(np.abs(t * step)) < tol or abs(gain) < tol * 1e-3:
            break
    return r


def _drop(level: float) -> float:
    """How far the log-likelihood falls at a ``level`` interval's ends: half the
    chi-square(1) quantile, ``z**2 / 2`` (1.92 at 0.95)."""
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2.0)
    return 0.5 * z * z


def _profile_interval(points: np.ndarray, games: np.ndarray, anchor: int, k: int,
                      best: np.ndarray, level: float) -> tuple[float, float]:
    """Player k's interval on the logistic scale: where its profile log-likelihood
    (every other free rating refitted with k's held) falls ``_drop(level)`` below the
    maximum at ``best`` ([P], the fit). An end not reached within ``_BRACKET_NATS``
    (possible only without a prior) is infinite."""
    target = _loglik(points, best) - _drop(level)

    def profile(x: float) -> float:
        start = best.copy()
        start[k] = x
        return _loglik(points, _fit(points, games, anchor, fixed={k: x}, start=start))

    ends = []
    for sign in (-1.0, 1.0):
        inside, width = 0.0, 1.0  # distances from best[k]: inside still above target
        while profile(best[k] + sign * width) >= target:
            inside = width
            width *= 2.0
            if width > _BRACKET_NATS:
                ends.append(sign * math.inf)
                break
        else:
            outside = width
            for _ in range(_BISECTIONS):  # the profile is concave: one crossing a side
                middle = 0.5 * (inside + outside)
                if profile(best[k] + sign * middle) >= target:
                    inside = middle
                else:
                    outside = middle
            ends.append(best[k] + sign * 0.5 * (inside + outside))
    return ends[0], ends[1]


def fit_ratings(
    players: Sequence[str],
    wins: np.ndarray,
    draws: np.ndarray | None = None,
    *,
    anchor: str | None = None,
    prior_draws: float = 1.0,
) -> np.ndarray:
    """Maximum likelihood Bradley-Terry ratings on the Elo scale.

    Args:
        players: P names.
        wins: [P, P] games row won against column.
        draws: [P, P] draws (see the module docstring), or None.
        anchor: the player rated 0 (default ``"random"`` if present, else the first).
        prior_draws: virtual drawn games added to every pair that played.

    Returns:
        [P] float64 Elo ratings, ``anchor`` at exactly 0.
    """
    points, games = _pair_tables(wins, draws)
    if points.shape[0] != len(players):
        raise ValueError(f"{len(players)} players but a {points.shape[0]}x{points.shape[0]} table")
    anchor_index = _anchor_index(players, anchor)
    _check_connected(games, list(players))
    points, games = _with_prior(points, games, prior_draws)
    _check_finite(points, games)
    return _fit(points, games, anchor_index) * ELO_PER_NAT


def _anchor_index(players: Sequence[str], anchor: str | None) -> int:
    if anchor is None:
        return list(players).index("random") if "random" in players else 0
    if anchor not in players:
        raise ValueError(f"anchor {anchor!r} is not one of the players {list(players)}")
    return list(players).index(anchor)


def _with_prior(points, games, prior_draws):
    played = games > 0
    return points + 0.5 * prior_draws * played, games + prior_draws * played


@dataclasses.dataclass(frozen=True)
class EloResult:
    """Ratings with their intervals (host-side numpy)."""

    players: tuple[str, ...]  # [P]
    ratings: np.ndarray  # [P] float64 Elo, anchor at 0
    ci_low: np.ndarray  # [P] float64, the interval's lower end (the anchor's: 0)
    ci_high: np.ndarray  # [P] float64, its upper end
    anchor: str
    points: np.ndarray  # [P, P] float64 points of row against column (no prior)
    games: np.ndarray  # [P, P] float64 games between row and column
    level: float = LEVEL  # the intervals' confidence level

    def order(self) -> np.ndarray:
        """[P] player indices, strongest first."""
        return np.argsort(-self.ratings, kind="stable")

    def table(self) -> str:
        """A plain-text table, strongest first."""
        width = max(6, *(len(p) for p in self.players))
        percent = f"{100 * self.level:g}% CI"
        lines = [
            f"{'rank':>4}  {'player':<{width}}  {'Elo':>7}  {percent:>17}  {'games':>6}  score",
        ]
        for rank, k in enumerate(self.order(), 1):
            n = self.games[k].sum()
            score = self.points[k].sum() / n if n else float("nan")
            ci = f"[{self.ci_low[k]:.0f}, {self.ci_high[k]:.0f}]"
            lines.append(
                f"{rank:>4}  {self.players[k]:<{width}}  {self.ratings[k]:>7.0f}  {ci:>17}"
                f"  {int(n):>6}  {100 * score:.1f}%"
            )
        lines.append(f"(anchor {self.anchor} = 0; profile-likelihood intervals)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def rate(
    players: Sequence[str],
    wins: np.ndarray,
    draws: np.ndarray | None = None,
    *,
    anchor: str | None = None,
    prior_draws: float = 1.0,
    level: float = LEVEL,
) -> EloResult:
    """Ratings and their profile-likelihood intervals (the module docstring).

    Args:
        players: P names.
        wins: [P, P] games row won against column.
        draws: [P, P] draws (see the module docstring), or None.
        anchor: the player rated 0 (default ``"random"`` if present, else the first);
            its interval is [0, 0].
        prior_draws: virtual drawn games per pair that played (0 = pure MLE).
        level: the intervals' confidence level, in (0, 1).

    Returns:
        An ``EloResult``.

    Raises:
        ValueError: naming ``level`` outside (0, 1); and as ``fit_ratings``.
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: got {level}, allowed: between 0 and 1")
    players = tuple(players)
    ratings = fit_ratings(players, wins, draws, anchor=anchor, prior_draws=prior_draws)
    points, games = _pair_tables(wins, draws)
    anchor_index = _anchor_index(players, anchor)
    fitted_points, fitted_games = _with_prior(points, games, prior_draws)
    best = ratings / ELO_PER_NAT
    low, high = np.zeros(len(players)), np.zeros(len(players))
    for k in range(len(players)):
        if k != anchor_index:
            ends = _profile_interval(fitted_points, fitted_games, anchor_index, k, best, level)
            low[k], high[k] = (end * ELO_PER_NAT for end in ends)
    return EloResult(
        players=players,
        ratings=ratings,
        ci_low=low,
        ci_high=high,
        anchor=players[anchor_index],
        points=points,
        games=games,
        level=level,
    )


def crosstable(names: Sequence[str], points: np.ndarray, games: np.ndarray) -> str:
    """Score % of each row player against each column player (``-`` on the diagonal).

    Args:
        names: [P] player names.
        points: [P, P] points of row against column (``EloResult.points``).
        games: [P, P] games between them (``EloResult.games``).
    """
    width = max(len(n) for n in names)
    tags = [f"#{k + 1}" for k in range(len(names))]
    lines = ["score % of row vs column:", " " * (width + 5) + "".join(f"{t:>7}" for t in tags)]
    for k, name in enumerate(names):
        cells = "".join(
            f"{100 * points[k, j] / games[k, j]:>7.1f}" if games[k, j] else f"{'-':>7}"
            for j in range(len(names))
        )
        lines.append(f"{tags[k]:>3}  {name:<{width}}" + cells)
    return "\n".join(lines)


def tick_labels(names: Sequence[str], *, limit: int = 40) -> list[str]:
    """The plot's names: each longer than ``limit`` characters (a run's path) cut to
    its end, where a spec's ``@sims`` and the run's own folder are, behind "...";
    the cut is made longer where it would make two labels the same."""
    longest = max((len(n) for n in names), default=0)
    while limit < longest:
        labels = [n if len(n) <= limit else "..." + n[-(limit - 3):] for n in names]
        if len(set(labels)) == len(set(names)):
            return labels
        limit += 20
    return list(names)


def plot(result: EloResult, path: str | Path, *, title: str = "Elo ratings") -> Path:
    """Saves a horizontal bar chart with 95% intervals as a PNG (Agg, no pyplot).

    Returns:
        The path written.
    """
    # matplotlib is heavy and only needed for a chart: imported when one is drawn.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    order = result.order()[::-1]  # strongest at the top
    names = [result.players[k] for k in order]
    ratings = result.ratings[order]
    # The interval is drawn from its ends (an infinite end, possible only without a
    # prior, is drawn to the edge of the chart).
    finite = np.concatenate([ratings, result.ci_low[np.isfinite(result.ci_low)],
                             result.ci_high[np.isfinite(result.ci_high)]])
    reach = 0.05 * (finite.max() - finite.min() + 1.0)
    low = np.where(np.isfinite(result.ci_low[order]), result.ci_low[order],
                   finite.min() - reach)
    high = np.where(np.isfinite(result.ci_high[order]), result.ci_high[order],
                    finite.max() + reach)
    fig = Figure(figsize=(6.0, 0.5 * len(names) + 1.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    y = np.arange(len(names))
    ax.barh(y, ratings, color="tab:blue", alpha=0.6)
    ax.hlines(y, low, high, color="black", linewidth=1.0)
    ax.plot(np.concatenate([low, high]), np.concatenate([y, y]), "|", color="black",
            markersize=8)
    ax.plot(ratings, y, "o", color="black")
    ax.set_yticks(y, tick_labels(names))
    ax.axvline(0.0, color="gray", linewidth=0.8)
    ax.set_xlabel(f"Elo ({result.anchor} = 0), {100 * result.level:g}% profile-likelihood "
                  "interval")
    ax.set_title(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, format="png", dpi=100)
    return path
