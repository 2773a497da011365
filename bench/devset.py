"""Held-out solver-labelled positions shaped like a Pons set, for tuning.

Tuning a search setting on the Pons sets themselves and then reporting on them
would overfit the benchmark. This draws fresh positions the way the Pons sets
are described (``../shared/data/README.md``): random games stopped after a
number of stones drawn from the reference set's own histogram, kept when the
game's length under perfect play puts them in the same difficulty band, and
never a board of any Pons set (in any move order, or mirrored), nor one board
twice. Every move is scored by bitbully
(the ``[solver]`` extra), in the Pons files' JSON format, so
``c4jax.judge.solver.load_set(name, data_dir, verify=False)`` reads them.

    python -m bench.devset --like L1_R3 --num 1000 --seed 0 --out bench/data/dev_L1_R3.jsonl
"""

from __future__ import annotations

import argparse
import collections
import random
import sys

from bench import outfile
from c4jax.judge import perfect, solver

# Difficulty bands, in stones left to play under perfect play as ``moves_left``
# counts them: every position of the six sets falls in its own set's band.
BANDS = {"R1": (0, 14), "R2": (15, 28), "R3": (29, 42)}


def moves_left(num_stones: int, score: int) -> int:
    """Stones still to be played under perfect play, from the Pons score.

    Score convention (``shared/data/README.md``): 0 = draw (the board fills),
    else ``22 - |score|`` is the number of stones the winner has played when
    the game ends; positive = the player to move wins.
    """
    if score == 0:
        return 42 - num_stones
    winner_stones = 22 - abs(score)
    mover_is_first = num_stones % 2 == 0
    winner_is_first = mover_is_first if score > 0 else not mover_is_first
    total = 2 * winner_stones - 1 if winner_is_first else 2 * winner_stones
    return total - num_stones


def board_key(moves: str) -> tuple[tuple[int, int, int], ...]:
    """The board ``moves`` (digits 1-7) leads to, the same for every order of the same
    moves and for its mirror image: ``board_key("361") == board_key("163") ==
    board_key("527")``. Its stones as sorted (column, row, player) triples, the smaller
    of the board's and its mirror's."""

    def stones(sequence: str) -> tuple[tuple[int, int, int], ...]:
        heights, out = [0] * 7, []
        for i, digit in enumerate(sequence):
            column = int(digit) - 1
            out.append((column, heights[column], i % 2))
            heights[column] += 1
        return tuple(sorted(out))

    return min(stones(moves), stones("".join(str(8 - int(d)) for d in moves)))


def generate(like: str, num: int, seed: int, progress=None) -> list[dict]:
    """``num`` fresh positions shaped like the Pons set ``like`` (e.g. ``L1_R3``)."""
    try:
        import bitbully  # the [solver] extra
    except ImportError:
        raise perfect.MissingSolverError(
            f"bench.devset labels positions with the bitbully solver: {perfect.INSTALL_HINT}"
        ) from None
    reference = solver.load_set(like)
    histogram = collections.Counter(len(m) for m in reference.moves)
    lengths, weights = zip(*sorted(histogram.items()), strict=True)
    low, high = BANDS[like.split("_")[1]]
    # No board of any Pons set (the same position reached in another order, or its
    # mirror image, is the same test position), and each board once.
    seen = {board_key(m) for name in solver.SET_NAMES for m in solver.load_set(name).moves}
    engine = bitbully.BitBully()
    rng = random.Random(seed)
    rows: list[dict] = []
    while len(rows) < num:
        length = rng.choices(lengths, weights)[0]
        board, moves = bitbully.Board(), ""
        for _ in range(length):
            column = rng.choice(board.legal_moves())
            board.play(column)
            moves += str(column + 1)
            if board.is_game_over():
                break
        if board.is_game_over() or len(moves) != length or board_key(moves) in seen:
            continue
        scores = engine.score_all_moves(board)
        score = max(scores.values())
        if not low <= moves_left(length, score) <= high:
            continue
        seen.add(board_key(moves))
        rows.append(
            {
                "moves": moves,
                "score": score,
                "move_scores": [scores.get(c) for c in range(7)],
            }
        )
        if progress is not None and (len(rows) % 100 == 0 or len(rows) == num):
            progress(len(rows))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.devset", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--like", default="L1_R3", help="the Pons set to imitate")
    parser.add_argument("--num", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=outfile.path_arg("--out"), required=True)
    args = parser.parse_args(argv)
    if args.like not in solver.SET_NAMES:
        parser.error(f"--like: unknown set {args.like!r}; allowed: {', '.join(solver.SET_NAMES)}")
    if args.num < 1:
        parser.error(f"--num: got {args.num}, allowed: >= 1")
    try:
        rows = generate(
            args.like,
            args.num,
            args.seed,
            progress=lambda n: print(f"\r{n}/{args.num}", end="", file=sys.stderr, flush=True),
        )
    except perfect.MissingSolverError as e:
        parser.error(str(e))
    print(file=sys.stderr)
    outfile.write_json(args.out, rows, name="--out", lines=True)
    print(f"wrote {len(rows)} positions to {args.out}")


if __name__ == "__main__":
    main()
