"""``python -m c4jax.play [RUN_DIR]``: play Connect Four against a trained agent.

Usage:
    python -m c4jax.play                 # the agent shipped in the package
    python -m c4jax.play runs/20261121-090000
    python -m c4jax.play runs/X --sims 200 --first human
    python -m c4jax.play runs/X --step last       # the newest checkpoint
    python -m c4jax.play runs/X --moves 4453      # start from a position

A run plays its best checkpoint by evaluation score unless ``--step`` says
otherwise (an iteration, or ``last`` for the newest); a line names the
iteration chosen. Type a column 1-7 to drop a stone, ``q`` to quit. After each
of its moves the agent shows what it decided with: for each column its
improved policy, its value of the move and the simulations spent on it (a
value-based agent, which does not search: its Q-value of each column), the
chosen column marked. Illegal input (not a number, out of range, a full
column) re-prompts with the reason: a column is ASCII digits only
(``c4jax.inputs``), so ``²``, ``①`` or a 100,000-digit line are refused like
any other text. ``--sims`` is at most ``c4jax.inputs.MAX_SIMULATIONS``, as for
every command and the web server. Keys typed while the agent thinks are
dropped. At the end of a game it offers a rematch. Ctrl-C ends the program at
once with exit code 130.

This module imports no JAX at load time, so the interrupt handler is in place
before the slow imports start.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from c4jax import inputs
from c4jax.position import MARKS, NUM_COLS, NUM_ROWS, Position
from c4jax.run import cli, compile_cache, interrupt, xla_flags

COLUMN_LINE = "  ".join("1234567")
QUIT_WORDS = ("q", "quit", "exit")

InputFn = Callable[[str], str]
PrintFn = Callable[[str], None]

# ANSI colours: x red, o yellow, the winning line reversed, the last move bold.
_RESET = "\033[0m"
_COLOURS = {0: "\033[31m", 1: "\033[33m"}
_BOLD = "\033[1m"
_REVERSE = "\033[7m"


class Quit(Exception):
    """The human asked to stop (``q`` or end of input)."""


def use_colour(stream=None) -> bool:
    """Whether to colour the board: a terminal, ``NO_COLOR`` unset, ``TERM`` not dumb."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM", "") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def board_text(moves: str, colour: bool = False) -> str:
    """The board after ``moves``, top row first, with a column-number line below.

    Cells are three characters wide: ``.`` empty, ``x`` first player, ``o``
    second. The last stone stands in brackets (``[x]``); the stones of a
    winning line are capitals (``X``). With ``colour``, ANSI colours too.
    """
    pos = Position.parse(moves)
    winning = set(pos.winning_line)
    lines = []
    for row in reversed(range(NUM_ROWS)):
        cells = []
        for col in range(NUM_COLS):
            who = pos.grid[row][col]
            mark = "." if who == -1 else MARKS[who]
            if (row, col) in winning:
                mark = mark.upper()
            left, right = ("[", "]") if (row, col) == pos.last_move else (" ", " ")
            if colour and who != -1:
                style = _COLOURS[who] + (_REVERSE if (row, col) in winning else "")
                if (row, col) == pos.last_move:
                    style += _BOLD
                mark = f"{style}{mark}{_RESET}"
            cells.append(f"{left}{mark}{right}")
        lines.append("|" + "".join(cells) + "|\n")
    return "".join(lines) + "  " + COLUMN_LINE + " \n"


def _read(input_fn: InputFn, prompt: str) -> str:
    """One stripped line of input; raises Quit on EOF or a quit word."""
    try:
        text = input_fn(prompt)
    except EOFError:
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
    try:  # ASCII digits only: "²" and "①" pass str.isdigit() but not int()
        column = inputs.parse_count(text, name="column", low=1, high=NUM_COLS)
    except inputs.InputError:
        if not inputs.is_digits(text):
            return None, f"{inputs.shown(text)} is not a column number; type 1-7 (or q to quit)"
        digits = text.lstrip("0") or "0"
        if len(digits) > 20:  # a 100,000-digit line: not repeated in full
            digits = f"{digits[:20]}... ({len(digits)} digits)"
        return None, f"there is no column {digits}; type 1-7"
    if moves.count(str(column)) >= NUM_ROWS:
        return None, f"column {column} is full; choose another"
    return column - 1, None


