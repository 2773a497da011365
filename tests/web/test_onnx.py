"""The static web page: the ONNX model gives the Flax network's outputs (onnxruntime),
the command line's errors, and the page played in a real headless Chromium.

The page test needs onnxruntime-web's files: ``onnx_export.ort_dist`` installs
them with npm into ~/.cache/c4jax the first time; without npm (or Chromium) it
is skipped with the reason.
"""

import dataclasses
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c4jax import env, export
from c4jax.alphazero import config as config_lib
from c4jax.alphazero import network
from c4jax.store import checkpoints, exported

onnx_export = pytest.importorskip("c4jax.web.onnx")
ort = pytest.importorskip("onnxruntime")

TIMEOUT_MS = 30_000


def _positions(key, games: int = 32, moves: int = 12) -> np.ndarray:
    """[N, H, W, 2] observations of random games (N <= games * moves, finished ones left out)."""
    state = env.init_batch(games)
    observations = []
    for _ in range(moves):
        key, sub = jax.random.split(key)
        keep = ~np.asarray(state.terminated)
        observations.append(np.asarray(env.observe(state))[keep])
        logits = jnp.where(env.legal_action_mask(state), 0.0, -jnp.inf)
        state = env.step(state, jax.random.categorical(sub, logits))
    return np.concatenate(observations)


