"""The board script both pages share (c4jax/web/common/board.js): both pages load it before
their own app.js and leave its work to it, and, in a headless Chromium, it draws the board
and the status line and guards the clicks (while thinking, on a full column, after the
game, before the page is ready).

The pages themselves are played with it in test_browser.py (served) and test_onnx.py
(standalone). Skipped, with the reason, only where the ``chromium`` binary is missing.
"""

import re
from pathlib import Path

import pytest

import c4jax.web

WEB = Path(c4jax.web.__file__).parent
COMMON = WEB / "common" / "board.js"
PAGES = {"served": "/common/board.js", "standalone": "board.js"}  # the page -> its src


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(PAGES))
def test_both_pages_load_the_common_script_before_their_own(page):
    html = (WEB / page / "index.html").read_text()
    scripts = re.findall(r'<script src="([^"]+)"></script>', html)
    assert PAGES[page] in scripts, scripts
    assert scripts.index(PAGES[page]) == len(scripts) - 2 and scripts[-1].endswith("app.js")
    # The app keeps only what differs: no board, status or guard code of its own.
    app = (WEB / page / "app.js").read_text()
    for shared in ("C4.renderBoard(", "C4.renderStatus(", "C4.renderHeat(", "C4.showMoves(",
                   "C4.renderPlayers(", "C4.renderLegend(", "C4.heatStyle(", "C4.undoTarget("):
        assert shared in app, (page, shared)
    for copied in ("function renderBoard", "function renderStatus", "function playable",
                   'createElement("div")', "classList.add(\"win\")", "rgba(",
                   "linear-gradient", "function undoTarget"):
        assert copied not in app, (page, copied)


def test_the_common_script_defines_one_global_and_needs_no_build():
    text = COMMON.read_text()
    assert re.findall(r"^(?:const|let|var|function) (\w+)", text, re.M) == ["C4"]
    assert "import " not in text and "export " not in text and "require(" not in text


# --- The script in a browser, on a page with the elements it writes into. ---

PAGE = """<!doctype html><html><body>
<p id="players" class="players"></p>
<p id="status">Loading the page...</p><div id="heat"></div><div id="legend" class="legend"></div>
<div id="board"></div><code id="moves"></code></body></html>"""

# A page of its own for the script: a game the test sets with `setGame`, clicks recorded.
HARNESS = """() => {
  window.state = { view: null, ready: true, busy: false, humans: ["x", "o"] };
  window.played = [];
  window.game = {
    view: () => window.state.view,
    turn: () => ({ ready: state.ready, busy: state.busy, human: (m) => state.humans.includes(m) }),
    play: (col) => { window.played.push(col); },
  };
  window.words = {
    who: (mark, human) => `${mark} (${human ? "human" : "agent"})`,
    draw: "draw", wins: (who) => `${who} wins`, thinking: (mark) => `${mark} thinks`,
    toMove: (who, human) => `${who} to move` + (human ? ", click" : ""),
  };
  // The view of a move string, as a page would build it.
  window.viewOf = (moves, win = [], winner = null) => {
    const board = Array.from({ length: 6 }, () => new Array(7).fill(null));
    const heights = new Array(7).fill(0);
    let last = null;
    [...moves].forEach((d, i) => {
      const c = Number(d) - 1;
      board[heights[c]][c] = C4.MARKS[i % 2];
      last = [heights[c]++, c];
    });
    const legal = [1, 2, 3, 4, 5, 6, 7].filter((col) => heights[col - 1] < 6);
    return { board, toMove: C4.moverOf(moves), winner, legal, last, win };
  };
  window.show = () => {
    C4.renderBoard(document.getElementById("board"), game);
    C4.renderStatus(document.getElementById("status"), game, words);
  };
}"""


@pytest.fixture
def page(browser):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.set_content(PAGE)
    page.add_style_tag(path=str(WEB / "served" / "style.css"))  # the pages' look: columns to click
    page.add_script_tag(path=str(COMMON))
    page.evaluate(HARNESS)
    yield page
    assert not errors, errors
    page.close()


def _playable(page) -> list[int]:
    return [int(c.get_attribute("data-col")) for c in page.query_selector_all(".col.playable")]


def _click(page, col: int) -> list[int]:
    """Clicks column ``col`` (1-7); the columns the page's play() was called with so far."""
    page.click(f'#board .col[data-col="{col}"]')
    return page.evaluate("played")


