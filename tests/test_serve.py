"""The web app's API (in process, fastapi's TestClient) and the serve command line."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest
from fastapi.testclient import TestClient

from c4jax import serve
from c4jax.inputs import MAX_SIMULATIONS
from c4jax.player import Analysis, Player
from c4jax.position import Position
from c4jax.web.app import COMMON_DIR, SIMULATION_CHOICES, make_app
from c4jax.web.guard import MAX_BODY

DRAW = "472424756645422154157737216635626711335331"  # 42 moves, no four
BASE_URL = "http://127.0.0.1"  # TestClient's own "testserver" is no name of this server


class FirstLegalPlayer:
    """A stand-in agent: the leftmost open column, with made-up numbers."""

    def __init__(self, num_simulations=4):
        self.num_simulations = num_simulations
        self.calls = []

    def with_simulations(self, n):
        return FirstLegalPlayer(n)

    def analyse(self, moves):
        self.calls.append(moves)
        legal = Position.parse(moves).legal
        policy = np.zeros(7, np.float32)
        policy[list(legal)] = 1 / len(legal)
        q = np.full(7, np.nan, np.float32)
        q[legal[0]] = 0.5
        visits = np.zeros(7, np.int32)
        visits[legal[0]] = self.num_simulations
        return Analysis(policy, 0.25, legal[0], q=q, visits=visits, rule="first legal")


@pytest.fixture(scope="module")
def client():
    with TestClient(make_app(FirstLegalPlayer(), source="stand-in"), base_url=BASE_URL) as c:
        yield c


@pytest.fixture(scope="module")
def real_client(tiny_run):
    player = Player.from_checkpoint(tiny_run, num_simulations=16)
    with TestClient(make_app(player, warm_up=False), base_url=BASE_URL) as c:
        yield c


def test_page_and_assets_are_served_locally(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for asset in ("/static/app.js", "/static/style.css", "/common/board.js"):
        assert client.get(asset).status_code == 200
        assert f'"{asset}"' in page.text
    # The board script both pages share, loaded before the page's own app.js.
    assert page.text.index('"/common/board.js"') < page.text.index('"/static/app.js"')
    assert client.get("/common/board.js").text == (COMMON_DIR / "board.js").read_text()
    missing = client.get("/common/nothing.js")
    assert missing.status_code == 404 and "error" in missing.json()
    # No external resources: every src/href is local.
    assert "http://" not in page.text and "https://" not in page.text and "//" not in (
        client.get("/static/style.css").text.replace("://", "")
    )
    info = client.get("/api/info").json()
    assert info == {"agents": ["c4jax"], "source": "stand-in", "default_sims": 4,
                    "max_sims": MAX_SIMULATIONS, "sims": list(SIMULATION_CHOICES)}


def test_the_page_has_room_for_its_words_and_undo(client):
    """The players line, the key to the numbers and the colour legend that app.js fills,
    and the Undo button (the browser tests check what they say)."""
    page = client.get("/").text
    for element in ('id="players"', 'id="heat-key"', 'id="legend"', 'id="undo"'):
        assert element in page, element
    assert page.index('id="players"') < page.index('id="board"')
    script = client.get("/static/app.js").text
    assert "C4.renderPlayers(" in script and "C4.renderLegend(" in script
    assert ">q ${" not in script and ">n ${" not in script  # words, not q / n


def test_state_of_a_position_and_a_human_move(client):
    data = client.post("/api/state", json={"moves": "4453"}).json()
    assert data["moves"] == "4453" and data["to_move"] == "x" and data["winner"] is None
    assert data["legal"] == [1, 2, 3, 4, 5, 6, 7] and data["last_move"] == [0, 2]
    assert data["board"][0] == [-1, -1, 1, 0, 0, -1, -1] and data["board"][1][3] == 1
    moved = client.post("/api/state", json={"moves": "4453", "column": 6}).json()
    assert moved["moves"] == "44536" and moved["last_move"] == [0, 5]
    assert client.post("/api/state", json={}).json()["moves"] == ""


def test_winner_and_winning_line(client):
    data = client.post("/api/state", json={"moves": "121212", "column": 1}).json()
    assert data["winner"] == "x" and data["legal"] == []
    assert data["winning_line"] == [[0, 0], [1, 0], [2, 0], [3, 0]]
    # A diagonal, and a draw (a full board without four in a row).
    won = client.post("/api/state", json={"moves": "1223433454", "column": 4}).json()
    assert won["winner"] == "x" and won["winning_line"] == [[0, 0], [1, 1], [2, 2], [3, 3]]
    assert won["last_move"] == [3, 3]
    draw = client.post("/api/state", json={"moves": DRAW}).json()
    assert draw["winner"] == "draw" and draw["winning_line"] == [] and draw["legal"] == []


@pytest.mark.parametrize(
    "path, body, status, reason",
    [
        ("/api/state", {"moves": "4453", "column": 9}, 422, "column: got 9, allowed 1-7"),
        ("/api/state", {"moves": "4453", "column": 0}, 422, "column: got 0"),
        ("/api/state", {"moves": "111111", "column": 1}, 422, "column 1 is full"),
        ("/api/state", {"moves": "1111111"}, 422, "column 1 is full"),
        ("/api/state", {"moves": "44x"}, 422, "'x' is not a column 1-7"),
        ("/api/state", {"moves": "4 4"}, 422, "is not a column"),
        ("/api/state", {"moves": 44}, 422, "moves: Input should be a valid string"),
        ("/api/state", {"moves": "4", "column": "5"}, 422, "column: Input should be"),
        ("/api/state", {"moves": "4", "column": 5.5}, 422, "column"),
        ("/api/state", {"moves": "4", "extra": 1}, 422, "extra"),
        ("/api/state", {"moves": "1212121", "column": 3}, 422, "the game is over"),
        ("/api/state", {"moves": "12121213"}, 422, "the game already ended"),
        ("/api/state", {"moves": "1" * 43}, 422, "at most 42"),
        ("/api/move", {"moves": "1212121"}, 422, "the game is over"),
        ("/api/move", {"moves": "4", "agent": "stockfish"}, 422, "unknown agent 'stockfish'"),
        ("/api/move", {"moves": "4", "sims": -1}, 422,
         "sims: got -1, allowed: 0, 4, 16, 64, 200, 800, 2000, 4096"),
        ("/api/move", {"moves": "4", "sims": 2001}, 422, "sims: got 2001"),
        ("/api/move", {"moves": "4", "sims": 7}, 422, "sims: got 7"),
        ("/api/move", {"moves": "4", "sims": MAX_SIMULATIONS + 1}, 422, "sims: got 4097"),
        ("/api/move", {"moves": "4", "sims": 10**40}, 422, "sims: got 100000000000..."),
        ("/api/move", {"moves": "4", "sims": True}, 422, "sims"),
        ("/api/move", {"moves": "9"}, 422, "'9' is not a column 1-7"),
        ("/api/move", [1, 2], 422, "Input should be an object"),
    ],
)
def test_bad_requests_get_a_4xx_json_reason(client, path, body, status, reason):
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert reason in response.json()["error"]
    assert "Traceback" not in response.text


def test_malformed_and_oversized_bodies(client):
    json_type = {"content-type": "application/json"}
    response = client.post("/api/move", content=b'{"moves": "44', headers=json_type)
    assert response.status_code == 400 and "Invalid JSON" in response.json()["error"]
    big = json.dumps({"moves": "1" * (MAX_BODY + 10)})
    response = client.post("/api/move", content=big, headers=json_type)
    assert response.status_code == 413 and "too large" in response.json()["error"]

    def chunks():  # no content-length: the size is checked on reading
        yield big.encode()

    response = client.post("/api/state", content=chunks(), headers=json_type)
    assert response.status_code == 413 and "too large" in response.json()["error"]
    response = client.get("/api/nothing")
    assert response.status_code == 404 and response.json() == {"error": "Not Found"}
    response = client.get("/api/move")
    assert response.status_code == 405 and "error" in response.json()


def test_internal_errors_are_a_json_500_and_the_server_goes_on():
    class Broken(FirstLegalPlayer):
        def analyse(self, moves):
            raise RuntimeError("boom")

    with TestClient(make_app(Broken()), raise_server_exceptions=False, base_url=BASE_URL) as c:
        response = c.post("/api/move", json={"moves": "4"})
        assert response.status_code == 500 and response.json() == {"error": "internal error"}
        assert "boom" not in response.text
        assert c.post("/api/state", json={"moves": "4"}).status_code == 200


def test_agent_move_with_a_stand_in(client):
    data = client.post("/api/move", json={"moves": "111111", "sims": 64}).json()
    assert data["column"] == 2 and data["index"] == 1 and data["moves"] == "1111112"
    assert data["sims"] == 64 and data["analysis"]["visits"][1] == 64
    assert data["analysis"]["q"][0] is None and data["analysis"]["q"][1] == 0.5
    assert data["analysis"]["chosen"] == 1 and data["analysis"]["rule"] == "first legal"


@pytest.mark.slow
@pytest.mark.parametrize("moves, sims", [("", 16), ("4453", 16), ("4453", 0), ("112233", 16)])
def test_the_agent_plays_the_move_it_shows(real_client, moves, sims):
    data = real_client.post("/api/move", json={"moves": moves, "sims": sims}).json()
    analysis = data["analysis"]
    assert data["moves"] == moves + str(data["column"])
    assert analysis["chosen"] == data["index"] == data["column"] - 1
    assert sum(analysis["visits"]) == sims
    assert abs(sum(analysis["policy"]) - 1) < 1e-3
    if sims:  # the survivor of sequential halving: a most visited move, with a value
        assert analysis["visits"][data["index"]] == max(analysis["visits"])
        assert analysis["q"][data["index"]] is not None
    else:  # the network alone: the highest policy
        assert analysis["policy"][data["index"]] == max(analysis["policy"])
    if moves == "112233":  # x wins in one in column 4, and the search finds it
        assert data["column"] == 4 and data["winner"] == "x"
        assert data["winning_line"] == [[0, 0], [0, 1], [0, 2], [0, 3]]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_command_line_errors(tmp_path, capsys):
    assert serve.main([str(tmp_path / "nope"), "--port", str(_free_port())]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a run directory" in err and err.count("\n") == 1
    assert serve.main(["", "--port", str(_free_port())]) == 2  # "$RUN" with RUN unset
    assert capsys.readouterr().err.startswith("error: run_dir: empty; give a run directory")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert serve.main([str(tmp_path), "--port", str(busy.getsockname()[1])]) == 2
    assert "cannot listen" in capsys.readouterr().err


def test_a_port_taken_at_any_address_of_the_name_is_not_free(monkeypatch):
    """``localhost`` may name ::1 and 127.0.0.1: the server listens on both, so the
    port must be free on both (a Node server on "localhost" holds ::1 only)."""
    with socket.socket(socket.AF_INET6) as busy:
        try:
            busy.bind(("::1", 0))
        except OSError:
            pytest.skip("no IPv6 loopback here")
        busy.listen()
        port = busy.getsockname()[1]
        both = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: both
                            if host == "localhost" else real(host, *a, **k))
        assert not serve.port_free("localhost", port)
        assert serve.port_free("127.0.0.1", port)  # its IPv4 twin is free
    assert serve.port_free("localhost", port)
    assert not serve.port_free("no-such-host.invalid", port)


_TAKEN_SINCE_THE_CHECK = (
    "import sys; from c4jax import serve; serve.port_free = lambda host, port: True; "
    "sys.exit(serve.main(['--port', sys.argv[1]]))"
)


@pytest.mark.slow
def test_a_port_taken_after_the_check_is_one_error_line_and_exit_2():
    """Another program takes the port between the check and the listening: uvicorn
    logs its own error and exits 3; the command says what happened instead."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-c", _TAKEN_SINCE_THE_CHECK, str(port)], capture_output=True,
            text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"error: cannot listen on 127.0.0.1:{port} (taken since the server started)" in (
        done.stderr)
    assert "Traceback" not in done.stderr


