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
