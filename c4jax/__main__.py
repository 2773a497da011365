"""``c4jax COMMAND [ARGS...]`` (the console script) and ``python -m c4jax COMMAND ...``.

Each command is one of the package's command lines, run with the arguments that
follow it: ``c4jax train --config tiny`` is ``python -m c4jax.train --config tiny``.
Only the chosen command's module is imported, so ``c4jax --help`` answers at once.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one line for --help, what a Ctrl-C before the command is running says)
COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "train": ("c4jax.train", "train an agent: AlphaZero, or value-based with --config dqn/NAME",
              "Interrupted before training started."),
    "dqn-train": ("c4jax.dqn.train", "train a value-based agent (Double DQN, Q-learning, Grogu)",
                  "Interrupted before training started."),
    "evaluate": ("c4jax.evaluate", "matches, Elo ratings and solver mistake rates",
                 "Interrupted."),
    "play": ("c4jax.play", "play Connect Four against a trained agent in the terminal",
             "Interrupted. Bye."),
    "serve": ("c4jax.serve", "play against a trained agent in the browser (a local web app)",
              "Stopped."),
    "export": ("c4jax.export", "write a run's network alone, or a static page that plays it",
               "Interrupted."),
    "plot": ("c4jax.plot", "PNG plots of a run's metrics over training", "Interrupted."),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [
        "usage: c4jax COMMAND [ARGS...]   (or: python -m c4jax COMMAND [ARGS...])",
        "",
        "AlphaZero for Connect Four in JAX.",
        "",
        "commands:",
        *(f"  {name:<{width}}  {summary}" for name, (_, summary, _) in COMMANDS.items()),
        "",
        "c4jax COMMAND --help lists a command's options; c4jax COMMAND ... is the same as",
        "python -m MODULE ... (c4jax.train, c4jax.dqn.train, c4jax.evaluate, ...).",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``argv[0]``'s command with the rest of ``argv``; returns its exit code.

    ``argv`` None (the console script, ``python -m c4jax``) reads ``sys.argv`` and,
    like ``python -m c4jax.COMMAND``, first makes a Ctrl-C a short message and exit
    code 130; a caller passing ``argv`` keeps its own Ctrl-C handling.
    """
    entry = argv is None
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        print(f"error: unknown command {name!r}{hint}; commands: {', '.join(COMMANDS)} "
              "(see: c4jax --help)", file=sys.stderr)
        return 2
    module_name, _, interrupted = COMMANDS[name]
    release = None
    if entry and interrupted is not None:
        from c4jax.run import interrupt

        release = interrupt.exit_on_interrupt(interrupted)
    module = importlib.import_module(module_name)
    if name == "serve":  # uvicorn handles its own Ctrl-C once it runs
        return module.main(rest, release_interrupt=release)
    return module.main(rest)


if __name__ == "__main__":
    sys.exit(main())
