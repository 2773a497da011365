"""The policy-value network as an ONNX model, and a static web page that plays it.

Shape glossary: B batch, H = 6 rows, W = 7 columns, C channels, A = 7 actions.

``to_onnx`` writes the inference-mode network (``network.make_apply_fn``) as an
ONNX graph built with the ``onnx`` package straight from the variables: each
BatchNorm (running statistics) is folded into the convolution before it, the
rest is Conv, Relu, Add, Transpose, Reshape, Gemm and Tanh (and, for threat
planes, MatMul, Equal, And, Greater, Cast and Concat). The model takes
``obs`` [B, H, W, 2] float32 (``env.observe`` planes, any B) and returns
``logits`` [B, A] and ``value`` [B]. (``jax2onnx`` was not used: its releases
pin an older ``orbax-checkpoint`` than c4jax's.) ``onnxruntime`` reproduces the
Flax outputs to float32 rounding (tested).

``write_web_page`` writes a directory that plays the network in a browser
with ``onnxruntime-web`` and no Python: ``index.html``, ``app.js``,
``board.js``, ``style.css``, ``model.onnx`` and onnxruntime-web's files, copied
from its npm package (``ort_dist`` finds or installs it: the first time, npm
installs the package into a temporary folder with a private download cache,
the three files the page needs are kept in ``ORT_CACHE/dist`` and the rest is
removed, and a line says where they are and how big). By default the page
plays the network alone: the legal column with the highest policy logit, no
search; a menu adds a small PUCT search written in the page's JavaScript.

The page's files: ``web/standalone/`` is this page (``index.html``, a template
filled in here, and ``app.js``); ``web/common/board.js`` is the board, status
line and move guards it shares with ``web/served/`` (the page ``python -m
c4jax.serve`` serves, see ``c4jax.web.app``), copied next to ``index.html`` so
that the directory is self-contained; ``style.css`` is ``web/served/``'s.

Needs the ``export`` extra (``pip install 'c4jax[export]'``) for ``onnx``.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import jax
import numpy as np

from c4jax import env
from c4jax.alphazero import network
from c4jax.alphazero.config import NetworkConfig
from c4jax.store import checkpoints

OPSET = 17  # opset and IR version that onnxruntime-web and onnxruntime both read
IR_VERSION = 8
INPUT, LOGITS, VALUE = "obs", "logits", "value"
ORT_WEB_VERSION = "1.30.0"  # the onnxruntime-web release the page is made and tested with
# What the page loads from onnxruntime-web's dist/: the script (global ``ort``,
# WebAssembly backend only), the module that starts the wasm, the wasm itself.
ORT_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
ORT_CACHE = Path.home() / ".cache" / "c4jax" / f"onnxruntime-web-{ORT_WEB_VERSION}"
PAGE_DIR = Path(__file__).resolve().parent / "standalone"  # index.html and app.js
COMMON_SCRIPT = Path(__file__).resolve().parent / "common" / "board.js"  # both pages load it
STYLE = Path(__file__).resolve().parent / "served" / "style.css"  # the served app's
MODEL_FILE = "model.onnx"


class OrtWebUnavailable(RuntimeError):
    """onnxruntime-web's files could not be found or installed."""


def _fold(conv_kernel: np.ndarray, bn_params: dict, bn_stats: dict):
    """A bias-free conv followed by inference BatchNorm, as one conv with a bias.

    Args:
        conv_kernel: [kh, kw, C_in, C_out] Flax kernel.
        bn_params: ``{'scale', 'bias'}`` [C_out] each.
        bn_stats: ``{'mean', 'var'}`` [C_out] each.

    Returns:
        ``(weight, bias)``: [C_out, C_in, kh, kw] and [C_out] float32 (ONNX layout).
    """
    f64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    kernel, bias = network.fold_conv_bn(
        f64(conv_kernel), f64(bn_params["scale"]), f64(bn_params["bias"]),
        f64(bn_stats["mean"]), f64(bn_stats["var"]),
    )
    weight = np.transpose(kernel, (3, 2, 0, 1))
    return weight.astype(np.float32), bias.astype(np.float32)