@pytest.mark.slow
def test_the_board_and_status_of_a_position(page):
    page.evaluate("() => { state.view = viewOf('4453'); show(); }")
    assert len(page.query_selector_all("#board .col")) == 7
    assert len(page.query_selector_all("#board .cell")) == 42
    cells = lambda sel: [  # noqa: E731
        (int(c.evaluate("e => e.dataset.row")), int(c.evaluate("e => e.parentNode.dataset.col")))
        for c in page.query_selector_all(sel)
    ]
    assert cells(".cell.x") == [(0, 4), (0, 5)] and cells(".cell.o") == [(0, 3), (1, 4)]
    assert cells(".cell.last") == [(0, 3)] and not cells(".cell.win")
    assert page.text_content("#status") == "x (human) to move, click"
    assert _playable(page) == [1, 2, 3, 4, 5, 6, 7]
    assert _click(page, 6) == [6]
    page.evaluate("() => { state.humans = ['o']; show(); }")
    assert page.text_content("#status") == "x (agent) to move" and _playable(page) == []
    assert _click(page, 6) == [6]  # an agent's turn: the click is not a move
    assert page.evaluate("[C4.fmt(0.5), C4.fmt(-0.25), C4.fmt(null), C4.moverOf('123')]") == [
        "+0.50", "-0.25", "-", "o"
    ]
    page.evaluate("() => { const el = document.getElementById('moves');"
                  " C4.showMoves(el, '', '(none)'); window.shown = [el.textContent];"
                  " C4.showMoves(el, '4453', '(none)'); shown.push(el.textContent); }")
    assert page.evaluate("shown") == ["(none)", "4453"]


@pytest.mark.slow
def test_no_move_while_thinking_even_on_a_board_drawn_before(page):
    page.evaluate("() => { state.view = viewOf('4'); show(); }")
    assert _playable(page) == [1, 2, 3, 4, 5, 6, 7]
    # Busy from now on, without a new render: the guard asks at the click, not at the render.
    page.evaluate("() => { state.busy = true; }")
    assert _click(page, 3) == []
    page.evaluate("show()")
    assert page.text_content("#status") == "o thinks" and _playable(page) == []
    assert _click(page, 3) == []
    page.evaluate("() => { state.busy = false; show(); }")
    assert _click(page, 3) == [3]


@pytest.mark.slow
def test_no_move_in_a_full_column(page):
    page.evaluate("() => { state.view = viewOf('111111'); show(); }")
    assert _playable(page) == [2, 3, 4, 5, 6, 7]
    full = page.query_selector_all('.col[data-col="1"] .cell.x, .col[data-col="1"] .cell.o')
    assert len(full) == 6
    assert _click(page, 1) == []
    assert _click(page, 2) == [2]


@pytest.mark.slow
def test_no_move_after_the_game_and_the_four_shown(page):
    page.evaluate(
        "() => { state.view = viewOf('1212121', [[0,0],[1,0],[2,0],[3,0]], 'x'); show(); }"
    )
    assert page.text_content("#status") == "x (human) wins"
    assert page.get_attribute("#status", "class") == "over"
    assert len(page.query_selector_all(".cell.win")) == 4 and _playable(page) == []
    assert _click(page, 3) == []
    page.evaluate("() => { state.view = { ...viewOf('1212121'), winner: 'draw' }; show(); }")
    assert page.text_content("#status") == "draw" and _click(page, 3) == []
    page.evaluate("() => { state.view = viewOf(''); show(); }")  # a new game
    assert page.get_attribute("#status", "class") == "" and _click(page, 3) == [3]


@pytest.mark.slow
def test_nothing_moves_before_the_page_is_ready(page):
    page.evaluate("show()")  # no view yet: an empty board, the status left as it was
    assert len(page.query_selector_all("#board .cell")) == 42
    assert not page.query_selector_all(".cell.x, .cell.o") and _playable(page) == []
    assert page.text_content("#status") == "Loading the page..."
    assert _click(page, 4) == []
    page.evaluate("() => { words.loading = 'Loading...'; state.view = viewOf('');"
                  " state.ready = false; show(); }")
    assert page.text_content("#status") == "Loading..." and _playable(page) == []
    assert _click(page, 4) == []
    page.evaluate("() => { state.ready = true; show(); }")
    assert _click(page, 4) == [4]


@pytest.mark.slow
def test_the_heat_row(page):
    page.evaluate(
        "() => C4.renderHeat(document.getElementById('heat'), (cell, c) => {"
        " cell.textContent = String(10 * c); })"
    )
    cells = page.query_selector_all("#heat .heat-cell")
    assert [c.get_attribute("data-col") for c in cells] == [str(c) for c in range(1, 8)]
    assert [c.text_content() for c in cells] == [str(10 * c) for c in range(7)]