def ask_human_move(input_fn: InputFn, print_fn: PrintFn, moves: str) -> int:
    """Prompts until the human types a legal column; returns it 0-based (raises Quit)."""
    while True:
        column, reason = check_column(_read(input_fn, "your move (1-7, q quits): "), moves)
        if column is not None:
            return column
        print_fn(reason)


def ask_yes_no(input_fn: InputFn, print_fn: PrintFn, prompt: str, explain: str) -> bool:
    """Asks a y/n question until answered (raises Quit on q or end of input)."""
    while True:
        typed = _read(input_fn, prompt)
        answer = typed.lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("n", "no"):
            return False
        print_fn(f"{inputs.shown(typed)}: answer {explain}")


def ask_human_first(input_fn: InputFn, print_fn: PrintFn) -> bool:
    """Asks whether the human plays x (moves first); re-prompts on other answers."""
    return ask_yes_no(
        input_fn, print_fn, "Do you want to move first (x)? [y/n]: ",
        "y (you move first, x) or n (the agent does)",
    )


def format_analysis(analysis, mark: str = "") -> str:
    """The agent's move and, per column, what its search decided with.

    The value of the position is that of playing the improved policy
    (``policy_value``, else ``value``). Rows: the improved policy (%), the
    search's value of each move for the agent (``-`` where not searched), the
    simulations spent on it; a ``^`` under the column played. Full columns show ``-``.
    """
    chosen = int(analysis.action)
    who = f" ({mark})" if mark else ""
    value = getattr(analysis, "policy_value", None)
    value = analysis.value if value is None else value
    head = (
        f"Agent{who} plays column {chosen + 1}. Its value of the position: {value:+.2f}"
        " (+1 = it wins, -1 = it loses)."
    )

    def row(name, cells):
        return f"{name:<8}" + "".join(f"{c:>7}" for c in cells)

    # Legal: a policy, visits or a value (a value-based agent's policy is one-hot).
    legal = [
        p > 0
        or (analysis.visits is not None and analysis.visits[c] > 0)
        or (analysis.q is not None and not math.isnan(analysis.q[c]))
        for c, p in enumerate(analysis.policy)
    ]
    lines = [head, row("column", [str(c + 1) for c in range(NUM_COLS)])]
    lines.append(row("policy", [
        f"{100 * p:.1f}%" if ok else "-" for p, ok in zip(analysis.policy, legal, strict=True)
    ]))
    if analysis.q is not None:
        lines.append(row("value", ["-" if math.isnan(q) else f"{q:+.2f}" for q in analysis.q]))
    if analysis.visits is not None and sum(analysis.visits) > 0:
        lines.append(row("visits", [str(int(v)) for v in analysis.visits]))
    lines.append(row("", ["^ play" if c == chosen else "" for c in range(NUM_COLS)]))
    if getattr(analysis, "rule", ""):
        lines.append(f"(it plays {analysis.rule})")
    return "\n".join(lines)


