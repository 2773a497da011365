"""The web pages end to end in a real headless Chromium (Debian's ``chromium``
package, driven by playwright). The served page: click moves, see the agent
reply and its heat map with words for its numbers and a colour legend, undo,
play to the end, let two agents play a game, and fit a phone's screen. The
static page (``python -m c4jax.export web``): its numbers in words, undo, and a
phone's screen (test_onnx.py plays it further).

Skipped, with the reason, only where the ``chromium`` binary is missing
(``.ci/run`` installs it with apt-get where it can), and for the static page
where onnxruntime-web's files cannot be had.
"""

import re
import threading
import time

import pytest
import uvicorn

from c4jax.player import Player
from c4jax.web.app import make_app

TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def server_url(tiny_run):
    """The app on a free local port, served by uvicorn in a thread. It compiles a
    simulation count when a move first asks for it, not all of them at start: these
    tests play with 4 and 0 (tests/web/test_app.py has the compiling at start)."""
    app = make_app(Player.from_checkpoint(tiny_run, num_simulations=4), source="tiny run",
                   warm_up=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def _players(page) -> list[str]:
    return [item.text_content() for item in page.query_selector_all("#players .player")]


def _stones(page) -> dict[str, list[tuple[str, str]]]:
    """The stones on the board: mark -> [(column, row)...]."""
    return {
        mark: [(c.evaluate("e => e.parentNode.dataset.col"), c.get_attribute("data-row"))
               for c in page.query_selector_all(f"#board .cell.{mark}")]
        for mark in ("x", "o")
    }


def _moves(page) -> str:
    text = page.text_content("#moves")
    return "" if text.startswith("(") else text


@pytest.mark.slow
def test_play_a_game_in_the_browser(browser, server_url, tmp_path, wait_moves, play_to_the_end):
    page = browser.new_page(viewport={"width": 640, "height": 900})
    errors, requests = [], []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(server_url + "/")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    assert page.input_value("#sims") == "4"
    assert "tiny run" in page.text_content("#source")
    assert _players(page) == ["x (red, moves first): human", "o (yellow): agent"]
    assert page.is_disabled("#undo")  # nothing to take back

    # A human move, and the agent's reply with its heat map.
    page.click('#board .col[data-col="4"]')
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    moves = _moves(page)
    assert moves[0] == "4"
    chosen = page.query_selector_all(".heat-cell.chosen")
    assert len(chosen) == 1 and chosen[0].get_attribute("data-col") == moves[1]
    heat = page.query_selector_all("#heat .heat-cell")
    assert len(heat) == 7 and all("%" in cell.text_content() for cell in heat)
    assert "Agent (o) played column " + moves[1] in page.text_content("#value")
    # The numbers in words: a value (for o, the agent, says the key above) and the visits.
    for cell in heat:
        value, visits = cell.query_selector(".q").inner_text(), cell.query_selector(".n")
        assert re.fullmatch(r"value ([+-]\d\.\d\d|-)", value), value
        assert re.fullmatch(r"\d+ visits?", visits.inner_text()), visits.inner_text()
        assert "q " not in cell.text_content() and "n " not in cell.text_content()
    assert "value of playing there for o (the agent" in page.text_content("#heat-key")
    assert "for o (the agent)" in heat[int(moves[1]) - 1].get_attribute("title")
    assert page.text_content("#legend .legend-title") == "Colour: the search's policy"
    policy_colour = heat[0].evaluate("e => e.style.background")
    page.select_option("#heat-by", "q")  # the heat map shows the values instead
    assert page.query_selector("#heat .heat-cell").evaluate("e => e.style.background") != (
        policy_colour
    )
    # ... and its legend says what red and green mean, and for whom.
    assert page.text_content("#legend .legend-title") == (
        "Colour: the value of each move for o (the agent)"
    )
    assert page.text_content("#legend .low") == "-1: o loses"
    assert page.text_content("#legend .high") == "+1: o wins"
    page.select_option("#heat-by", "policy")
    assert len(page.query_selector_all(".cell.last")) == 1
    assert len(page.query_selector_all(".cell.x")) == 1
    assert len(page.query_selector_all(".cell.o")) == 1

    # Undo goes back to the human's turn: the empty board.
    page.click("#undo")
    wait_moves(page, "m.length === 0", TIMEOUT_MS)
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    assert not page.query_selector_all(".cell.x, .cell.o")

    # Play to the end: the human always takes the leftmost open column.
    play_to_the_end(page, TIMEOUT_MS)

    # New game, then two agents play each other to the end.
    page.click("#new-game")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    page.select_option("#sims", "0")
    page.select_option("#player-x", "agent")
    assert _players(page) == ["x (red, moves first): agent", "o (yellow): agent"]
    page.wait_for_selector("#status.over", timeout=TIMEOUT_MS)
    final = _moves(page)
    assert len(final) >= 7 and "(agent)" in page.text_content("#status")
    page.screenshot(path=str(tmp_path / "agents.png"), full_page=True)

    assert not errors, errors
    assert all(url.startswith(server_url) for url in requests), requests  # nothing external
    assert not page.text_content("#error")
    page.close()


def _state_posts(requests) -> list[str]:
    """The bodies of the POSTs to /api/state among the recorded requests."""
    return [r.post_data for r in requests if r.url.endswith("/api/state") and r.method == "POST"]


@pytest.mark.slow
def test_the_shared_board_script_guards_the_clicks(browser, server_url, wait_moves):
    """common/board.js runs in the served page: it draws the board and lets no click through
    while the agent thinks, on a full column or after the game."""
    page = browser.new_page(viewport={"width": 640, "height": 900})
    errors, requests, held = [], [], []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("request", lambda request: requests.append(request))
    page.route("**/api/move", lambda route: held.append(route))  # held until released
    page.goto(server_url + "/")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    assert any(r.url == server_url + "/common/board.js" for r in requests)
    assert page.evaluate("typeof C4.renderBoard") == "function"
    assert len(page.query_selector_all("#board .col")) == 7
    assert len(page.query_selector_all("#board .cell")) == 42

    # While the agent thinks, a click is not a move.
    page.click('#board .col[data-col="4"]')
    page.wait_for_selector("text=Agent (o) is thinking...", timeout=TIMEOUT_MS)
    assert len(held) == 1 and not page.query_selector_all("#board .col.playable")
    posts = len(_state_posts(requests))
    page.click('#board .col[data-col="3"]')
    page.wait_for_timeout(300)
    assert _moves(page) == "4" and len(_state_posts(requests)) == posts
    held.pop().continue_()
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)

    # Two humans: a full column takes no stone, and after the game no column does.
    page.select_option("#player-o", "human")
    page.click("#new-game")
    wait_moves(page, "m.length === 0", TIMEOUT_MS)
    for n in range(1, 7):
        page.click('#board .col[data-col="1"]')
        wait_moves(page, f"m.length === {n}", TIMEOUT_MS)
    assert _moves(page) == "111111"
    assert page.get_attribute('#board .col[data-col="1"]', "class") == "col"
    posts = len(_state_posts(requests))
    page.click('#board .col[data-col="1"]')
    page.wait_for_timeout(300)
    assert _moves(page) == "111111" and len(_state_posts(requests)) == posts
    for n, col in enumerate("2323232", start=7):  # x: four in a row in column 2
        page.click(f'#board .col[data-col="{col}"]')
        wait_moves(page, f"m.length === {n}", TIMEOUT_MS)
        if page.query_selector("#status.over"):
            break
    assert page.text_content("#status") == "Game over: x (human) wins.", _moves(page)
    final, posts = _moves(page), len(_state_posts(requests))
    page.click('#board .col[data-col="5"]')
    page.wait_for_timeout(300)
    assert _moves(page) == final and len(_state_posts(requests)) == posts
    assert not held and not errors, errors
    assert not page.text_content("#error")
    page.close()


