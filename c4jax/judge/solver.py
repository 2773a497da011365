"""Solver-labelled Pons positions and the move-mistake metric.

The six benchmark sets of Pascal Pons' Connect Four test protocol ship with the
package (``c4jax/data/pons``), each position with the exact score of every
legal move (see ``data/README.md`` in the shared notes). A chosen move is a
**mistake** when some legal move has a strictly better win/draw/loss outcome:
``sign(best score) > sign(chosen score)``. A position is **trivial** when all
legal moves have the same sign (no move can be a mistake there). A move is
**exact-best** when its score equals the best score (it wins fastest / loses
slowest). An illegal move counts as a mistake and never as exact-best.

``evaluate_agent`` reports, per set, the mistake rate over all positions and
over the non-trivial ones, and the exact-best rate, each with a 95% Wilson
interval and its counts.

``python -m c4jax.evaluate solver`` prints these for checkpoints and any agents
of the registry.

Shapes: P positions, A = 7 actions.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import numpy as np

from c4jax import env
from c4jax.judge import protocol
from c4jax.judge.protocol import Agent
from c4jax.judge.stats import format_rate, wilson_interval

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "pons"
SET_NAMES = ("L3_R1", "L2_R1", "L2_R2", "L1_R1", "L1_R2", "L1_R3")
# Sets pinned by MD5SUMS: all six, 1000 positions each.
STANDARD_SETS = SET_NAMES


class ChecksumError(ValueError):
    """A data file does not match its MD5SUMS entry."""


@dataclasses.dataclass(frozen=True)
class PonsSet:
    """One set of solver-labelled positions (host-side numpy)."""

    name: str
    moves: tuple[str, ...]  # [P] Pons move strings, columns 1-7
    score: np.ndarray  # [P] int32 exact value for the player to move
    move_scores: np.ndarray  # [P, A] int32 exact value of each move; 0 where illegal
    legal: np.ndarray  # [P, A] bool, column not full

    def __len__(self) -> int:
        return len(self.moves)

    def states(self) -> env.State:
        """[P] env states of the positions (jax arrays)."""
        return jax.device_put(states_from_moves(self.moves))

    def head(self, n: int | None) -> PonsSet:
        """The first ``n`` positions (all if ``n`` is None).

        Raises:
            ValueError: ``n`` below 1.
        """
        _check_positions(n)
        if n is None or n >= len(self):
            return self
        return dataclasses.replace(
            self,
            moves=self.moves[:n],
            score=self.score[:n],
            move_scores=self.move_scores[:n],
            legal=self.legal[:n],
        )


def read_md5sums(data_dir: Path) -> dict[str, str]:
    """{file name: md5 hex digest} from ``data_dir/MD5SUMS`` (empty if absent)."""
    path = Path(data_dir) / "MD5SUMS"
    if not path.exists():
        return {}
    sums = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.strip().lstrip("*")] = digest.lower()
    return sums


def md5_of(path: Path) -> str:
    """Hex MD5 digest of a file."""
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def verify_file(path: Path, sums: Mapping[str, str] | None = None) -> bool:
    """Checks ``path`` against the MD5SUMS of its folder.

    Returns:
        True if the file is listed and matches, False if it is not listed.

    Raises:
        ChecksumError: the file is listed and its digest differs.
    """
    path = Path(path)
    sums = read_md5sums(path.parent) if sums is None else sums
    if path.name not in sums:
        return False
    actual = md5_of(path)
    if actual != sums[path.name]:
        raise ChecksumError(
            f"{path}: MD5 {actual} does not match {sums[path.name]} in MD5SUMS"
            " (corrupted or modified data file)"
        )
    return True


def verify_all(data_dir: Path = DATA_DIR) -> list[str]:
    """Verifies every file listed in ``data_dir/MD5SUMS``; returns their names."""
    sums = read_md5sums(data_dir)
    for name in sums:
        verify_file(Path(data_dir) / name, sums)
    return sorted(sums)


def load_set(name: str, data_dir: Path | None = None, *, verify: bool = True) -> PonsSet:
    """Loads one Pons set, e.g. ``"L1_R1"``, checking its MD5 if MD5SUMS lists it.

    Args:
        name: set name (file ``<name>.jsonl``).
        data_dir: folder of the sets; the packaged data by default.
        verify: check the MD5 (files not listed in MD5SUMS are not checked).

    Raises:
        FileNotFoundError: no such set.
        ChecksumError: the file does not match MD5SUMS.
        ValueError: a malformed line.
    """
    data_dir = DATA_DIR if data_dir is None else Path(data_dir)
    path = data_dir / f"{name}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"no Pons set {name!r} at {path}")
    if verify:
        verify_file(path)
    return _parse(name, path.read_text())


@functools.lru_cache(maxsize=16)
def _load_packaged(name: str) -> PonsSet:
    return load_set(name)


def _parse(name: str, text: str) -> PonsSet:
    moves, score, move_scores, legal = [], [], [], []
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            row = record["move_scores"]
            if len(row) != env.NUM_ACTIONS:
                raise ValueError(f"{len(row)} move scores")
            moves.append(str(record["moves"]))
            score.append(int(record["score"]))
            legal.append([s is not None for s in row])
            move_scores.append([0 if s is None else int(s) for s in row])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{name} line {line_no}: malformed record ({e})") from e
    return PonsSet(
        name=name,
        moves=tuple(moves),
        score=np.asarray(score, np.int32).reshape(-1),
        move_scores=np.asarray(move_scores, np.int32).reshape(-1, env.NUM_ACTIONS),
        legal=np.asarray(legal, bool).reshape(-1, env.NUM_ACTIONS),
    )


def states_from_moves(moves: Sequence[str]) -> env.State:
    """[P] states (numpy leaves) of Pons move strings, built on the host.

    Equivalent to ``env.stack([env.from_moves(m) for m in moves])`` for
    positions that are not finished; wins are still detected and marked.
    """
    num = len(moves)
    own_lo = np.zeros(num, np.uint32)
    own_hi = np.zeros(num, np.uint32)
    all_lo = np.zeros(num, np.uint32)
    all_hi = np.zeros(num, np.uint32)
    num_moves = np.zeros(num, np.int32)
    for i, seq in enumerate(moves):
        heights = [0] * env.NUM_COLS
        boards = [[0, 0], [0, 0]]
        for ply, char in enumerate(seq):
            col = int(char) - 1
            if not 0 <= col < env.NUM_COLS or heights[col] == env.NUM_ROWS:
                raise ValueError(f"position {i}: bad move {char!r} in {seq!r}")
            row = heights[col]
            heights[col] += 1
            boards[ply % 2][row // 4] |= 1 << (8 * (row % 4) + col)
        mover = len(seq) % 2
        own_lo[i], own_hi[i] = boards[mover]
        all_lo[i] = boards[0][0] | boards[1][0]
        all_hi[i] = boards[0][1] | boards[1][1]
        num_moves[i] = len(seq)
    other_lo, other_hi = own_lo ^ all_lo, own_hi ^ all_hi  # the player who just moved
    won = np.asarray(env.has_four(other_lo, other_hi))
    winner = np.where(won, (num_moves + 1) % 2, -1).astype(np.int32)
    return env.State(
        own_lo=own_lo,
        own_hi=own_hi,
        all_lo=all_lo,
        all_hi=all_hi,
        num_moves=num_moves,
        winner=winner,
        terminated=won | (num_moves == env.NUM_CELLS),
    )


# --- The metric. ---


def judge_moves(move_scores: np.ndarray, legal: np.ndarray, chosen: np.ndarray) -> dict:
    """Per-position verdicts on chosen moves.

    Args:
        move_scores: [P, A] exact move values (ignored where illegal).
        legal: [P, A] bool.
        chosen: [P] int columns 0..6.

    Returns:
        Dict of [P] bool arrays: ``mistake`` (another legal move has a strictly
        better sign, or the move is illegal), ``trivial`` (all legal moves share
        one sign), ``exact_best`` (legal and equal to the best score),
        ``illegal``; and [P] int arrays ``best_sign`` (of the best legal move)
        and ``chosen_sign`` (of the chosen move; meaningless where illegal), each
        +1 win, 0 draw, -1 loss.
    """
    move_scores = np.asarray(move_scores)
    legal = np.asarray(legal, bool)
    chosen = np.asarray(chosen).astype(np.int64)
    rows = np.arange(len(chosen))
    in_range = (chosen >= 0) & (chosen < move_scores.shape[1])
    safe = np.clip(chosen, 0, move_scores.shape[1] - 1)
    chosen_legal = in_range & legal[rows, safe]
    signs = np.sign(move_scores)
    best = np.max(np.where(legal, move_scores, np.iinfo(np.int32).min), axis=1)
    best_sign = np.max(np.where(legal, signs, -2), axis=1)
    worst_sign = np.min(np.where(legal, signs, 2), axis=1)
    chosen_score = move_scores[rows, safe]
    mistake = ~chosen_legal | (best_sign > np.sign(chosen_score))
    return {
        "mistake": mistake,
        "trivial": best_sign == worst_sign,
        "exact_best": chosen_legal & (chosen_score == best),
        "illegal": ~chosen_legal,
        "best_sign": best_sign,
        "chosen_sign": np.sign(chosen_score),
    }


def summarize(verdicts: Mapping[str, np.ndarray]) -> dict:
    """Rates, 95% Wilson intervals and counts from ``judge_moves`` output.

    Returns:
        A JSON-friendly dict: ``positions``, ``mistakes``, ``mistake_rate``,
        ``mistake_ci``; ``nontrivial``, ``nontrivial_mistakes``,
        ``nontrivial_mistake_rate``, ``nontrivial_mistake_ci``; ``exact_best``,
        ``exact_best_rate``, ``exact_best_ci``; ``illegal``.
    """
    mistake = np.asarray(verdicts["mistake"], bool)
    nontrivial = ~np.asarray(verdicts["trivial"], bool)
    exact = np.asarray(verdicts["exact_best"], bool)
    n, n_nt = int(mistake.size), int(nontrivial.sum())
    m, m_nt, e = int(mistake.sum()), int((mistake & nontrivial).sum()), int(exact.sum())

    def rate(k, total):
        return k / total if total else float("nan")

    return {
        "positions": n,
        "mistakes": m,
        "mistake_rate": rate(m, n),
        "mistake_ci": wilson_interval(m, n),
        "nontrivial": n_nt,
        "nontrivial_mistakes": m_nt,
        "nontrivial_mistake_rate": rate(m_nt, n_nt),
        "nontrivial_mistake_ci": wilson_interval(m_nt, n_nt),
        "exact_best": e,
        "exact_best_rate": rate(e, n),
        "exact_best_ci": wilson_interval(e, n),
        "illegal": int(np.asarray(verdicts["illegal"]).sum()),
    }


STAGE_EDGES = (0, 10, 20, 30, 42)  # stones on the board: opening, early, middle, end


def mistakes_by_stage(
    num_moves: np.ndarray,
    move_scores: np.ndarray,
    legal: np.ndarray,
    chosen: np.ndarray,
    *,
    edges: Sequence[int] = STAGE_EDGES,
) -> list[dict]:
    """Where in the game the mistakes fell, and what each one gave away.

    Args:
        num_moves: [P] stones on the board before the move.
        move_scores: [P, A] exact move values (ignored where illegal).
        legal: [P, A] bool.
        chosen: [P] int columns 0..6.
        edges: increasing stone counts from 0 to 42; stage k holds the positions
            with ``edges[k] <= num_moves < edges[k + 1]``.

    Returns:
        One JSON-friendly dict per stage: ``stones`` ``[first, last]``,
        ``positions``, ``nontrivial``, ``mistakes``, and the mistakes by what they
        gave away: ``win_to_draw``, ``win_to_loss``, ``draw_to_loss`` (a legal move
        of a worse sign) and ``illegal``.

    Raises:
        ValueError: ``edges`` is not increasing from 0 to ``env.NUM_CELLS``.
    """
    edges = [int(e) for e in edges]
    if len(edges) < 2 or edges[0] != 0 or edges[-1] != env.NUM_CELLS or np.any(
        np.diff(edges) <= 0
    ):
        raise ValueError(f"edges must increase from 0 to {env.NUM_CELLS}, got {edges}")
    verdicts = judge_moves(move_scores, legal, chosen)
    best_sign, chosen_sign = verdicts["best_sign"], verdicts["chosen_sign"]
    legal_mistake = verdicts["mistake"] & ~verdicts["illegal"]
    kinds = {
        "win_to_draw": legal_mistake & (best_sign == 1) & (chosen_sign == 0),
        "win_to_loss": legal_mistake & (best_sign == 1) & (chosen_sign == -1),
        "draw_to_loss": legal_mistake & (best_sign == 0) & (chosen_sign == -1),
        "illegal": verdicts["illegal"],
    }
    stage = np.searchsorted(edges, np.asarray(num_moves), side="right") - 1  # [P]
    out = []
    for k in range(len(edges) - 1):
        here = stage == k
        last = edges[k + 1] - 1
        out.append({
            "stones": [edges[k], last],
            "positions": int(here.sum()),
            "nontrivial": int((here & ~verdicts["trivial"]).sum()),
            "mistakes": int((here & verdicts["mistake"]).sum()),
            **{name: int((here & kind).sum()) for name, kind in kinds.items()},
        })
    return out


def format_stages(stages: Sequence[Mapping]) -> str:
    """A table of ``mistakes_by_stage`` rows, one line per stage."""
    lines = ["  stones   positions  non-trivial  mistakes  win->draw  win->loss  draw->loss"]
    for s in stages:
        first, last = s["stones"]
        lines.append(
            f"  {first:>2}-{last:<2}   {s['positions']:>9}  {s['nontrivial']:>11}  "
            f"{s['mistakes']:>8}  {s['win_to_draw']:>9}  {s['win_to_loss']:>9}  "
            f"{s['draw_to_loss']:>10}"
        )
    return "\n".join(lines)


def expected_random_mistake_rate(pons_set: PonsSet, *, nontrivial_only: bool = False) -> float:
    """Exact expected mistake rate of a uniformly random legal mover.

    The mean over positions of the fraction of legal moves that are mistakes
    (over the non-trivial positions only if ``nontrivial_only``).
    """
    legal = pons_set.legal
    signs = np.sign(pons_set.move_scores)
    best_sign = np.max(np.where(legal, signs, -2), axis=1, keepdims=True)
    bad = legal & (signs < best_sign)
    fraction = bad.sum(axis=1) / legal.sum(axis=1)
    if nontrivial_only:
        worst_sign = np.min(np.where(legal, signs, 2), axis=1)
        fraction = fraction[best_sign[:, 0] != worst_sign]
    return float(fraction.mean())


# --- Evaluating an agent. ---

def _check_positions(n: int | None) -> None:
    """Refuses a count of positions below 1 (None: all of them)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1):
        raise ValueError(f"max_positions: got {n!r}, allowed: None (all) or a whole number >= 1")