class _Graph:
    """A growing list of ONNX nodes and initializers with fresh names."""

    def __init__(self):
        self.nodes, self.initializers, self._count = [], [], 0

    def name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    def const(self, prefix: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], output: str | None = None, **attrs) -> str:
        from onnx import helper

        output = output or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [output], **attrs))
        return output

    def conv_bn(self, x: str, params: dict, stats: dict, index: int, relu: bool) -> str:
        """``Conv_{index}`` + ``BatchNorm_{index}`` of a Flax scope on NCHW ``x``."""
        weight, bias = _fold(
            params[f"Conv_{index}"]["kernel"], params[f"BatchNorm_{index}"],
            stats[f"BatchNorm_{index}"],
        )
        kh, kw = weight.shape[2:]
        # Flax's "SAME": total padding k - 1, the smaller half before.
        pads = [(kh - 1) // 2, (kw - 1) // 2, kh - 1 - (kh - 1) // 2, kw - 1 - (kw - 1) // 2]
        y = self.op(
            "Conv", [x, self.const("W", weight), self.const("B", bias)],
            kernel_shape=[kh, kw], pads=pads,
        )
        return self.op("Relu", [y]) if relu else y

    def dense(self, x: str, params: dict) -> str:
        kernel = np.asarray(params["kernel"], np.float32)
        bias = np.asarray(params["bias"], np.float32)
        return self.op("Gemm", [x, self.const("W", kernel), self.const("B", bias)])

    def pool_bias(self, y: str, params: dict, channels: int) -> str:
        """A block's global pooling bias on NCHW ``y``: [B, C, 1, 1], the dense layer
        of the mean and the maximum over the board of its first ``channels``."""
        g = self.op("Slice", [y, self.const("starts", np.array([0], np.int64)),
                              self.const("ends", np.array([channels], np.int64)),
                              self.const("axes", np.array([1], np.int64))])
        pooled = self.op("Concat", [self.op("GlobalAveragePool", [g]),
                                    self.op("GlobalMaxPool", [g])], axis=1)  # [B, 2G, 1, 1]
        bias = self.dense(self.op("Flatten", [pooled]), params)  # [B, C]
        return self.op("Reshape", [bias, self.const("shape", np.array([0, -1, 1, 1], np.int64))])

    def with_threats(self, obs: str) -> str:
        """``network.with_threats`` on NHWC ``obs`` [B, H, W, 2]: [B, H, W, 4], the
        stones and ``env.threat_planes`` (MatMul, Equal, And, Greater, Cast)."""
        from onnx import TensorProto

        cells = env.NUM_CELLS
        lines = env.LINE_PLANES.reshape(env.NUM_LINES, cells).astype(np.float32)  # [L, HW]
        flat = self.op("Reshape", [obs, self.const("shape", np.array([0, 2 * cells], np.int64))])

        def counts(channel: int) -> str:  # [B, L] stones of one side in each line
            pick = np.zeros((cells, 2, env.NUM_LINES), np.float32)
            pick[:, channel, :] = lines.T
            return self.op("MatMul", [flat, self.const("M", pick.reshape(2 * cells, -1))])

        def equals(x: str, value: float) -> str:
            return self.op("Equal", [x, self.const("k", np.array(value, np.float32))])

        mover, opponent = counts(0), counts(1)
        stones = self.op("MatMul", [flat, self.const("S", np.repeat(
            np.eye(cells, dtype=np.float32), 2, axis=0))])  # [B, HW]
        empty = equals(stones, 0.0)
        planes = []
        for side in (mover, opponent):
            three = self.op("Cast", [equals(side, 3.0)], to=TensorProto.FLOAT)  # [B, L]
            covered = self.op("MatMul", [three, self.const("L", lines)])  # [B, HW]
            threat = self.op("And", [self.op("Greater", [covered, self.const(
                "k", np.array(0.0, np.float32))]), empty])
            planes.append(self.op("Reshape", [
                self.op("Cast", [threat], to=TensorProto.FLOAT),
                self.const("shape", np.array([0, env.NUM_ROWS, env.NUM_COLS, 1], np.int64))]))
        return self.op("Concat", [obs, *planes], axis=-1)

    def flatten_nhwc(self, x: str) -> str:
        """NCHW [B, C, H, W] -> [B, H * W * C] in Flax's (NHWC) order."""
        y = self.op("Transpose", [x], perm=[0, 2, 3, 1])
        return self.op("Reshape", [y, self.const("shape", np.array([0, -1], np.int64))])


def to_onnx(variables: dict, config: NetworkConfig):
    """The inference-mode network as an ``onnx.ModelProto``.

    Args:
        variables: ``{'params', 'batch_stats'}`` of ``network.make_network(config)``.
        config: its shape (``num_blocks``, ``global_pool``, ``threat_planes``); a
            bfloat16 network is exported in float32.

    Returns:
        A model with input ``obs`` [B, H, W, 2] float32 (B free) and outputs
        ``logits`` [B, A] float32 (unmasked) and ``value`` [B] float32 in [-1, 1].
    """
    import onnx
    from onnx import TensorProto, helper

    variables = jax.tree.map(np.asarray, jax.device_get(variables))
    params, stats = variables["params"], variables["batch_stats"]
    g = _Graph()
    x = g.with_threats(INPUT) if config.threat_planes else INPUT
    x = g.op("Transpose", [x], perm=[0, 3, 1, 2])  # NHWC -> NCHW
    x = g.conv_bn(x, params, stats, 0, relu=True)
    for block in range(config.num_blocks):
        scope = f"ResidualBlock_{block}"
        y = g.conv_bn(x, params[scope], stats[scope], 0, relu=True)
        if config.global_pool:
            y = g.op("Add", [y, g.pool_bias(y, params[scope]["Dense_0"], config.global_pool)])
        y = g.conv_bn(y, params[scope], stats[scope], 1, relu=False)
        x = g.op("Relu", [g.op("Add", [x, y])])

    p = g.flatten_nhwc(g.conv_bn(x, params, stats, 1, relu=True))
    g.op("Identity", [g.dense(p, params["Dense_0"])], LOGITS)

    v = g.flatten_nhwc(g.conv_bn(x, params, stats, 2, relu=True))
    v = g.op("Relu", [g.dense(v, params["Dense_1"])])
    v = g.dense(v, params["Dense_2"])  # [B, 1]
    v = g.op("Reshape", [v, g.const("shape", np.array([-1], np.int64))])
    g.op("Tanh", [v], VALUE)

    graph = helper.make_graph(
        g.nodes,
        "c4jax_policy_value",
        [helper.make_tensor_value_info(
            INPUT, TensorProto.FLOAT, ["batch", env.NUM_ROWS, env.NUM_COLS, 2]
        )],
        [
            helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, ["batch", env.NUM_ACTIONS]),
            helper.make_tensor_value_info(VALUE, TensorProto.FLOAT, ["batch"]),
        ],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="c4jax",
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model)
    return model