@pytest.mark.slow
def test_what_undo_takes_back(page):
    cases = [  # (moves, the marks people play) -> what Undo goes back to
        ("4453", ["x"], "44"),   # x's last move (5) and o's reply (3)
        ("445", ["x"], "44"),    # x's last move; the agent has not replied yet
        ("4", ["x"], ""),
        ("", ["x"], None),       # nothing to take back
        ("4", ["o"], None),      # the agent's first move only: no person's move yet
        ("453", ["o"], "4"),     # o's move (5) and x's reply (3)
        ("4453", ["x", "o"], "445"),  # two people: one move
        ("4453", [], "445"),     # two agents: one move
        ("", [], None),
    ]
    for moves, humans, want in cases:
        got = page.evaluate(
            "([moves, humans]) => C4.undoTarget(moves, (m) => humans.includes(m))",
            [moves, humans],
        )
        assert got == want, (moves, humans, got)


@pytest.mark.slow
def test_the_players_line_says_which_colour_is_whose(page):
    page.evaluate("""() => { state.humans = ["o"];
      C4.renderPlayers(document.getElementById("players"), game,
        (mark, colour, human) => `${mark} (${colour}): ${human ? "human" : "agent"}`); }""")
    items = page.query_selector_all("#players .player")
    assert [i.text_content() for i in items] == ["x (red): agent", "o (yellow): human"]
    # The stone beside each is drawn in that side's colour on the board.
    page.evaluate("() => { state.view = viewOf('45'); show(); }")
    colour = "e => getComputedStyle(e).backgroundColor"
    for mark in ("x", "o"):
        stone = page.query_selector(f'#players .player[data-mark="{mark}"] .stone')
        cell = page.query_selector(f"#board .cell.{mark}")
        assert stone.evaluate(colour) == cell.evaluate(colour) != "rgba(0, 0, 0, 0)", mark
    assert page.evaluate("C4.COLOURS") == {"x": "red", "o": "yellow"}
    assert page.evaluate("getComputedStyle(document.querySelector('.cell.x')).backgroundColor") \
        == "rgb(221, 51, 51)"  # red, as the words say (--x: #d33)


@pytest.mark.slow
def test_the_heat_colours_and_their_legend(page):
    style = page.evaluate("""() => [C4.heatStyle("value", -1), C4.heatStyle("value", 0),
      C4.heatStyle("value", 1), C4.heatStyle("value", null), C4.heatStyle("share", 0),
      C4.heatStyle("share", 1)]""")
    assert style[0]["background"].startswith("rgba(118, 42, 131")  # a loss: purple (not x's red)
    assert style[2]["background"].startswith("rgba(27, 120, 55")  # a win: green
    assert style[1]["background"].endswith(", 0.000)") and style[3]["background"] == "#fff"
    assert style[4]["color"] == "#222" and style[5]["color"] == "#fff"  # dark blue: white text
    page.evaluate("""() => C4.renderLegend(document.getElementById("legend"), "value",
      "Colour: the value for o", ["-1: o loses", "0: a draw", "+1: o wins"])""")
    assert page.text_content("#legend .legend-title") == "Colour: the value for o"
    words = [page.text_content(f"#legend .legend-words .{w}") for w in ("low", "mid", "high")]
    assert words == ["-1: o loses", "0: a draw", "+1: o wins"]
    strip = page.query_selector("#legend .legend-strip").evaluate("e => e.style.background")
    # The strip runs through the cells' own colours: purple at the loss end, green at the win.
    assert strip.index("rgba(118, 42, 131") < strip.index("rgba(27, 120, 55"), strip
    assert page.query_selector("#legend .legend-strip").bounding_box()["width"] > 100
    page.evaluate("""() => C4.renderLegend(document.getElementById("legend"), "share",
      "Colour: the policy", ["least", "", "most"])""")
    assert page.get_attribute("#legend", "data-kind") == "share"
    assert "rgba(31, 79, 168" in page.query_selector("#legend .legend-strip").evaluate(
        "e => e.style.background")
    assert page.evaluate("[C4.count(1, 'visit'), C4.count(0, 'visit'), C4.count(12, 'visit')]") \
        == ["1 visit", "0 visits", "12 visits"]
    assert page.evaluate("[C4.pct(1), C4.pct(0.99949), C4.pct(0.123), C4.pct(0)]") == [
        "100%", "99.9%", "12.3%", "0.0%"]