def _check_batch_size(n: int | None) -> None:
    if n is not None and (isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1):
        raise ValueError(f"batch_size: got {n!r}, allowed: None (a set at once) or a whole"
                         " number >= 1")


def _check_set_names(names) -> None:
    """Refuses a bare string (read a character at a time) and unknown names, so that a
    typo in the last name does not throw away the sets evaluated before it."""
    if isinstance(names, str):
        raise ValueError(f"set_names: got the string {names!r}; give a sequence of names,"
                         f" e.g. ({names!r},)")
    unknown = [n for n in names if n not in SET_NAMES]
    if unknown:
        raise ValueError(f"set_names: unknown {unknown}, allowed: {', '.join(SET_NAMES)}")


def choose_moves(
    agent: Agent, key: jax.Array, pons_set: PonsSet, *, batch_size: int | None = None
) -> np.ndarray:
    """[P] int32 moves of ``agent`` on every position of the set.

    Positions go through in chunks of ``batch_size`` (all at once if None); the
    last chunk is padded so each chunk has the same shape (one compilation).
    The agent is called through ``protocol.batched_act``: jittable agents are
    compiled once (their bound arrays as arguments), host agents get numpy.
    """
    act = protocol.batched_act(agent)
    states = states_from_moves(pons_set.moves)
    num = len(pons_set)
    chunk = num if batch_size is None else max(1, min(batch_size, num))
    out = []
    for c, start in enumerate(range(0, num, chunk)):
        idx = np.arange(start, start + chunk) % num  # wrap-around padding
        part = jax.tree.map(lambda x, idx=idx: x[idx], states)
        moves = act(jax.random.fold_in(key, c), part)
        out.append(moves[: min(chunk, num - start)])
    return np.concatenate(out).astype(np.int32)


