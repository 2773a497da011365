"""What the browser tests of both pages share: onnxruntime-web's files, the exported
static page served on a free local port, and waiting for the move list; and the web
app with a stand-in agent under a real uvicorn in its own process (``stub_server``)."""

import dataclasses
import functools
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ort_dir():
    """onnxruntime-web's files (installed with npm on first use), or a skip saying why not."""
    onnx_export = pytest.importorskip("c4jax.web.onnx")
    try:
        return onnx_export.ort_dist()
    except onnx_export.OrtWebUnavailable as err:
        pytest.skip(f"onnxruntime-web unavailable: {err}")


@pytest.fixture(scope="session")
def page_url(ort_dir, tmp_path_factory):
    """The pretrained agent's static page (``export web``), served by http.server."""
    from c4jax import export

    out = tmp_path_factory.mktemp("web") / "page"
    assert export.main(["web", str(out), "--ort-dir", str(ort_dir)]) == 0

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(out))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(10)


@pytest.fixture
def wait_moves():
    """``wait_moves(page, predicate_js, timeout_ms)``: waits until ``predicate_js`` holds of
    ``m``, the page's move list ("" before the first move)."""

    def wait(page, predicate_js: str, timeout_ms: int):
        page.wait_for_function(
            f"(() => {{ const t = document.getElementById('moves').textContent;"
            f" const m = t.startsWith('(') ? '' : t; return {predicate_js}; }})()",
            timeout=timeout_ms,
        )

    return wait


@pytest.fixture
def play_to_the_end(wait_moves, tmp_path):
    """``play_to_the_end(page, timeout_ms)``: the human takes the leftmost open column until
    the game is over; then the status says so, a win shows its four, no column takes a
    click, and a screenshot of the final board is written."""

    def play(page, timeout_ms: int):
        for _ in range(25):
            if page.query_selector("#status.over"):
                break
            page.wait_for_selector("#board .col.playable, #status.over", timeout=timeout_ms)
            if page.query_selector("#status.over"):
                break
            before = page.text_content("#moves")
            before = 0 if before.startswith("(") else len(before)
            page.click("#board .col.playable")
            wait_moves(
                page,
                f"m.length >= {before + 2} || document.getElementById('status')"
                ".classList.contains('over')",
                timeout_ms,
            )
        status = page.text_content("#status")
        assert status.startswith("Game over"), status
        if "wins" in status:
            assert len(page.query_selector_all(".cell.win")) >= 4
        assert not page.query_selector_all("#board .col.playable")
        page.screenshot(path=str(tmp_path / "game.png"), full_page=True)
        assert (tmp_path / "game.png").stat().st_size > 1000

    return play


# The app under uvicorn in its own process (as ``python -m c4jax.serve`` runs it), with
# a stand-in agent: the leftmost open column, a search that sleeps ``per_sim`` seconds per
# simulation outside the GIL, as XLA runs (the shipped agent takes 0.2 ms). The counts it
# is first asked for are appended to ``compiled`` (its "compiles", in order).
STUB_SERVER = r'''
import json, sys, time, types
from c4jax.position import Position
from c4jax.web import app as web, guard

args = json.loads(sys.argv[1])

class StubPlayer:
    def __init__(self, n):
        self.num_simulations = n
        self.seen = False
    def with_simulations(self, n):
        return StubPlayer(n)
    def analyse(self, moves):
        if not self.seen:
            self.seen = True
            with open(args["compiled"], "a") as f:
                f.write(f"{self.num_simulations}\n")
        time.sleep(self.num_simulations * args["per_sim"])
        legal = Position.parse(moves).legal
        policy = [1 / len(legal) if c in legal else 0.0 for c in range(7)]
        return types.SimpleNamespace(policy=policy, q=None, visits=None, value=0.0,
                                     action=legal[0], policy_value=None, rule="first legal")

limits = guard.Limits(**args["limits"])
app = web.make_app(StubPlayer(args["default"]), source="stand-in", limits=limits,
                   allowed_hosts=tuple(args["allowed_hosts"]))
try:
    guard.make_server(app, host="127.0.0.1", port=args["port"], limits=limits).run()
except KeyboardInterrupt:
    pass
print("stopped", flush=True)
'''


@dataclasses.dataclass(frozen=True)
class StubServer:
    """A running stub server: its ``url``, ``port``, process, and files."""

    url: str
    port: int
    proc: subprocess.Popen
    log: Path  # its stdout and stderr
    compiled: Path  # the simulation counts it searched with, first time each
    # Idle, each quick request answers in a few milliseconds; a noisy shared 2-core
    # machine running other tests may take far longer, never this long (seconds).
    quick: float = 1.0

    def post(self, path: str, body, **headers):
        """``POST`` of ``body`` as JSON to ``path`` (``/api/move``), an httpx response."""
        import httpx

        return httpx.post(self.url + path, content=json.dumps(body), timeout=30,
                          headers={"content-type": "application/json", **headers})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def stub_server(tmp_path):
    """``stub_server(per_sim=0.0002, default=16, allowed_hosts=(), **limits) -> StubServer``:
    the app on a free port in a subprocess (stopped after the test)."""
    procs = []

    def start(*, per_sim=0.0002, default=16, allowed_hosts=(), **limits) -> StubServer:
        port = _free_port()
        log, compiled = tmp_path / f"server-{port}.log", tmp_path / f"compiled-{port}.txt"
        args = {"port": port, "per_sim": per_sim, "default": default, "limits": limits,
                "allowed_hosts": list(allowed_hosts), "compiled": str(compiled)}
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", STUB_SERVER, json.dumps(args)], stdout=out,
                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        procs.append(proc)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        return StubServer(f"http://127.0.0.1:{port}", port, proc, log, compiled)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(10)
