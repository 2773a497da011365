"""What the browser tests of both pages share: onnxruntime-web's files, the exported
static page served on a free local port, and waiting for the move list."""

import functools
import http.server
import threading

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