def evaluate_agent(
    agent: Agent,
    key: jax.Array,
    set_names: Sequence[str] = STANDARD_SETS,
    max_positions: int | None = None,
    *,
    batch_size: int | None = None,
) -> dict[str, dict]:
    """Mistake rates of ``agent`` on Pons sets.

    Args:
        agent: ``act(key, state[B]) -> [B] int32``.
        key: PRNG key (folded with the set's index).
        set_names: sets to evaluate, e.g. ``("L1_R1", "L2_R2")``.
        max_positions: use only the first this many positions of each set.
        batch_size: positions per agent call (all of a set at once if None).

    Returns:
        ``{set name: summarize(...) dict}`` (see ``summarize``).

    Raises:
        ValueError: ``max_positions`` or ``batch_size`` below 1, or ``set_names``
            not a sequence of the packaged sets' names, before any set is loaded.
    """
    _check_positions(max_positions)
    _check_batch_size(batch_size)
    _check_set_names(set_names)
    results = {}
    for i, name in enumerate(set_names):
        pons_set = _load_packaged(name).head(max_positions)
        chosen = choose_moves(agent, jax.random.fold_in(key, i), pons_set, batch_size=batch_size)
        verdicts = judge_moves(pons_set.move_scores, pons_set.legal, chosen)
        results[name] = summarize(verdicts)
    return results


