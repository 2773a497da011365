"""The web server's guard against a real uvicorn (``stub_server``: a stand-in agent in
its own process, reached by a real HTTP client and raw sockets): bodies refused while
they are read, requests that never finish closed, a cap on connections, the Host /
Origin / Content-Type checks, a stop that does not wait for held connections, and
limits that check themselves. (tests/web/test_app.py has the search lanes and the
API fuzzed; tests/test_serve.py the API's answers; tests/web/test_load.py the load test.)"""

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from c4jax.web import guard


def _rss_peak_mib(pid: int) -> int:
    """The most memory the process ever held (VmHWM), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) // 1024


def _closed_after(sock: socket.socket, limit: float, since: float) -> float:
    """Seconds from ``since`` until the server closes ``sock`` (what it sends is dropped).

    A reset counts as a close: a server that closes a socket with unread bytes
    in it (the dripping client's next byte) makes the kernel send RST, not FIN.
    A socket still open after ``limit`` seconds raises ``TimeoutError``.
    """
    sock.settimeout(limit)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - since


def _answer(sock: socket.socket) -> bytes:
    """What the server sends on ``sock`` until it closes it."""
    sock.settimeout(30)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def _connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


@pytest.mark.slow
def test_a_large_body_is_refused_while_it_is_read_chunked_too(stub_server):
    server = stub_server()
    before = _rss_peak_mib(server.proc.pid)
    sock = _connect(server)
    sock.sendall(b"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk, sent = b"x" * (1 << 20), 0
    try:
        for _ in range(256):  # 256 MiB offered
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += 1
    except OSError:  # the server closed the connection: the sending fails
        pass
    answer = _answer(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"request body too large: at most 4096 bytes" in answer
    assert sent < 32, f"{sent} MiB were taken before the refusal"  # measured: 2 MiB
    assert _rss_peak_mib(server.proc.pid) - before < 32  # the code as found: +2x the body
    # A declared length over the limit is refused before any of the body is read.
    response = httpx.post(server.url + "/api/move", content=b"{}" + b" " * 5000,
                          headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.headers["connection"] == "close"
    for length in (b"9" * 5000, b"\xd9\xa3", b"-1"):  # a huge number, an Arabic-Indic 3
        sock = _connect(server)
        sock.sendall(b"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + length + b"\r\n\r\n{}")
        answer = _answer(sock)
        sock.close()
        assert answer[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 413"), (length[:10], answer[:300])


@pytest.mark.slow
def test_requests_that_never_finish_are_closed(stub_server):
    server = stub_server(header_timeout=1.0, body_timeout=1.0)
    opened = time.monotonic()
    stalled = _connect(server)
    stalled.sendall(b"GET / HTTP/1.1\r\nHost: 127.0")  # headers that stop half way
    dripping = _connect(server)  # headers a byte at a time: the time is for all of them

    def drip():
        with_data = b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100
        try:
            for byte in with_data:
                dripping.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            pass

    threading.Thread(target=drip, daemon=True).start()
    body = _connect(server)  # a body that stops half way
    body.sendall(b"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mo')
    idle = _connect(server)  # one answer, then the next request's headers stop half way
    idle.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET / HTTP/1.1\r\nHo")
    # Meanwhile the server answers others at once.
    start = time.monotonic()
    assert httpx.get(server.url + "/api/info", timeout=30).status_code == 200
    assert time.monotonic() - start < server.quick
    for sock in (stalled, dripping):
        assert 0.9 < _closed_after(sock, 30, opened) < 10  # header_timeout 1 s; as found: never
    answer = _answer(body)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"not complete after 1 s" in answer, answer
    answer = _answer(idle)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.count(b"HTTP/1.1") == 1, answer
    for sock in (stalled, dripping, body, idle):
        sock.close()


@pytest.mark.slow
def test_an_answer_before_the_body_closes_the_connection(stub_server):
    """A 405 (or 404) is given without reading the body: a client that then drips the
    body, or sends it and waits, must not hold the connection with no timer."""
    server = stub_server(header_timeout=1.0, body_timeout=1.0)
    for path in (b"/api/info", b"/no-such-page"):
        opened = time.monotonic()
        sock = _connect(server)
        sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n")
        sock.settimeout(30)
        answer = sock.recv(4096)
        assert answer[:12] in (b"HTTP/1.1 405", b"HTTP/1.1 404"), answer[:200]
        assert b"connection: close" in answer.lower()
        with contextlib.suppress(OSError):
            sock.sendall(b"{")  # one byte of the body, then nothing
        assert _closed_after(sock, 30, opened) < 10  # as found: never closed
        sock.close()
    # A request whose body is read keeps its connection for the next one.
    with httpx.Client(base_url=server.url) as client:
        for _ in range(2):
            response = client.post("/api/state", json={"moves": "44"})
            assert response.status_code == 200, response.text
            assert response.headers.get("connection") != "close"


@pytest.mark.slow
def test_connections_beyond_the_cap_get_a_503_until_they_close(stub_server):
    server = stub_server(max_connections=8, header_timeout=2.0)
    held = [_connect(server) for _ in range(8)]
    for sock in held:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0")
    time.sleep(0.3)
    response = httpx.get(server.url + "/api/info", timeout=30)
    assert response.status_code == 503
    for sock in held:  # the header timeout frees their places
        _closed_after(sock, 30, 0)
        sock.close()
    time.sleep(0.3)
    assert httpx.get(server.url + "/api/info", timeout=30).status_code == 200


@pytest.mark.slow
def test_host_origin_and_content_type_are_checked(stub_server):
    """DNS rebinding (an attacker's name for this computer) and other sites' pages."""
    server = stub_server(allowed_hosts=("mybox.lan",))
    info, port = server.url + "/api/info", server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "192.168.1.5",
                 f"MyBox.lan:{port}", "localhost"):
        assert httpx.get(info, headers={"host": host}).status_code == 200, host
    for host in (f"evil.example:{port}", "attacker.localhost.evil", "mybox.lan.evil"):
        response = httpx.get(info, headers={"host": host})
        assert response.status_code == 400, host
        assert "is not a name of this server" in response.json()["error"]
        assert "--allowed-host" in response.json()["error"]
    move, body = server.url + "/api/move", json.dumps({"moves": "4", "sims": 0})
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        response = httpx.post(move, content=body, headers={"content-type": kind})
        assert response.status_code == 415, kind
        assert response.json()["error"].startswith("content-type: got ")
    response = httpx.post(move, content=body,
                          headers={"content-type": "Application/JSON; charset=utf-8"})
    assert response.status_code == 200
    same = f"http://127.0.0.1:{port}"
    assert server.post("/api/move", {"moves": "4", "sims": 0}, origin=same).status_code == 200
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{port + 1}"):
        response = server.post("/api/move", {"moves": "4", "sims": 0}, origin=origin)
        assert response.status_code == 403 and "is not this page" in response.json()["error"]


@pytest.mark.slow
def test_the_server_stops_at_once_with_held_connections_and_no_tracebacks(stub_server):
    server = stub_server()
    held = [_connect(server) for _ in range(40)]
    for i, sock in enumerate(held):
        sock.sendall(b"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b'application/json\r\nContent-Length: 100\r\n\r\n{"mo' if i % 2
                     else b"GET / HTTP/1.1\r\nHost: 127.0")
    time.sleep(0.5)
    start = time.monotonic()
    server.proc.send_signal(2)  # SIGINT
    server.proc.wait(30)
    assert time.monotonic() - start < 10  # idle 0.5 s; as found: not within 30 s
    for sock in held:
        sock.close()
    log = server.log.read_text()
    assert log.strip() == "stopped", log  # as found: thousands of traceback lines


def test_names_addresses_and_media_types():
    assert guard.host_name("Example.ORG:8000") == "example.org"
    assert guard.host_name("[::1]:80") == "::1" and guard.host_name("::1") == "::1"
    assert guard.host_name("localhost") == "localhost"
    assert guard.host_allowed("10.0.0.7:8000") and guard.host_allowed("[fe80::1]")
    assert guard.host_allowed("localhost:1") and not guard.host_allowed("example.org")
    assert guard.host_allowed("box:1", ("BOX",)) and not guard.host_allowed("box2", ("box",))
    assert guard.origin_matches("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert guard.origin_matches("https://Box", "box")
    assert not guard.origin_matches("null", "box") and not guard.origin_matches("box", "box")
    assert not guard.origin_matches("ftp://box", "box")
    assert guard.media_type("application/json; charset=utf-8") == "application/json"


@pytest.mark.parametrize("field, value", [
    ("max_body", 0), ("body_timeout", 0.0), ("header_timeout", -1.0), ("max_connections", 0),
    ("quick_sims", 5000), ("deep_searches", 0), ("retry_after", -1), ("quick_searches", 1.5),
])
def test_limits_refuse_a_bad_value_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"^config field limits\.{field}: got "):
        guard.Limits(**{field: value})