def test_serve_without_a_pretrained_agent_exits_2(tmp_path, monkeypatch, capsys):
    from c4jax.store import exported

    original = exported.load_exported
    # What an install without the package's pretrained files sees.
    monkeypatch.setattr(exported, "load_exported", lambda: original(tmp_path))
    assert serve.main(["--port", str(_free_port())]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not an exported network" in err
    assert err.count("\n") == 1


@pytest.mark.slow
def test_serve_subprocess_answers_and_stops_on_ctrl_c(tiny_run):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "c4jax.serve", str(tiny_run), "--port", str(port),
         "--sims", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                with urllib.request.urlopen(url + "/api/info", timeout=1) as response:
                    info = json.load(response)
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.1)
        assert info["default_sims"] == 0
        request = urllib.request.Request(
            url + "/api/move", data=b'{"moves": "44"}', headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            assert json.load(response)["moves"].startswith("44")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
    finally:
        proc.kill()
    out = proc.stdout.read()
    assert code == 130, out
    assert f"Serving on http://127.0.0.1:{port}/" in out and out.rstrip().endswith("Stopped.")
    assert "Traceback" not in out
    # A run without --step: one line says which checkpoint it serves and how to get the newest.
    note = [line for line in out.splitlines() if line.startswith(f"{tiny_run}: ")]
    assert len(note) == 1 and "checkpoint" in note[0], out


def _one_line_error(argv, capsys) -> str:
    """serve.main(argv) exits 2 with one ``error:`` line pointing at --help."""
    assert serve.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert err.endswith(" (see: python -m c4jax.serve --help)\n"), err
    return err


def test_step_takes_an_iteration_last_or_best(capsys):
    err = _one_line_error(["runs/X", "--step", "newest"], capsys)
    assert "'newest' is not a checkpoint step: give an iteration, last or best" in err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--sims", "5000"], "argument --sims: got 5000, allowed: 0-4096"),
        (["--sims", "²"], "argument --sims: got '²', allowed: a whole number 0-4096"),
        (["--sims", "1" * 100_000], "argument --sims: got 1111"),
        (["--sims", "-1"], "argument --sims: got '-1'"),
        (["--port", "0"], "argument --port: got 0, allowed: 1-65535"),
        (["--port", "70000"], "argument --port: got 70000"),
        (["--port", "٣"], "argument --port: got '٣'"),
    ],
)
def test_numbers_are_whole_ascii_numbers_within_bounds(argv, said, capsys):
    err = _one_line_error(argv, capsys)
    assert said in err and "Traceback" not in err
    assert len(err) < 1000  # a 100,000-digit number is not repeated whole