def format_table(results_by_agent: Mapping[str, Mapping[str, dict]]) -> str:
    """Markdown table: one row per agent, per set "all% / non-trivial%" mistake rates."""
    sets = list(dict.fromkeys(s for r in results_by_agent.values() for s in r))
    header = "| agent | " + " | ".join(sets) + " |"
    lines = [header, "|---" * (len(sets) + 1) + "|"]
    for agent, results in results_by_agent.items():
        cells = []
        for s in sets:
            r = results.get(s)
            if r is None:
                cells.append("")
            else:
                cells.append(
                    f"{100 * r['mistake_rate']:.1f} / {100 * r['nontrivial_mistake_rate']:.1f}"
                )
        lines.append(f"| {agent} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_report(results: dict[str, dict[str, dict]]) -> str:
    """Per-set tables (agents ordered by mistake rate) with 95% Wilson intervals.

    Args:
        results: ``{agent name: {set name: summarize(...) dict}}``.
    """
    sets = list(dict.fromkeys(s for r in results.values() for s in r))
    width = max(6, *(len(a) for a in results))
    header = (
        f"  {'agent':<{width}}  {'mistakes, all':>22}  {'mistakes, non-trivial':>22}"
        f"  {'exact best move':>22}"
    )
    blocks = []
    for s in sets:
        rows = [(a, r[s]) for a, r in results.items() if s in r]
        rows.sort(key=lambda item: item[1]["mistake_rate"])
        first = rows[0][1]
        title = (
            f"{s}: {first['positions']} positions, {first['nontrivial']} non-trivial"
            " (rates in %, 95% Wilson intervals; fewer mistakes first)"
        )
        lines = [title, header]
        for a, r in rows:
            lines.append(
                f"  {a:<{width}}  {format_rate(r['mistake_rate'], r['mistake_ci']):>22}"
                f"  {format_rate(r['nontrivial_mistake_rate'], r['nontrivial_mistake_ci']):>22}"
                f"  {format_rate(r['exact_best_rate'], r['exact_best_ci']):>22}"
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