def _say(line: str) -> None:
    print(line, flush=True)


def _megabytes(path: Path) -> float:
    """The size of the files under ``path``, in MiB."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def ort_dist(ort_dir: str | Path | None = None, *, say: Callable[[str], None] = _say) -> Path:
    """The ``dist/`` directory of onnxruntime-web that holds ``ORT_FILES``.

    Args:
        ort_dir: a ``dist/`` directory, a ``node_modules`` directory or an npm
            prefix holding one. Default: ``ORT_CACHE``, where ``ORT_FILES`` of
            onnxruntime-web ``ORT_WEB_VERSION`` are kept after an npm install
            the first time (into a temporary folder, with a private npm cache;
            both are removed afterwards, so only ``ORT_FILES`` stay on disk).
        say: called with a line before the install and one after it, saying
            where the files went and how big they are (default: print).

    Raises:
        OrtWebUnavailable: the files are not there (a given ``ort_dir``), npm is
            missing, or the install failed.
    """
    def find(root: Path) -> Path | None:
        for candidate in (
            root, root / "dist", root / "onnxruntime-web" / "dist",
            root / "node_modules" / "onnxruntime-web" / "dist",
        ):
            if all((candidate / name).is_file() for name in ORT_FILES):
                return candidate
        return None

    if ort_dir is not None:
        found = find(Path(ort_dir))
        if found is None:
            raise OrtWebUnavailable(
                f"--ort-dir {ort_dir}: no onnxruntime-web dist files there "
                f"(need {', '.join(ORT_FILES)})"
            )
        return found
    found = find(ORT_CACHE)
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise OrtWebUnavailable(
            "npm not found: install Node.js and npm, or give --ort-dir with onnxruntime-web's "
            f"dist files ({', '.join(ORT_FILES)})"
        )
    return _install_ort(npm, find, say)


def _install_ort(
    npm: str, find: Callable[[Path], Path | None], say: Callable[[str], None]
) -> Path:
    """npm-installs onnxruntime-web into a temporary folder with a private npm cache,
    keeps ``ORT_FILES`` in ``ORT_CACHE/dist`` and removes the rest."""
    dist = ORT_CACHE / "dist"
    say(
        f"Installing onnxruntime-web {ORT_WEB_VERSION} with npm (once; it keeps the"
        f" {len(ORT_FILES)} files the page needs in {dist})..."
    )
    ORT_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="c4jax-npm-") as tmp:
        prefix, npm_cache = Path(tmp) / "prefix", Path(tmp) / "npm-cache"
        command = [
            npm, "install", "--prefix", str(prefix), "--cache", str(npm_cache),
            f"onnxruntime-web@{ORT_WEB_VERSION}", "--no-audit", "--no-fund", "--ignore-scripts",
        ]
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as err:
            raise OrtWebUnavailable(f"{' '.join(command)}: {err}") from None
        found = find(prefix)
        if out.returncode != 0 or found is None:
            tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
            raise OrtWebUnavailable(f"{' '.join(command)} failed: {tail}")
        staged = Path(tempfile.mkdtemp(prefix=".dist-", dir=ORT_CACHE))  # then one rename
        try:
            for name in ORT_FILES:
                shutil.copyfile(found / name, staged / name)
            if dist.exists():
                shutil.rmtree(dist)
            try:
                os.replace(staged, dist)
            except OSError:  # another export installed it meanwhile: theirs will do
                if not all((dist / name).is_file() for name in ORT_FILES):
                    raise
        except OSError as err:
            raise OrtWebUnavailable(f"cannot keep onnxruntime-web's files in {dist}: "
                                    f"{err.strerror or err}") from None
        finally:
            shutil.rmtree(staged, ignore_errors=True)  # what a failed copy left
        downloaded = _megabytes(npm_cache)
        installed = _megabytes(prefix)
    say(
        f"onnxruntime-web {ORT_WEB_VERSION}: kept {', '.join(ORT_FILES)} in {dist}"
        f" ({_megabytes(dist):.1f} MB; delete {ORT_CACHE} to free it, the next web export"
        f" installs it again). npm's package ({installed:.0f} MB) and its download cache"
        f" ({downloaded:.0f} MB) were private to this install and are removed."
    )
    return dist


def write_web_page(
    checkpoint: checkpoints.NetworkCheckpoint, out_dir: str | Path, ort_dir: Path, source: str
) -> Path:
    """Writes the static page that plays ``checkpoint``'s network (alone, or with a JS search).

    Args:
        checkpoint: the network (variables and configuration).
        out_dir: directory to write (created if needed; files of the same names replaced).
        ort_dir: onnxruntime-web's ``dist/`` (``ort_dist``).
        source: what the network is, shown on the page.

    Returns:
        ``out_dir``.
    """
    import onnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = to_onnx(checkpoint.variables, checkpoint.config.network)
    onnx.save(model, str(out_dir / MODEL_FILE))
    for name in ORT_FILES:
        shutil.copyfile(ort_dir / name, out_dir / name)
    shutil.copyfile(PAGE_DIR / "app.js", out_dir / "app.js")
    shutil.copyfile(COMMON_SCRIPT, out_dir / COMMON_SCRIPT.name)
    shutil.copyfile(STYLE, out_dir / "style.css")
    about = json.dumps({"source": source, "step": checkpoint.step, "model": MODEL_FILE})
    page = (PAGE_DIR / "index.html").read_text()
    page = page.replace("{{SOURCE}}", html.escape(f"{source}, step {checkpoint.step}"))
    page = page.replace("{{ABOUT}}", about.replace("<", "\\u003c"))
    tmp = out_dir / "index.html.tmp"
    tmp.write_text(page)
    os.replace(tmp, out_dir / "index.html")
    return out_dir