@contextlib.contextmanager
def quiet_keys() -> Iterator[None]:
    """While the agent thinks: keys typed are not echoed, and dropped afterwards.

    Only on a terminal (a no-op for pipes and files).
    """
    try:
        import termios

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (ImportError, OSError, ValueError, AttributeError):
        saved = None
    if saved is None:
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)  # lflags
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcflush(fd, termios.TCIFLUSH)  # drop what was typed meanwhile
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def play_loop(
    player,
    input_fn: InputFn,
    print_fn: PrintFn,
    human_first: bool,
    moves: str = "",
    colour: bool = False,
    thinking: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> str:
    """Plays one game between a human (through ``input_fn``) and ``player``.

    Args:
        player: anything with ``analyse(moves) -> Analysis`` (a ``c4jax.player.Player``).
        input_fn: ``input``-like: prompt -> line; EOFError quits.
        print_fn: ``print``-like, one string per call.
        human_first: the human plays x (the first player), else o.
        moves: the position to start from (a valid move string, game not over).
        colour: ANSI colours in the board.
        thinking: a context manager around each agent move (``quiet_keys``).

    Returns:
        ``"human"``, ``"agent"`` or ``"draw"`` for a finished game, ``"quit"``
        if the human quit.
    """
    human = 0 if human_first else 1
    pos = Position.parse(moves)
    print_fn(
        f"You play {MARKS[human]}, the agent plays {MARKS[1 - human]}"
        f" ({'x' if pos.to_move == 0 else 'o'} to move). Type a column 1-7, q to quit."
    )
    print_fn(board_text(pos.moves, colour))
    first_agent_move = True
    while not pos.over:
        if pos.to_move == human:
            try:
                column = ask_human_move(input_fn, print_fn, pos.moves)
            except Quit:
                print_fn("You quit. Bye.")
                return "quit"
            print_fn(f"You play column {column + 1}.")
        else:
            note = f" ({first_move_note(player)})" if first_agent_move else ""
            first_agent_move = False
            with thinking():
                print_fn(f"thinking...{note}")
                analysis = player.analyse(pos.moves)
            column = int(analysis.action)
            print_fn(format_analysis(analysis, MARKS[1 - human]))
        pos = pos.play(column)
        print_fn(board_text(pos.moves, colour))
    if pos.winner == -1:
        print_fn("The game is a draw.")
        return "draw"
    if pos.winner == human:
        print_fn("You win. Congratulations!")
        return "human"
    print_fn("The agent wins.")
    return "agent"


def first_move_note(player) -> str:
    """What the agent's first move also does: compile its search, or (no search: a
    value-based agent, or ``--sims 0``) its network."""
    if getattr(player, "num_simulations", 0):
        return "the first move also compiles the search"
    return "the first move also compiles the network"


def play_games(
    player,
    input_fn: InputFn,
    print_fn: PrintFn,
    first: str | None = None,
    moves: str = "",
    **options,
) -> list[str]:
    """Games until the human declines a rematch or quits; returns each game's result.

    Args:
        first: ``"human"`` or ``"agent"`` (who plays x); None asks before each game.
        moves: every game starts from this position.
        options: passed to ``play_loop`` (``colour``, ``thinking``).
    """
    results = []
    try:
        while True:
            human_first = ask_human_first(input_fn, print_fn) if first is None else first == "human"
            result = play_loop(player, input_fn, print_fn, human_first, moves, **options)
            results.append(result)
            if result == "quit":
                return results
            if not ask_yes_no(input_fn, print_fn, "Rematch? [y/n]: ", "y (play again) or n"):
                print_fn("Bye.")
                return results
    except Quit:
        print_fn("Bye.")
        return results


def _load_player(run_dir: str | None, sims: int | None, step: int | str | None):
    """The agent to play: an AlphaZero ``Player``, or a ``QPlayer`` for a value-based run;
    ``step`` ``"last"`` is the newest checkpoint, ``"best"`` the same as None."""
    from c4jax.dqn.config import is_dqn_run
    from c4jax.judge import registry

    if run_dir is not None and run_dir.startswith("dqn:"):
        run_dir = run_dir[len("dqn:"):]
    if run_dir is not None:
        step = registry.resolve_step(run_dir, step)
    if run_dir is not None and is_dqn_run(run_dir):
        if sims:
            raise ValueError(f"--sims: {run_dir} is a value-based run, which does not search")
        from c4jax.dqn.player import QPlayer

        return QPlayer.from_checkpoint(run_dir, step=step)
    from c4jax.player import Player

    return Player.load(run_dir, num_simulations=sims, step=step)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: loads the agent and plays games until the human stops.

    Returns 0, or 2 for bad input (one ``error:`` line, a number out of its bounds
    among them).
    """
    xla_flags.enable_fast_cpu()  # before the first device query
    compile_cache.enable()
    parser = cli.OneLineParser(
        prog="python -m c4jax.play",
        description="Play Connect Four against a trained agent in the terminal.",
    )
    parser.add_argument(
        "run_dir",
        nargs="?",
        default=None,
        help="a run directory written by python -m c4jax.train or python -m c4jax.dqn.train"
        " (default: the pretrained agent shipped in the package)",
    )
    parser.add_argument(
        "--sims",
        type=inputs.count_arg("--sims", low=0, high=inputs.MAX_SIMULATIONS),
        default=None,
        help=f"search simulations per agent move, 0-{inputs.MAX_SIMULATIONS} (default: the"
        " agent's evaluation setting; 0 = the network alone)",
    )
    parser.add_argument(
        "--step",
        type=cli.checkpoint_step,
        default=None,
        help="the checkpoint: an iteration, last (the newest) or best (the best by evaluation"
        " score; the default, and which iteration it is gets printed)",
    )
    parser.add_argument(
        "--first",
        choices=("human", "agent"),
        default=None,
        help="who moves first, i.e. plays x (asked before each game if not given)",
    )
    parser.add_argument(
        "--moves",
        default="",
        help="start every game from this position, a move string of columns 1-7"
        " (e.g. 4453: x in 4, o in 4, x in 5, o in 3)",
    )
    try:
        args = parser.parse_args(argv)
    except cli.UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # "$RUN" with RUN unset: "" would be read as this folder
    if args.run_dir is not None and not args.run_dir.removeprefix("dqn:").strip():
        print("error: run_dir: empty; give a run directory, or leave it out for the"
              " pretrained agent", file=sys.stderr)
        return 2
    if args.run_dir is None and args.step is not None:
        print("error: --step needs a run directory", file=sys.stderr)
        return 2
    if len(args.moves) > NUM_COLS * NUM_ROWS:  # not repeated in full in the message
        print(
            f"error: --moves: got {inputs.shown(args.moves)}, a game has at most"
            f" {NUM_COLS * NUM_ROWS} moves",
            file=sys.stderr,
        )
        return 2
    try:
        start = Position.parse(args.moves)
    except ValueError as err:
        print(f"error: --moves: {err}", file=sys.stderr)
        return 2
    if start.over:
        print(f"error: --moves: {args.moves!r}: the game is already over", file=sys.stderr)
        return 2

    cli.one_line_warnings()
    source = args.run_dir or "the pretrained agent"
    print(f"Loading {source}...", flush=True)
    try:
        from c4jax.dqn.player import QPlayer  # JAX loads here, after the interrupt handler

        player = _load_player(args.run_dir, args.sims, args.step)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    how = "greedy on its Q-values, no search" if isinstance(player, QPlayer) else (
        f"{player.num_simulations} simulations per move"
    )
    if args.run_dir is not None:
        source = f"{source}, iteration {player.step}"
    print(f"Loaded {source} ({how}).", flush=True)
    if args.run_dir is not None and args.step in (None, "best"):
        from c4jax.judge import registry

        run_dir = args.run_dir.removeprefix("dqn:")
        print(registry.checkpoint_note(run_dir, player.step, newest="--step last"), flush=True)

    def say(text: str) -> None:
        print(text, flush=True)

    play_games(
        player, input, say, args.first, start.moves,
        colour=use_colour(), thinking=quiet_keys,
    )
    return 0


if __name__ == "__main__":
    interrupt.exit_on_interrupt("Interrupted. Bye.")
    sys.exit(main())