def test_which_addresses_are_this_computer_only():
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost", "LOCALHOST"):
        assert serve.is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.5", "mybox.lan"):
        assert not serve.is_loopback(host), host


def _held_connections(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that never finish: half stop in their headers, half in
    their body."""
    held = []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(
            b"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"mo' if i % 2 else b"GET / HTTP/1.1\r\nHost: 127.0"
        )
        held.append(sock)
    return held


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_serve_stops_on_sigterm_and_sighup_with_one_line(sig, code):
    """What ``kill``, ``docker stop`` or a closed terminal sends: the server stops at once
    although 40 clients hold unfinished requests, says so in one line, and exits
    128 + the signal. Bound beyond this computer, it warns first."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "c4jax.serve", "--sims", "0", "--port", str(port),
         "--host", "0.0.0.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "JAX_PLATFORMS": "cpu"},
    )
    held = []
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/info", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                time.sleep(0.1)
        held = _held_connections(port, 40)
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(sig)
        proc.wait(30)
        took = time.monotonic() - start
    finally:
        proc.kill()
        for sock in held:
            sock.close()
    out = proc.stdout.read()
    assert proc.returncode == code, out
    assert took < 10, (took, out)  # idle: 0.2-0.5 s
    lines = out.strip().splitlines()
    assert lines[-1] == f"Stopped. ({sig.name})", out
    assert "Traceback" not in out and "ERROR" not in out and len(lines) <= 5, out
    warning = [line for line in lines if line.startswith("warning: --host 0.0.0.0: ")]
    assert len(warning) == 1 and "--allowed-host" in warning[0], out