@pytest.mark.slow
def test_a_busy_server_is_asked_again_and_a_stale_answer_is_dropped(
        browser, server_url, wait_moves):
    """A 503 for the agent's move (its lane full) is asked again after ``Retry-After``
    without a click (before: the page stopped, the agent to move, no column open);
    two quick clicks answered late play one move, not the second over the first."""
    page = browser.new_page(viewport={"width": 640, "height": 900})
    errors, refused = [], []
    page.on("pageerror", lambda err: errors.append(str(err)))

    def busy_once(route):
        if refused:
            route.continue_()
        else:
            refused.append(route)
            route.fulfill(status=503, headers={"Retry-After": "1"}, content_type="application/json",
                          body='{"error": "the server is busy: try again shortly"}')

    page.route("**/api/move", busy_once)
    page.goto(server_url + "/")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    page.click('#board .col[data-col="4"]')
    page.wait_for_selector("text=asking again in 1 s", timeout=TIMEOUT_MS)
    wait_moves(page, "m.length === 2", TIMEOUT_MS)  # no click: the page asked again
    assert len(refused) == 1 and not page.text_content("#error")

    held = []
    page.select_option("#player-o", "human")
    page.click("#new-game")
    wait_moves(page, "m.length === 0", TIMEOUT_MS)
    page.route("**/api/state", lambda route: held.append(route))
    page.click('#board .col[data-col="4"]')
    page.click('#board .col[data-col="5"]')  # before the first click's answer
    deadline = time.monotonic() + 30
    while len(held) < 2:
        assert time.monotonic() < deadline, len(held)
        page.wait_for_timeout(50)
    held[0].continue_()
    wait_moves(page, "m === '4'", TIMEOUT_MS)
    with page.expect_response("**/api/state"):
        held[1].continue_()  # the answer to "5" from the empty board
    page.wait_for_timeout(300)
    assert _moves(page) == "4", _moves(page)  # before: "5", played over the "4"
    assert not errors, errors
    page.close()


