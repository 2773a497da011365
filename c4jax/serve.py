"""``python -m c4jax.serve [RUN_DIR]``: play Connect Four against the agent in a browser.

Usage:
    python -m c4jax.serve                      # the agent shipped in the package
    python -m c4jax.serve runs/X --sims 64     # a training run's best checkpoint
    python -m c4jax.serve runs/X --port 8080 --host 0.0.0.0 --allowed-host mybox.lan

Then open the address it prints. Everything is served locally (no internet
needed). The page and the API are ``c4jax.web.app``, and the limits on what one
client may take ``c4jax.web.guard``; this module only parses the command line,
loads the agent and runs uvicorn. Ctrl-C stops it (exit 130), as do SIGTERM
(``kill``, ``docker stop``: exit 143) and SIGHUP (a closed terminal: exit 129),
each after finishing the requests under way, with one line.

The page can be opened by an IP address or ``localhost``; any other name must be
given with ``--allowed-host`` (a page of another site whose name now resolves to
this computer, DNS rebinding, is refused).
"""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
import sys
from collections.abc import Iterator, Sequence

from c4jax import inputs
from c4jax.run import cli, compile_cache, interrupt, xla_flags


def port_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now, at every address ``host`` names (a
    name such as ``localhost`` may name an IPv6 and an IPv4 address, and the server
    listens on each, as asyncio's ``create_server`` does)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError):
        return False
    bound = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(
                (info[0], info[1], info[2], None, info[4]) for info in infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
        return bool(bound)
    except OSError:
        return False
    finally:
        for sock in bound:
            sock.close()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on) is reachable from this computer only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def stop_on_signals(server) -> Iterator[None]:
    """SIGTERM and SIGHUP stop ``server`` as Ctrl-C does: the requests under way
    are finished, then the process ends with one line and exit code 128 + signal.

    uvicorn shuts down gracefully on SIGTERM itself and then raises the signal
    again: the handler here turns that into the line and the exit code (Python's
    default would end the process without a word). SIGHUP, which uvicorn leaves
    alone, asks for the same graceful shutdown. An ignored SIGHUP (``nohup``)
    stays ignored.
    """

    def on_signal(signum, frame):
        if server.should_exit:  # raised again after the shutdown, or a second one
            interrupt.exit_now(f"Stopped. ({signal.Signals(signum).name})", 128 + signum)
        server.handle_exit(signum, frame)

    previous = {
        sig: signal.signal(sig, on_signal)
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None))
        if sig is not None and signal.getsignal(sig) != signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def main(argv: Sequence[str] | None = None, release_interrupt=None) -> int:
    """Command line: loads the agent, prints the address and serves until stopped.

    ``release_interrupt``: called once loading is done, before the server starts
    (``interrupt.exit_on_interrupt``'s return value), so that uvicorn's own Ctrl-C
    handling shuts the server down; that ends in exit code 130 too.
    """
    xla_flags.enable_fast_cpu()  # before the first device query
    compile_cache.enable()
    parser = cli.OneLineParser(
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
        "--sims", type=inputs.count_arg("--sims", high=inputs.MAX_SIMULATIONS), default=None,
        help="default search simulations per agent move (default: the agent's evaluation"
        f" setting; 0-{inputs.MAX_SIMULATIONS}); the page offers others",
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
    parser.add_argument(
        "--port", type=inputs.count_arg("--port", low=1, high=65535), default=8000,
        help="port (default 8000)",
    )
    parser.add_argument(
        "--allowed-host", action="append", default=[], metavar="NAME",
        help="a name the page is opened by, besides IP addresses and localhost (repeat for"
        " several); other names are refused, against DNS rebinding",
    )
    try:
        args = parser.parse_args(argv)
    except cli.UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    # "$RUN" with RUN unset: "" would be read as this folder
    if args.run_dir is not None and not args.run_dir.strip():
        print("error: run_dir: empty; give a run directory, or leave it out for the"
              " pretrained agent", file=sys.stderr)
        return 2
    if args.run_dir is None and args.step is not None:
        print("error: --step needs a run directory", file=sys.stderr)
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

    from c4jax.web import app as web
    from c4jax.web import guard

    limits = guard.Limits()
    app = web.make_app(
        player,
        source=f"{source} ({player.num_simulations} simulations)",
        limits=limits,
        allowed_hosts=(args.host, *args.allowed_host),
    )
    if not is_loopback(args.host):
        print(
            f"warning: --host {args.host}: anyone who can reach this computer can use the"
            " page (no password, no encryption); it answers to IP addresses, localhost and"
            f" --allowed-host names only",
            file=sys.stderr,
            flush=True,
        )
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"Serving on http://{host}:{args.port}/  (Ctrl-C stops)", flush=True)
    if release_interrupt is not None:
        release_interrupt()
    server = guard.make_server(app, host=args.host, port=args.port, limits=limits)
    try:
        with stop_on_signals(server):
            server.run()  # returns after a graceful shutdown
    except KeyboardInterrupt:  # Ctrl-C: shut down gracefully, then re-raised by asyncio
        interrupt.exit_now("Stopped.")
    except SystemExit:  # uvicorn could not listen: the port was taken since the check
        print(f"error: cannot listen on {args.host}:{args.port} (taken since the server "
              "started); pick another with --port", file=sys.stderr, flush=True)
        return 2
    if server.should_exit:
        interrupt.exit_now("Stopped.")
    return 0


if __name__ == "__main__":
    sys.exit(main(release_interrupt=interrupt.exit_on_interrupt("Stopped.")))
