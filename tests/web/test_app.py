"""The web app's search lanes against a real uvicorn (``stub_server``: a stand-in agent
in its own process): a full lane answers 503 while cheap moves and the page go on, and
each simulation count is compiled once when the server starts; and the API fuzzed in
process. (tests/web/test_guard.py has the limits on what one client may take;
tests/test_serve.py the API's answers; tests/web/test_load.py the load test.)"""

import json
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from c4jax.inputs import MAX_SIMULATIONS
from c4jax.position import Position
from c4jax.web import app as web
from c4jax.web import guard


def test_simulation_choices_are_the_list_and_the_default():
    assert web.simulation_choices(100) == (0, 4, 16, 64, 100, 200, 800, 2000, MAX_SIMULATIONS)
    assert web.simulation_choices(16) == web.SIMULATION_CHOICES


@pytest.mark.slow
def test_a_full_lane_answers_503_with_retry_after_and_cheap_moves_go_on(stub_server):
    # 2000 simulations take 4 s here; the deep lane holds two moves, running or waiting.
    server = stub_server(per_sim=0.002, deep_searches=2, retry_after=3)
    answers = []

    def deep():
        answers.append(server.post("/api/move", {"moves": "4", "sims": 2000}))

    threads = [threading.Thread(target=deep) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # both taken by the lane
    start = time.monotonic()
    refused = server.post("/api/move", {"moves": "4", "sims": 800})
    assert time.monotonic() - start < server.quick  # at once, not after the two
    assert refused.status_code == 503 and refused.headers["retry-after"] == "3"
    assert refused.json()["error"].startswith("busy: 2 moves are being searched")
    for request in (lambda: httpx.get(server.url + "/static/app.js", timeout=30),
                    lambda: httpx.get(server.url + "/api/info", timeout=30),
                    lambda: server.post("/api/move", {"moves": "4", "sims": 16}),
                    lambda: server.post("/api/state", {"moves": "4", "column": 4})):
        start = time.monotonic()
        assert request().status_code == 200
        assert time.monotonic() - start < server.quick
    for thread in threads:
        thread.join(60)
    assert [a.status_code for a in answers] == [200, 200]


@pytest.mark.slow
def test_each_simulation_count_is_compiled_once_when_the_server_starts(stub_server):
    server = stub_server(default=100)
    want = sorted({*web.SIMULATION_CHOICES, 100})
    deadline = time.monotonic() + 30
    while not server.compiled.exists() or len(server.compiled.read_text().split()) < len(want):
        assert time.monotonic() < deadline, "the counts were not compiled at start"
        time.sleep(0.1)
    compiled = [int(n) for n in server.compiled.read_text().split()]
    assert sorted(compiled) == want  # each once
    quick = [n for n in compiled if n <= guard.Limits().quick_sims]
    deep = [n for n in compiled if n > guard.Limits().quick_sims]
    assert quick == [0, 4, 16, 64] and deep == [100, 200, 800, 2000, MAX_SIMULATIONS]
    info = httpx.get(server.url + "/api/info").json()
    assert info["sims"] == want and info["max_sims"] == MAX_SIMULATIONS
    assert info["default_sims"] == 100
    for sims in want:
        assert server.post("/api/move", {"moves": "", "sims": sims}).json()[
            "sims"] == sims
    assert [int(n) for n in server.compiled.read_text().split()] == compiled  # no new one
    response = server.post("/api/move", {"moves": "", "sims": 5})
    assert response.status_code == 422
    assert response.json()["error"] == (
        "sims: got 5, allowed: 0, 4, 16, 64, 100, 200, 800, 2000, 4096")


class _Stub:
    """The leftmost open column, at once."""

    def __init__(self, num_simulations=16):
        self.num_simulations = num_simulations

    def with_simulations(self, n):
        return _Stub(n)

    def analyse(self, moves):
        from c4jax.player import Analysis

        legal = Position.parse(moves).legal
        return Analysis([1 / 7] * 7, 0.0, legal[0], rule="first legal")


@pytest.fixture(scope="module")
def fuzz_client():
    with TestClient(web.make_app(_Stub()), base_url="http://127.0.0.1") as client:
        yield client


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False) | st.text(max_size=50)
    | st.sampled_from(["", "4453", "1" * 42, "1212121", "44x", "٣", "c4jax"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8,
)


bodies = st.one_of(
    st.fixed_dictionaries({}, optional={
        "moves": json_values | st.text(alphabet="01234567890", max_size=45),
        "sims": json_values | st.sampled_from([0, 4, 16, 64, 200, 7, -1, MAX_SIMULATIONS]),
        "column": json_values | st.integers(-2, 9),
        "agent": json_values,
    }).map(json.dumps),
    json_values.map(json.dumps),
    st.text(max_size=200),
)


header_values = st.one_of(
    st.sampled_from(["application/json", "text/plain", "application/json; charset=utf-8",
                     "", "application/JSON", "multipart/form-data; boundary=x"]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30),
)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=st.sampled_from(["/api/move", "/api/state"]), body=bodies,
       content_type=header_values, origin=st.none() | header_values,
       host=st.sampled_from(["127.0.0.1", "localhost:8000", "evil.example", "[::1]"]))
def test_any_request_gets_an_answer_or_a_reason(fuzz_client, path, body, content_type, origin,
                                                host):
    """Random JSON (and not JSON) bodies and headers: 200 or a 4xx with a reason, at once;
    never a 500."""
    headers = {"content-type": content_type, "host": host}
    if origin is not None:
        headers["origin"] = origin
    start = time.monotonic()
    response = fuzz_client.post(path, content=body.encode(), headers=headers)
    assert time.monotonic() - start < 5
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    if response.status_code != 200:
        assert set(response.json()) == {"error"} and response.json()["error"]
    assert "Traceback" not in response.text