@pytest.mark.slow
def test_undo_restores_the_position_and_the_moves(browser, server_url, wait_moves):
    page = browser.new_page(viewport={"width": 640, "height": 900})
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(server_url + "/")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    page.click('#board .col[data-col="4"]')
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    first, board = _moves(page), _stones(page)
    page.click('#board .col[data-col="1"]')
    wait_moves(page, "m.length === 4", TIMEOUT_MS)
    assert _moves(page).startswith(first + "1") and not page.is_disabled("#undo")

    # Undo: back to before the human's last move and the agent's reply.
    page.click("#undo")
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    assert _moves(page) == first and _stones(page) == board
    assert len(page.query_selector_all(".cell.last")) == 1
    assert page.wait_for_selector("#board .col.playable", timeout=TIMEOUT_MS)
    page.click("#undo")
    wait_moves(page, "m.length === 0", TIMEOUT_MS)
    assert _stones(page) == {"x": [], "o": []} and page.is_disabled("#undo")

    # The human plays o: the agent's opening move stays, undo takes back o's move and x's reply.
    page.select_option("#player-o", "human")
    page.select_option("#player-x", "agent")
    wait_moves(page, "m.length === 1", TIMEOUT_MS)
    page.wait_for_selector("text=o (human) to move", timeout=TIMEOUT_MS)
    assert page.is_disabled("#undo")
    opening = _moves(page)
    page.click('#board .col[data-col="7"]')
    wait_moves(page, "m.length === 3", TIMEOUT_MS)
    page.click("#undo")
    wait_moves(page, "m.length === 1", TIMEOUT_MS)
    page.wait_for_selector("text=o (human) to move", timeout=TIMEOUT_MS)
    assert _moves(page) == opening and len(page.query_selector_all(".cell.x, .cell.o")) == 1
    assert not errors, errors
    assert not page.text_content("#error")
    page.close()


