// The static Connect Four page: the c4jax network (model.onnx) alone, run by
// onnxruntime-web in the browser. No server but a static file server.
"use strict";

const ROWS = 6, COLS = 7;
const ABOUT = JSON.parse(document.getElementById("about").textContent);

let session = null;      // the onnxruntime-web InferenceSession of model.onnx
let board = [];          // board[r][c]: 0 empty, 1 x, 2 o; r = 0 is the bottom row
let moves = "";          // the game so far, digits 1-7
let winLine = [];        // [[r, c] x 4] of a finished game's four, else []
let analysis = null;     // the network's view before its last move: {policy, logits, value, col, mark}
let generation = 0;      // bumped by new game: a late network move is dropped
let busy = false;        // a network move is on its way

const $ = (id) => document.getElementById(id);
const markOf = (player) => (player === 1 ? "x" : "o");
const toMove = () => (moves.length % 2 === 0 ? 1 : 2);
const humanPlayer = () => ($("first").value === "human" ? 1 : 2);
const fmt = (x) => (x >= 0 ? "+" : "") + x.toFixed(2);

function height(c) {
  let r = 0;
  while (r < ROWS && board[r][c] !== 0) r++;
  return r;
}
function legal() {
  const cols = [];
  for (let c = 0; c < COLS; c++) if (height(c) < ROWS) cols.push(c);
  return cols;
}
function over() { return winLine.length > 0 || moves.length === ROWS * COLS; }

// The four through (r, c) of the stone there, or [].
function fourThrough(r, c) {
  const p = board[r][c];
  for (const [dr, dc] of [[0, 1], [1, 0], [1, 1], [1, -1]]) {
    const line = [[r, c]];
    for (const s of [1, -1]) {
      let rr = r + s * dr, cc = c + s * dc;
      while (rr >= 0 && rr < ROWS && cc >= 0 && cc < COLS && board[rr][cc] === p) {
        line.push([rr, cc]);
        rr += s * dr; cc += s * dc;
      }
    }
    if (line.length >= 4) return line;
  }
  return [];
}

function drop(c) {
  const r = height(c);
  board[r][c] = toMove();
  moves += String(c + 1);
  winLine = fourThrough(r, c);
}

// env.observe's planes, [1, H, W, 2] float32: plane 0 the mover's stones, plane 1 the
// opponent's, row 0 the top.
function observe() {
  const me = toMove();
  const data = new Float32Array(ROWS * COLS * 2);
  for (let r = 0; r < ROWS; r++) {
    for (let c = 0; c < COLS; c++) {
      const p = board[r][c];
      if (p === 0) continue;
      data[((ROWS - 1 - r) * COLS + c) * 2 + (p === me ? 0 : 1)] = 1;
    }
  }
  return new ort.Tensor("float32", data, [1, ROWS, COLS, 2]);
}

// The network on the position: logits [7], value, and the policy over the legal columns.
async function evaluate() {
  const out = await session.run({ obs: observe() });
  const logits = Array.from(out.logits.data);
  const value = out.value.data[0];
  const cols = legal();
  const top = Math.max(...cols.map((c) => logits[c]));
  const policy = new Array(COLS).fill(0);
  let total = 0;
  for (const c of cols) { policy[c] = Math.exp(logits[c] - top); total += policy[c]; }
  for (const c of cols) policy[c] /= total;
  const col = cols.reduce((best, c) => (logits[c] > logits[best] ? c : best), cols[0]);
  return { logits, value, policy, col, legal: cols };
}

function playable(c) {
  return session !== null && !busy && !over() && toMove() === humanPlayer() && height(c) < ROWS;
}

