"""The web page end to end in a real headless Chromium (Debian's ``chromium``
package, driven by playwright): click moves, see the agent reply and its heat
map, undo, play to the end, and let two agents play a game.

Skipped, with the reason, only where the ``chromium`` binary is missing
(``.ci/run`` installs it with apt-get where it can).
"""

import threading
import time

import pytest
import uvicorn

from c4jax.player import Player
from c4jax.web.app import make_app

TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def server_url(tiny_run):
    """The app on a free local port, served by uvicorn in a thread."""
    app = make_app(Player.from_checkpoint(tiny_run, num_simulations=4), source="tiny run")
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


def _moves(page) -> str:
    text = page.text_content("#moves")
    return "" if text.startswith("(") else text


def _wait_moves(page, predicate_js: str):
    page.wait_for_function(
        f"(() => {{ const t = document.getElementById('moves').textContent;"
        f" const m = t.startsWith('(') ? '' : t; return {predicate_js}; }})()",
        timeout=TIMEOUT_MS,
    )


@pytest.mark.slow
def test_play_a_game_in_the_browser(browser, server_url, tmp_path):
    page = browser.new_page(viewport={"width": 640, "height": 900})
    errors, requests = [], []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(server_url + "/")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    assert page.input_value("#sims") == "4"
    assert "tiny run" in page.text_content("#source")

    # A human move, and the agent's reply with its heat map.
    page.click('#board .col[data-col="4"]')
    _wait_moves(page, "m.length === 2")
    moves = _moves(page)
    assert moves[0] == "4"
    chosen = page.query_selector_all(".heat-cell.chosen")
    assert len(chosen) == 1 and chosen[0].get_attribute("data-col") == moves[1]
    heat = page.query_selector_all("#heat .heat-cell")
    assert len(heat) == 7 and all("%" in cell.text_content() for cell in heat)
    assert "Agent (o) played column " + moves[1] in page.text_content("#value")
    policy_colour = heat[0].evaluate("e => e.style.background")
    page.select_option("#heat-by", "q")  # the heat map shows the values instead
    assert page.query_selector("#heat .heat-cell").evaluate("e => e.style.background") != (
        policy_colour
    )
    page.select_option("#heat-by", "policy")
    assert len(page.query_selector_all(".cell.last")) == 1
    assert len(page.query_selector_all(".cell.x")) == 1
    assert len(page.query_selector_all(".cell.o")) == 1

    # Undo goes back to the human's turn: the empty board.
    page.click("#undo")
    _wait_moves(page, "m.length === 0")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    assert not page.query_selector_all(".cell.x, .cell.o")

    # Play to the end: the human always takes the leftmost open column.
    for _ in range(30):
        status = page.text_content("#status")
        if status.startswith("Game over"):
            break
        page.wait_for_selector(
            "#board .col.playable, #status.over", timeout=TIMEOUT_MS
        )
        if page.query_selector("#status.over"):
            break
        before = _moves(page)
        page.click("#board .col.playable")
        _wait_moves(
            page,
            f"m.length >= {len(before) + 2} || document.getElementById('status')"
            ".classList.contains('over')",
        )
    status = page.text_content("#status")
    assert status.startswith("Game over"), status
    if "wins" in status:
        assert len(page.query_selector_all(".cell.win")) >= 4
    assert not page.query_selector_all("#board .col.playable")
    page.screenshot(path=str(tmp_path / "game.png"), full_page=True)
    assert (tmp_path / "game.png").stat().st_size > 1000

    # New game, then two agents play each other to the end.
    page.click("#new-game")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)
    page.select_option("#sims", "0")
    page.select_option("#player-x", "agent")
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
def test_the_shared_board_script_guards_the_clicks(browser, server_url):
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
    _wait_moves(page, "m.length === 2")
    page.wait_for_selector("text=x (human) to move", timeout=TIMEOUT_MS)

    # Two humans: a full column takes no stone, and after the game no column does.
    page.select_option("#player-o", "human")
    page.click("#new-game")
    _wait_moves(page, "m.length === 0")
    for n in range(1, 7):
        page.click('#board .col[data-col="1"]')
        _wait_moves(page, f"m.length === {n}")
    assert _moves(page) == "111111"
    assert page.get_attribute('#board .col[data-col="1"]', "class") == "col"
    posts = len(_state_posts(requests))
    page.click('#board .col[data-col="1"]')
    page.wait_for_timeout(300)
    assert _moves(page) == "111111" and len(_state_posts(requests)) == posts
    for n, col in enumerate("2323232", start=7):  # x: four in a row in column 2
        page.click(f'#board .col[data-col="{col}"]')
        _wait_moves(page, f"m.length === {n}")
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