def _fits_a_phone(page):
    """At 375 px: nothing wider than the screen, the heat cells over their columns, and
    every control on screen."""
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    cells = page.query_selector_all("#heat .heat-cell")
    cols = page.query_selector_all("#board .col")
    assert len(cells) == len(cols) == 7
    for cell, col in zip(cells, cols, strict=True):
        a, b = cell.bounding_box(), col.bounding_box()
        assert abs((a["x"] + a["width"] / 2) - (b["x"] + b["width"] / 2)) < 3, (a, b)
        assert b["x"] >= 0 and b["x"] + b["width"] <= 375
    for control in page.query_selector_all("#controls select, #controls button"):
        box = control.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 375, box
        assert box["height"] >= 20  # big enough to tap


@pytest.mark.slow
def test_the_page_on_a_phone(browser, server_url, tmp_path, wait_moves):
    page = browser.new_page(viewport={"width": 375, "height": 740}, device_scale_factor=2)
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(server_url + "/")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    page.click('#board .col[data-col="4"]')
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    _fits_a_phone(page)
    page.select_option("#heat-by", "q")
    _fits_a_phone(page)
    legend = page.query_selector("#legend .legend-strip").bounding_box()
    assert legend["width"] > 100 and legend["x"] + legend["width"] <= 375
    page.screenshot(path=str(tmp_path / "phone.png"), full_page=True)
    assert not errors, errors
    page.close()


@pytest.mark.slow
def test_the_static_page_labels_its_numbers_and_undoes(browser, page_url, tmp_path, wait_moves):
    page = browser.new_page(viewport={"width": 640, "height": 1000})
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(page_url + "/")
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)
    assert _players(page) == ["x (red, moves first): you", "o (yellow): the network"]
    assert page.is_disabled("#undo")

    # The network alone: its move probability and the logit, named.
    page.click('#board .col[data-col="4"]')
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    first, board = _moves(page), _stones(page)
    heat = page.query_selector_all("#heat .heat-cell")
    for cell in heat:
        assert re.fullmatch(r"logit -?\d+\.\d\d", cell.query_selector(".n").inner_text())
    assert "network's probability of playing there" in page.text_content("#heat-key")
    assert page.text_content("#legend .legend-title") == "Colour: the network's move probability"
    assert "its value of the position, for o:" in page.text_content("#value")
    assert "(+1 = it wins, -1 = it loses)" in page.text_content("#value")

    # Undo takes back your move and the network's reply.
    page.click('#board .col[data-col="1"]')
    wait_moves(page, "m.length === 4", TIMEOUT_MS)
    page.click("#undo")
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)
    assert _moves(page) == first and _stones(page) == board
    assert not page.query_selector_all("#heat .heat-cell.chosen")  # the old numbers are gone
    page.click("#undo")
    wait_moves(page, "m.length === 0", TIMEOUT_MS)
    assert _stones(page) == {"x": [], "o": []} and page.is_disabled("#undo")

    # With search: the value (for o) and the visits, named.
    page.select_option("#sims", "16")
    page.click('#board .col[data-col="4"]')
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)
    for cell in page.query_selector_all("#heat .heat-cell"):
        assert re.fullmatch(r"value ([+-]\d\.\d\d|-)", cell.query_selector(".q").inner_text())
        assert re.fullmatch(r"\d+ visits?", cell.query_selector(".n").inner_text())
    assert "the value of playing there for o (the network" in page.text_content("#heat-key")
    assert page.text_content("#legend .legend-title") == "Colour: the share of the simulations"
    page.screenshot(path=str(tmp_path / "static.png"), full_page=True)

    # On a phone's screen.
    page.set_viewport_size({"width": 375, "height": 740})
    _fits_a_phone(page)
    page.screenshot(path=str(tmp_path / "static_phone.png"), full_page=True)
    assert not errors, errors
    assert not page.text_content("#error")
    page.close()