function renderBoard() {
  const el = $("board");
  el.textContent = "";
  const wins = new Set(winLine.map(([r, c]) => `${r},${c}`));
  const lastCol = moves.length ? Number(moves[moves.length - 1]) - 1 : -1;
  const lastRow = lastCol >= 0 ? height(lastCol) - 1 : -1;
  for (let c = 0; c < COLS; c++) {
    const col = document.createElement("div");
    col.className = "col" + (playable(c) ? " playable" : "");
    col.dataset.col = String(c + 1);
    col.title = `column ${c + 1}`;
    col.addEventListener("click", () => onColumn(c));
    for (let r = 0; r < ROWS; r++) {
      const cell = document.createElement("div");
      const who = board[r][c];
      cell.className = "cell" + (who === 1 ? " x" : who === 2 ? " o" : "");
      if (r === lastRow && c === lastCol) cell.classList.add("last");
      if (wins.has(`${r},${c}`)) cell.classList.add("win");
      cell.dataset.row = String(r);
      col.appendChild(cell);
    }
    el.appendChild(col);
  }
}

function renderHeat() {
  const el = $("heat");
  el.textContent = "";
  for (let c = 0; c < COLS; c++) {
    const cell = document.createElement("div");
    cell.className = "heat-cell";
    cell.dataset.col = String(c + 1);
    if (analysis) {
      const p = analysis.policy[c];
      const isLegal = analysis.legal.includes(c);
      cell.style.background = `rgba(211, 51, 51, ${(0.08 + 0.8 * p).toFixed(3)})`;
      if (c === analysis.col) cell.classList.add("chosen");
      cell.innerHTML = `<div class="p">${isLegal ? (100 * p).toFixed(1) + "%" : "-"}</div>`
        + `<div class="logit">${analysis.logits[c].toFixed(2)}</div>`;
      cell.title = `column ${c + 1}: policy ${(100 * p).toFixed(1)}%, logit ${analysis.logits[c].toFixed(3)}`;
    }
    el.appendChild(cell);
  }
  $("value").textContent = analysis
    ? `Network (${analysis.mark}) played column ${analysis.col + 1}; its value of the position: `
      + `${fmt(analysis.value)}`
    : "";
}

function renderStatus() {
  const status = $("status");
  const who = (p) => `${markOf(p)} (${p === humanPlayer() ? "you" : "network"})`;
  status.classList.toggle("over", over());
  if (session === null) return;
  if (winLine.length) {
    const winner = board[winLine[0][0]][winLine[0][1]];
    status.textContent = `Game over: ${who(winner)} wins`;
  } else if (over()) {
    status.textContent = "Game over: draw";
  } else {
    status.textContent = `${who(toMove())} to move` + (busy ? " (thinking...)" : "");
  }
}

function render() {
  renderBoard();
  renderHeat();
  renderStatus();
  $("moves").textContent = moves || "(none)";
}

async function agentMove() {
  if (session === null || busy || over() || toMove() === humanPlayer()) return;
  const mine = generation;
  busy = true;
  render();
  try {
    const view = await evaluate();
    if (mine !== generation) return;
    analysis = { ...view, mark: markOf(toMove()) };
    drop(view.col);
  } catch (err) {
    $("error").textContent = `The network failed: ${err.message || err}`;
  } finally {
    if (mine === generation) busy = false;
    render();
  }
}

function onColumn(c) {
  if (!playable(c)) return;
  drop(c);
  render();
  agentMove();
}

function newGame() {
  generation += 1;
  busy = false;
  board = Array.from({ length: ROWS }, () => new Array(COLS).fill(0));
  moves = "";
  winLine = [];
  analysis = null;
  $("error").textContent = "";
  render();
  agentMove();
}

async function main() {
  $("new-game").addEventListener("click", newGame);
  $("first").addEventListener("change", newGame);
  newGame();
  try {
    ort.env.wasm.numThreads = 1;  // no SharedArrayBuffer needed
    ort.env.wasm.wasmPaths = new URL("./", location.href).href;
    session = await ort.InferenceSession.create(ABOUT.model, { executionProviders: ["wasm"] });
  } catch (err) {
    $("status").textContent = "Could not load the network.";
    $("error").textContent = `${err.message || err}. Browsers do not run WebAssembly models from `
      + "file:// pages: serve this directory over HTTP (any static file server).";
    return;
  }
  render();
  agentMove();
}

main();
