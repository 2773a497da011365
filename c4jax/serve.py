"""``python -m c4jax.serve [RUN_DIR]``: play Connect Four against the agent in a browser.

Usage:
    python -m c4jax.serve                      # the agent shipped in the package
    python -m c4jax.serve runs/X --sims 64     # a training run's best checkpoint
    python -m c4jax.serve runs/X --port 8080 --host 0.0.0.0

Then open the address it prints. Everything is served locally (no internet
needed). The page and the API are ``c4jax.web.app``; this module only parses
the command line, loads the agent and runs uvicorn. Ctrl-C stops it (exit 130).
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence

from c4jax.run import cli, interrupt, xla_flags


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
        return True
    except OSError:
        return False


def main(argv: Sequence[str] | None = None, release_interrupt=None) -> int:
    """Command line: loads the agent, prints the address and serves until stopped.

    ``release_interrupt``: called once loading is done, before the server starts
    (``interrupt.exit_on_interrupt``'s return value), so that uvicorn's own Ctrl-C
    handling shuts the server down; that ends in exit code 130 too.
    """
    xla_flags.enable_fast_cpu()  # before the first device query
    parser = argparse.ArgumentParser(
        prog="python -m c4jax.serve",
        description="Serve a Connect Four web page to play against a trained agent.",
    )
    parser.add_argument(
        "run_dir",
        nargs="?",
        default=None,
        help="a run directory written by python -m c4jax.train"
        " (default: the pretrained agent shipped in the package)",
    )
    parser.add_argument(
        "--sims", type=int, default=None,
        help="default search simulations per agent move (default: the agent's evaluation"
        " setting); the page can pick others",
    )
    parser.add_argument(
        "--step", type=cli.checkpoint_step, default=None,
        help="the run's checkpoint: an iteration, last (the newest) or best (the default: the"
        " best by evaluation score)",
    )
    parser.add_argument(
        "--host", default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this computer only)",
    )
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    args = parser.parse_args(argv)

    from c4jax.web.app import MAX_SIMULATIONS

    if args.sims is not None and not 0 <= args.sims <= MAX_SIMULATIONS:
        print(f"error: --sims: got {args.sims}, allowed 0-{MAX_SIMULATIONS}", file=sys.stderr)
        return 2
    if args.run_dir is None and args.step is not None:
        print("error: --step needs a run directory", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"error: --port: got {args.port}, allowed 1-65535", file=sys.stderr)
        return 2
    if not port_free(args.host, args.port):
        print(
            f"error: cannot listen on {args.host}:{args.port} (in use, or not an address"
            " of this computer); pick another with --port or --host",
            file=sys.stderr,
        )
        return 2

    from c4jax.player import Player  # JAX loads here, after the interrupt handler

    cli.one_line_warnings()
    source = args.run_dir or "the pretrained agent"
    print(f"Loading {source}...", flush=True)
    from c4jax.judge import registry

    try:
        step = args.step if args.run_dir is None else registry.resolve_step(args.run_dir, args.step)
        player = Player.load(args.run_dir, num_simulations=args.sims, step=step)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.run_dir is not None and args.step in (None, "best"):  # say which one it chose
        print(registry.checkpoint_note(args.run_dir, player.step, newest="--step last"), flush=True)

    import uvicorn

    from c4jax.web.app import make_app

    app = make_app(player, source=f"{source} ({player.num_simulations} simulations)")
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"Serving on http://{host}:{args.port}/  (Ctrl-C stops)", flush=True)
    if release_interrupt is not None:
        release_interrupt()
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    )
    try:
        server.run()  # returns after a graceful shutdown on SIGTERM
    except KeyboardInterrupt:  # Ctrl-C: shut down gracefully, then re-raised by asyncio
        interrupt.exit_now("Stopped.")
    if server.should_exit:
        interrupt.exit_now("Stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main(release_interrupt=interrupt.exit_on_interrupt("Stopped.")))