def _check_parity(checkpoint: checkpoints.NetworkCheckpoint):
    model = onnx_export.to_onnx(checkpoint.variables, checkpoint.config.network)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    real = _positions(jax.random.key(0))
    noise = (np.random.default_rng(0).random((64, 6, 7, 2)) < 0.3).astype(np.float32)
    obs = np.concatenate([real, noise])
    assert len(real) >= 200 and obs.shape[1:] == (6, 7, 2)
    apply_fn = jax.jit(network.make_apply_fn(network.make_network(checkpoint.config.network)))
    want_logits, want_value = jax.device_get(apply_fn(checkpoint.variables, obs))
    logits, value = session.run([onnx_export.LOGITS, onnx_export.VALUE], {"obs": obs})
    assert logits.shape == (len(obs), 7) and value.shape == (len(obs),)
    np.testing.assert_allclose(logits, want_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(value, want_value, rtol=1e-4, atol=1e-5)
    one_logits, one_value = session.run(None, {"obs": obs[:1]})  # any batch size
    np.testing.assert_allclose(one_logits, want_logits[:1], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(one_value, want_value[:1], rtol=1e-4, atol=1e-5)
    # A network that says something, not all zeros: a wrong flatten order would show.
    assert np.std(want_logits) > 1e-3 and np.std(want_value) > 1e-3


def test_onnx_model_matches_the_pretrained_network():
    _check_parity(exported.load_exported())


@pytest.mark.slow
def test_onnx_model_matches_a_run_network(tiny_run):
    _check_parity(checkpoints.restore_variables(tiny_run))


def _tiny_network(key: int, **fields) -> checkpoints.NetworkCheckpoint:
    """An untrained ``tiny`` network with ``fields`` changed, its heads' last layers
    (which start ~0) scaled up so that the outputs say something."""
    config = config_lib.load("tiny")
    config = dataclasses.replace(config, network=dataclasses.replace(config.network, **fields))
    net = network.make_network(config.network)
    variables = network.init_variables(net, jax.random.key(key))
    params = dict(variables["params"])
    for name in ("Dense_0", "Dense_2"):
        params[name] = jax.tree.map(lambda x: x * 300.0, params[name])
    variables = {"params": params, "batch_stats": variables["batch_stats"]}
    return checkpoints.NetworkCheckpoint(config=config, variables=variables, step=0)


def test_onnx_model_matches_a_network_with_a_wider_value_head():
    _check_parity(_tiny_network(3, value_channels=4))


def test_onnx_model_matches_a_network_with_global_pooling():
    checkpoint = _tiny_network(4, global_pool=3)
    config, variables = checkpoint.config, checkpoint.variables
    # A pooling bias that matters: the block's dense layer scaled up too.
    params = dict(variables["params"])
    block = dict(params["ResidualBlock_0"])
    block["Dense_0"] = jax.tree.map(lambda x: x * 3.0 + 0.1, block["Dense_0"])
    params["ResidualBlock_0"] = block
    variables = {"params": params, "batch_stats": variables["batch_stats"]}
    _check_parity(checkpoints.NetworkCheckpoint(config=config, variables=variables, step=0))
    # The same model without the pooling bias differs: the export does read it.
    plain = dataclasses.replace(config.network, global_pool=0)
    session = ort.InferenceSession(onnx_export.to_onnx(variables, plain).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    pooled = ort.InferenceSession(onnx_export.to_onnx(variables, config.network)
                                  .SerializeToString(), providers=["CPUExecutionProvider"])
    obs = _positions(jax.random.key(1))
    assert np.max(np.abs(session.run(None, {"obs": obs})[0]
                         - pooled.run(None, {"obs": obs})[0])) > 1e-3


def test_onnx_model_matches_a_network_with_threat_planes():
    checkpoint = _tiny_network(5, threat_planes=True)
    variables = checkpoint.variables
    # Threat planes that matter: the stem's weights on them scaled up.
    params = dict(variables["params"])
    stem = dict(params["Conv_0"])
    assert stem["kernel"].shape[2] == 4
    stem["kernel"] = stem["kernel"].at[:, :, 2:].multiply(10.0)
    params["Conv_0"] = stem
    variables = {"params": params, "batch_stats": variables["batch_stats"]}
    _check_parity(dataclasses.replace(checkpoint, variables=variables))
    # Positions from longer games, where threats abound.
    obs = _positions(jax.random.key(2), games=64, moves=30)
    assert np.asarray(env.threat_planes(obs)).any(axis=(1, 2, 3)).mean() > 0.3
    session = ort.InferenceSession(onnx_export.to_onnx(variables, checkpoint.config.network)
                                   .SerializeToString(), providers=["CPUExecutionProvider"])
    net = network.make_network(checkpoint.config.network)
    want = jax.device_get(jax.jit(network.make_apply_fn(net))(variables, obs))
    got = session.run([onnx_export.LOGITS, onnx_export.VALUE], {"obs": obs})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
    # The threats matter here: without the stem's weights on them the outputs differ.
    blind = dict(params, Conv_0={"kernel": stem["kernel"].at[:, :, 2:].set(0.0)})
    blind_logits, _ = jax.device_get(net.apply(
        {"params": blind, "batch_stats": variables["batch_stats"]}, obs, train=False))
    assert np.max(np.abs(blind_logits - want[0])) > 1e-2


def test_without_the_export_extra_the_command_says_what_to_install(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    assert export.main(["web", str(tmp_path / "page")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "pip install 'c4jax[export]'" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "page").exists()


@pytest.mark.slow
def test_bad_arguments_exit_2_with_a_one_line_error(tiny_run, tmp_path, capsys):
    for args in [
        ["--run", f"{tiny_run}:x"],
        ["--run", str(tmp_path / "nothing")],
        ["--ort-dir", str(tmp_path)],
    ]:
        assert export.main(["web", str(tmp_path / "page"), *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error:") and "Traceback" not in err, err
    assert "--ort-dir" in err and "ort.wasm.min.js" in err


_FAKE_NPM = """#!/bin/sh
# A stand-in for npm: "npm install --prefix P --cache C PACKAGE ..." writes the
# package's dist files under P, 1 MiB of download cache under C, and its arguments.
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift ;;
    --cache) cache="$2"; shift ;;
  esac
  shift
done
dist="$prefix/node_modules/onnxruntime-web/dist"
mkdir -p "$dist" "$cache"
for name in ort.wasm.min.js ort-wasm-simd-threaded.mjs ort-wasm-simd-threaded.wasm; do
  head -c 4096 /dev/zero > "$dist/$name"
done
head -c 8192 /dev/zero > "$dist/ort.webgpu.min.js"
head -c 1048576 /dev/zero > "$cache/blob"
echo "$prefix $cache" > "$ARGS_FILE"
"""


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    """A stand-in ``npm`` first on PATH (it writes the args it got to ``npm-args``) and
    an empty cache folder for onnxruntime-web; returns the cache."""
    bin_dir, cache = tmp_path / "bin", tmp_path / "cache" / "onnxruntime-web"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text(_FAKE_NPM)
    (bin_dir / "npm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("ARGS_FILE", str(tmp_path / "npm-args"))
    monkeypatch.setattr(onnx_export, "ORT_CACHE", cache)
    return cache


def test_the_first_install_says_where_the_files_went_and_leaves_no_npm_cache(
    tmp_path, fake_npm
):
    cache = fake_npm
    said = []
    dist = onnx_export.ort_dist(say=said.append)
    assert dist == cache / "dist"
    assert sorted(p.name for p in dist.iterdir()) == sorted(onnx_export.ORT_FILES)
    assert [p.name for p in cache.iterdir()] == ["dist"]  # only the files the page needs
    prefix, npm_cache = (Path(p) for p in (tmp_path / "npm-args").read_text().split())
    assert not prefix.exists() and not npm_cache.exists()  # both removed
    assert len(said) == 2
    assert said[0].startswith(f"Installing onnxruntime-web {onnx_export.ORT_WEB_VERSION} with npm")
    assert str(dist) in said[1] and "0.0 MB" in said[1] and f"delete {cache}" in said[1]
    assert "download cache (1 MB) were private to this install and are removed" in said[1]
    # Found from now on: no second install, nothing said.
    assert onnx_export.ort_dist(say=said.append) == dist and len(said) == 2


def test_a_full_disk_while_keeping_the_files_leaves_nothing_half_done(fake_npm, monkeypatch):
    """The copy into the cache fails (a full disk): a one-line error, no staging
    folder left behind in the cache, and the next export installs again."""
    import errno
    import shutil

    cache = fake_npm
    real_copy = shutil.copyfile

    def full(src, dst, **kwargs):
        if Path(dst).name == onnx_export.ORT_FILES[-1]:
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_copy(src, dst, **kwargs)

    monkeypatch.setattr(onnx_export.shutil, "copyfile", full)
    with pytest.raises(onnx_export.OrtWebUnavailable, match="No space left on device"):
        onnx_export.ort_dist(say=lambda text: None)
    assert list(cache.iterdir()) == []  # as found: a .dist-* folder stayed for good
    monkeypatch.setattr(onnx_export.shutil, "copyfile", real_copy)
    dist = onnx_export.ort_dist(say=lambda text: None)
    assert [p.name for p in cache.iterdir()] == ["dist"] and dist == cache / "dist"


@pytest.mark.slow
def test_export_a_run_writes_the_page_files(tiny_run, ort_dir, tmp_path, capsys):
    out = tmp_path / "page"
    assert export.main(["web", str(out), "--run", f"{tiny_run}", "--ort-dir", str(ort_dir)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}")
    names = {p.name for p in out.iterdir()}
    assert names == {"index.html", "app.js", "board.js", "style.css", onnx_export.MODEL_FILE,
                     *onnx_export.ORT_FILES}
    # The shared board script is copied next to index.html, which loads it before app.js.
    assert (out / "board.js").read_bytes() == onnx_export.COMMON_SCRIPT.read_bytes()
    page = (out / "index.html").read_text()
    assert page.index('<script src="board.js">') < page.index('<script src="app.js">')
    assert f"run {Path(tiny_run).name}" in page and "{{" not in page
    assert "network alone" in page
    restored = checkpoints.restore_variables(tiny_run)
    session = ort.InferenceSession(str(out / onnx_export.MODEL_FILE))
    obs = np.asarray(env.observe(env.init_batch(1)))
    want, _ = network.make_apply_fn(network.make_network(restored.config.network))(
        restored.variables, obs
    )
    np.testing.assert_allclose(session.run(None, {"obs": obs})[0], want, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_play_the_static_page_in_the_browser(browser, page_url, tmp_path, wait_moves,
                                             play_to_the_end):
    page = browser.new_page(viewport={"width": 640, "height": 1000})
    errors, requests = [], []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(page_url + "/")
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)
    assert "the pretrained agent" in page.text_content("#source")
    assert "network alone" in page.text_content("#note")
    assert page.input_value("#sims") == "0"  # the network alone by default

    # A human move in column 4, the network's reply and its numbers.
    page.click('#board .col[data-col="4"]')
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    moves = page.text_content("#moves")
    assert moves[0] == "4"
    heat = page.query_selector_all("#heat .heat-cell")
    assert len(heat) == 7 and all("%" in cell.text_content() for cell in heat)
    chosen = page.query_selector_all(".heat-cell.chosen")
    assert len(chosen) == 1 and chosen[0].get_attribute("data-col") == moves[1]
    assert f"Network (o) played column {moves[1]}" in page.text_content("#value")
    # The logits shown are the Flax network's on the same position, and it played the best.
    shown = [float(cell.get_attribute("title").rsplit("logit ", 1)[1]) for cell in heat]
    pretrained = exported.load_exported()
    apply_fn = network.make_apply_fn(network.make_network(pretrained.config.network))
    want, _ = apply_fn(pretrained.variables, env.observe(env.stack([env.from_moves("4")])))
    np.testing.assert_allclose(shown, np.asarray(want)[0], atol=2e-3)
    assert int(moves[1]) == int(np.argmax(want[0])) + 1
    assert len(page.query_selector_all(".cell.x")) == 1
    assert len(page.query_selector_all(".cell.o")) == 1
    assert len(page.query_selector_all(".cell.last")) == 1

    # Play to the end: the human always takes the leftmost open column.
    play_to_the_end(page, TIMEOUT_MS)

    # The network moves first in a new game.
    page.select_option("#first", "agent")
    wait_moves(page, "m.length === 1", TIMEOUT_MS)
    page.wait_for_selector("text=o (you) to move", timeout=TIMEOUT_MS)
    assert len(page.query_selector_all(".cell.x")) == 1
    page.screenshot(path=str(tmp_path / "network_first.png"), full_page=True)

    # With the page's search: the network's first move after 64 simulations.
    page.select_option("#sims", "64")
    page.click("#new-game")
    wait_moves(page, "m.length === 1", TIMEOUT_MS)
    page.wait_for_selector("text=o (you) to move", timeout=TIMEOUT_MS)
    assert "after 64 simulations" in page.text_content("#value")
    details = [cell.inner_text().split("\n") for cell in page.query_selector_all("#heat .detail")]
    visits = [int(lines[-1]) for lines in details]
    assert sum(visits) == 64 and len(visits) == 7, details
    chosen = page.query_selector(".heat-cell.chosen").get_attribute("data-col")
    assert chosen == page.text_content("#moves") and visits[int(chosen) - 1] == max(visits)
    page.click("#board .col.playable")
    wait_moves(page, "m.length === 3", TIMEOUT_MS)
    page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

    assert not errors, errors
    assert all(url.startswith(page_url) or url.startswith("data:") for url in requests), requests
    assert not page.text_content("#error")
    page.close()


@pytest.mark.slow
def test_the_shared_board_script_guards_the_static_page(browser, page_url, wait_moves):
    """common/board.js (board.js next to index.html) runs in the static page: it draws the
    board and lets no click through before the network is loaded, while it thinks or after
    the game (test_common.py checks the full column)."""
    page = browser.new_page(viewport={"width": 640, "height": 1000})
    errors, requests, held = [], [], []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("request", lambda request: requests.append(request.url))
    page.route(f"**/{onnx_export.MODEL_FILE}", lambda route: held.append(route))
    page.goto(page_url + "/")

    # The network not loaded yet: the empty board, and a click is not a move.
    page.wait_for_function("document.querySelectorAll('#board .cell').length === 42",
                           timeout=TIMEOUT_MS)
    assert page_url + "/board.js" in requests
    assert page.evaluate("typeof C4.renderBoard") == "function"
    assert page.text_content("#status") == "Loading the network..."
    assert not page.query_selector_all("#board .col.playable")
    page.click('#board .col[data-col="4"]')
    assert page.text_content("#moves") == "(none)"
    for _ in range(TIMEOUT_MS // 50):  # the model's request, held
        if held:
            break
        page.wait_for_timeout(50)
    assert page.text_content("#moves") == "(none)" and len(held) == 1
    held.pop().continue_()
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)

    # While the network thinks (its runs held until released), a click is not a move.
    page.evaluate("""() => {
      const run = session.run.bind(session);
      window.heldRuns = [];
      session.run = (feeds) => new Promise((done) => heldRuns.push(() => done(run(feeds))));
    }""")
    page.click('#board .col[data-col="4"]')
    page.wait_for_selector("text=o (network) to move (thinking...)", timeout=TIMEOUT_MS)
    assert not page.query_selector_all("#board .col.playable")
    page.click('#board .col[data-col="3"]')
    assert page.text_content("#moves") == "4"
    page.wait_for_function("heldRuns.length === 1", timeout=TIMEOUT_MS)
    page.evaluate("() => { delete session.run; heldRuns.pop()(); }")
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)

    # After the game, no column takes a stone.
    for _ in range(25):
        if page.query_selector("#status.over"):
            break
        before = len(page.text_content("#moves"))
        page.click("#board .col.playable")
        wait_moves(page, f"m.length >= {before + 2} || "
                   "document.getElementById('status').classList.contains('over')", TIMEOUT_MS)
    assert page.text_content("#status").startswith("Game over")
    final = page.text_content("#moves")
    for c in range(1, 8):
        page.click(f'#board .col[data-col="{c}"]')
    page.wait_for_timeout(300)
    assert page.text_content("#moves") == final
    assert not errors, errors
    assert not page.text_content("#error")
    page.close()


@pytest.mark.slow
def test_the_static_page_recovers_from_failures_and_drops_abandoned_searches(
        browser, page_url, wait_moves):
    """A network call that fails offers to try again (before: the game stalled on the
    network's turn); the failure of a search given up on (new game) is not shown; a
    new game stops the old search (before: it ran on, taking turns with the new one);
    and a failed load keeps its reason after New game."""
    page = browser.new_page(viewport={"width": 640, "height": 1000})
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(page_url + "/")
    page.wait_for_selector("text=x (you) to move", timeout=TIMEOUT_MS)

    # A failed call, then "Try again".
    page.evaluate("() => { session.run = () => Promise.reject(new Error('out of memory')); }")
    page.click('#board .col[data-col="4"]')
    page.wait_for_selector("#retry", timeout=TIMEOUT_MS)
    assert "The network failed: out of memory" in page.text_content("#error")
    page.evaluate("() => { delete session.run; }")
    page.click("#retry")
    wait_moves(page, "m.length === 2", TIMEOUT_MS)
    assert not page.text_content("#error")

    # A search given up on: its failure is not the new game's.
    page.evaluate("""() => {
      window.heldRuns = [];
      session.run = () => new Promise((_, fail) => heldRuns.push(fail));
    }""")
    page.click("#board .col.playable")
    page.wait_for_function("heldRuns.length === 1", timeout=TIMEOUT_MS)
    page.evaluate("() => { delete session.run; }")
    page.click("#new-game")
    page.evaluate("() => heldRuns.pop()(new Error('late failure'))")
    page.wait_for_timeout(300)
    assert not page.text_content("#error")

    # A new game stops the old search: 64 simulations are 65 network calls, each made
    # to take 20 ms here, so that the clicks come while a search runs.
    page.select_option("#sims", "64")
    page.evaluate("""() => {
      const run = session.run.bind(session);
      window.calls = 0;
      session.run = (feeds) => {
        calls += 1;
        return new Promise((done) => setTimeout(() => done(run(feeds)), 20));
      };
    }""")
    page.select_option("#first", "agent")  # a new game: the network searches its move
    page.click("#new-game")
    page.click("#new-game")
    wait_moves(page, "m.length === 1", TIMEOUT_MS)
    page.wait_for_selector("text=o (you) to move", timeout=TIMEOUT_MS)
    calls = page.evaluate("calls")
    assert 65 <= calls < 100, calls  # as found: about three searches' worth (195)
    assert not errors, errors
    page.close()

    # A network that cannot load: New game keeps the reason.
    page = browser.new_page(viewport={"width": 640, "height": 1000})
    page.route(f"**/{onnx_export.MODEL_FILE}", lambda route: route.abort())
    page.goto(page_url + "/")
    page.wait_for_selector("text=Could not load the network.", timeout=TIMEOUT_MS)
    reason = page.text_content("#error")
    assert "serve this directory over HTTP" in reason
    page.click("#new-game")
    assert page.text_content("#error") == reason
    page.close()
