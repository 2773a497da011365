"""The web server under load: 100 clients at once (slow ones that send their headers
or body a byte at a time and stall, and greedy ones that ask for 2000-simulation moves
without pause) must not delay the page, its script, ``/api/info`` or a cheap move.

As found (the app before its limits): under 200 concurrent 2000-simulation moves the
page's ``app.js`` took 59 s and a 16-simulation move 14 s (the searches queued behind
one lock in the thread pool that also serves files); requests that never finished
were held for good.
"""

import json
import subprocess
import sys
import time

import httpx
import pytest

# Idle, each of the measured requests takes 2-5 ms; under this load (on a 2-core machine,
# also with both cores busy with other work) at most 0.17 s was seen, 0.3 s when the
# greedy clients came back every 50 ms. A second leaves room for a machine busy with
# other tests.
BUDGET = 1.0
SLOW_CLIENTS = 40  # headers or body a byte every 0.2 s, then a stall
GREEDY_CLIENTS = 60  # 2000-simulation moves (0.4 s each here) back to back

# The load, in a process of its own (the measuring client's threads must not wait for
# the load's in one interpreter): argv [port, seconds, slow, greedy]; prints the greedy
# clients' statuses.
LOAD = r"""
import json, socket, sys, threading, time
import httpx

port, seconds, slow_clients, greedy_clients = json.loads(sys.argv[1])
stop, statuses = threading.Event(), []

def slow(index):
    message = (
        b"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 200\r\n\r\n{"moves": "4' if index % 2
        else b"GET /static/app.js HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    )
    while not stop.is_set():  # a new connection each time the server closes one
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                for byte in message:
                    if stop.is_set():
                        return
                    sock.sendall(bytes([byte]))
                    time.sleep(0.2)
                stop.wait(30)  # stalls
        except OSError:
            pass

def greedy():
    body = json.dumps({"moves": "4", "sims": 2000})
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            try:
                response = client.post(f"http://127.0.0.1:{port}/api/move", content=body,
                                       headers={"content-type": "application/json"})
            except httpx.HTTPError as err:
                statuses.append(type(err).__name__)
                continue
            statuses.append(response.status_code)
            if response.status_code == 503:
                statuses.append("retry-after " + response.headers.get("retry-after", "none"))
                stop.wait(0.25)  # sooner than Retry-After: clients are impatient

threads = [threading.Thread(target=slow, args=(i,), daemon=True) for i in range(slow_clients)]
threads += [threading.Thread(target=greedy, daemon=True) for _ in range(greedy_clients)]
for thread in threads:
    thread.start()
time.sleep(seconds)
stop.set()
print(json.dumps(statuses))
"""


@pytest.mark.slow
def test_the_page_and_cheap_moves_stay_quick_under_load(stub_server):
    server = stub_server(per_sim=0.0002, header_timeout=3.0, body_timeout=3.0)
    time.sleep(2)  # the counts compile at start (here at once)
    load = subprocess.Popen(
        [sys.executable, "-c", LOAD, json.dumps([server.port, 14, SLOW_CLIENTS, GREEDY_CLIENTS])],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(3)  # all clients under way
        took: dict[str, list[float]] = {}
        json_type = {"content-type": "application/json"}
        with httpx.Client(timeout=60, base_url=server.url) as client:
            for _ in range(8):  # over about 8 s, so that slow clients are cut off meanwhile
                for name, request in (
                    ("page", lambda: client.get("/")),
                    ("app.js", lambda: client.get("/static/app.js")),
                    ("info", lambda: client.get("/api/info")),
                    ("move, 16 simulations", lambda: client.post(
                        "/api/move", content='{"moves": "44", "sims": 16}', headers=json_type)),
                    ("move, network alone", lambda: client.post(
                        "/api/move", content='{"moves": "44", "sims": 0}', headers=json_type)),
                ):
                    start = time.monotonic()
                    response = request()
                    took.setdefault(name, []).append(time.monotonic() - start)
                    assert response.status_code == 200, (name, response.text)
                time.sleep(1)
        out, _ = load.communicate(timeout=60)
    finally:
        load.kill()
    worst = {name: round(max(times), 3) for name, times in took.items()}
    print("worst latency under load (s):", worst)
    assert all(t < BUDGET for t in worst.values()), worst
    statuses = json.loads(out)
    assert statuses.count(200) >= 5, statuses[:50]  # the greedy clients were served too
    assert 503 in statuses  # and the rest told to come back, rather than queued
    assert not [s for s in statuses if s not in (200, 503, "retry-after 2")], set(statuses)
