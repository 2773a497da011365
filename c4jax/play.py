"""``python -m c4jax.play [RUN_DIR]``: play Connect Four against a trained agent.

Usage:
    python -m c4jax.play                 # the agent shipped in the package
    python -m c4jax.play runs/20261121-090000
    python -m c4jax.play runs/X --sims 200 --first human

Type a column 1-7 to drop a stone, ``q`` to quit. After each of its moves the
agent shows its value estimate and its move probabilities. Illegal input
(not a number, out of range, a full column) re-prompts with the reason.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from c4jax import checkpoints, env
from c4jax.player import Player

COLUMN_LINE = "1234567"
QUIT_WORDS = ("q", "quit", "exit")

InputFn = Callable[[str], str]
PrintFn = Callable[[str], None]


class Quit(Exception):
    """The human asked to stop (``q`` or end of input)."""


def board_text(moves: str) -> str:
    """The board after ``moves`` (``env.render``) with a column-number line below."""
    return env.render(env.from_moves(moves)) + COLUMN_LINE


def _read(input_fn: InputFn, prompt: str) -> str:
    """One stripped line of input; raises Quit on EOF, Ctrl-C or a quit word."""
    try:
        text = input_fn(prompt)
    except (EOFError, KeyboardInterrupt):
        raise Quit from None
    text = text.strip()
    if text.lower() in QUIT_WORDS:
        raise Quit
    return text


def check_column(text: str, moves: str) -> tuple[int | None, str | None]:
    """Validates a typed column against the position after ``moves``.

    Returns:
        ``(column 0-6, None)`` for a legal move, else ``(None, reason)``.
    """
    if not text:
        return None, "type a column number 1-7 (or q to quit)"
    if not text.isdigit():
        return None, f"{text!r} is not a column number; type 1-7 (or q to quit)"
    column = int(text)
    if not 1 <= column <= env.NUM_COLS:
        return None, f"there is no column {column}; type 1-7"
    if moves.count(str(column)) >= env.NUM_ROWS:
        return None, f"column {column} is full; choose another"
    return column - 1, None


def ask_human_move(input_fn: InputFn, print_fn: PrintFn, moves: str) -> int:
    """Prompts until the human types a legal column; returns it 0-based (raises Quit)."""
    while True:
        column, reason = check_column(_read(input_fn, "your move (1-7, q quits): "), moves)
        if column is not None:
            return column
        print_fn(reason)


def ask_human_first(input_fn: InputFn, print_fn: PrintFn) -> bool:
    """Asks whether the human moves first; re-prompts on other answers (raises Quit)."""
    while True:
        answer = _read(input_fn, "Do you want to move first (x)? [y/n]: ").lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        print_fn(f"{answer!r}: answer y (you move first, x) or n (the agent does)")


def format_analysis(analysis, column: int) -> str:
    """The agent's move, value estimate and move probabilities in two lines."""
    probs = "  ".join(
        f"{c + 1}:{100 * p:4.1f}%" if p > 0 else f"{c + 1}:  -  "
        for c, p in enumerate(analysis.policy)
    )
    return (
        f"Agent plays column {column + 1}; its value estimate {analysis.value:+.2f}"
        " (+1 = it wins, -1 = it loses)\n"
        f"move probabilities  {probs}"
    )


def agent_move(player, moves: str) -> tuple[int, object]:
    """``(column 0-6, analysis)`` of the agent after ``moves``: one search."""
    analysis = player.analyse(moves)
    return int(analysis.action), analysis


def play_loop(player, input_fn: InputFn, print_fn: PrintFn, human_first: bool) -> str:
    """Plays one game between a human (through ``input_fn``) and ``player``.

    Args:
        player: anything with ``best_move(moves)`` and ``analyse(moves)`` (a
            ``c4jax.player.Player``).
        input_fn: ``input``-like: prompt -> line; EOFError quits.
        print_fn: ``print``-like, one string per call.
        human_first: the human plays x and moves first.

    Returns:
        ``"human"``, ``"agent"`` or ``"draw"`` for a finished game, ``"quit"``
        if the human quit.
    """
    human = 0 if human_first else 1
    marks = ("x", "o")
    print_fn(
        f"You play {marks[human]} and move {'first' if human_first else 'second'};"
        f" the agent plays {marks[1 - human]}. Type a column 1-7, q to quit."
    )
    moves = ""
    state = env.from_moves(moves)
    print_fn(board_text(moves))
    while not bool(state.terminated):
        mover = len(moves) % 2
        if mover == human:
            try:
                column = ask_human_move(input_fn, print_fn, moves)
            except Quit:
                print_fn("You quit. Bye.")
                return "quit"
            print_fn(f"You play column {column + 1}.")
        else:
            column, analysis = agent_move(player, moves)
            print_fn(format_analysis(analysis, column))
        moves += str(column + 1)
        state = env.from_moves(moves)
        print_fn(board_text(moves))
    winner = int(state.winner)
    if winner == -1:
        print_fn("The game is a draw.")
        return "draw"
    if winner == human:
        print_fn("You win. Congratulations!")
        return "human"
    print_fn("The agent wins.")
    return "agent"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: loads the run's best checkpoint and plays one game."""
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.play",
        description="Play Connect Four against a trained agent in the terminal.",
    )
    parser.add_argument(
        "run_dir",
        nargs="?",
        default=None,
        help="a run directory written by python -m c4jax.train"
        " (default: the pretrained agent shipped in the package)",
    )
    parser.add_argument(
        "--sims",
        type=int,
        default=None,
        help="search simulations per agent move (default: the agent's evaluation setting;"
        " 0 = the network alone)",
    )
    parser.add_argument(
        "--step", type=int, default=None, help="checkpoint step (default: the best)"
    )
    parser.add_argument(
        "--first",
        choices=("human", "agent"),
        default=None,
        help="who moves first (asked if not given)",
    )
    args = parser.parse_args(argv)
    checkpoints.quiet_orbax_logs()
    if args.sims is not None and args.sims < 0:
        print(f"error: --sims: got {args.sims}, allowed: >= 0", file=sys.stderr)
        return 2

    if args.run_dir is None and args.step is not None:
        print("error: --step needs a run directory", file=sys.stderr)
        return 2
    try:
        if args.run_dir is None:
            player = Player.pretrained(num_simulations=args.sims)
        else:
            player = Player.from_checkpoint(
                args.run_dir, num_simulations=args.sims, step=args.step
            )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    source = args.run_dir or "the pretrained agent"
    print(f"Loaded {source} ({player.num_simulations} simulations per move).")
    try:
        human_first = ask_human_first(input, print) if args.first is None else args.first == "human"
        play_loop(player, input, print, human_first)
    except (Quit, KeyboardInterrupt):  # Ctrl-C while the agent thinks
        print("\nBye.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
