// The static Connect Four page: the c4jax network (model.onnx) run by onnxruntime-web
// in the browser; no server but a static file server. By default the network plays
// alone (the legal column with the highest policy); a small AlphaZero-style PUCT
// search with it is an option. The board, status line and move guards are
// common/board.js's (C4, in board.js next to this file).
"use strict";

const { ROWS, COLS, $ } = C4;
const C_PUCT = 1.25;     // exploration constant of the page's PUCT search
const ABOUT = JSON.parse(document.getElementById("about").textContent);

let session = null;      // the onnxruntime-web InferenceSession of model.onnx
let game = null;         // the game on the board (newGameState())
let analysis = null;     // the network's view before its last move (see agentMove)
let generation = 0;      // bumped by new game and undo: a late network move is dropped
let busy = false;        // a network move is on its way

const markOf = (player) => C4.MARKS[player - 1];
const humanPlayer = () => ($("first").value === "human" ? 1 : 2);
const fmt = C4.fmt;

// --- The game: board[r][c] is 0 (empty), 1 (x) or 2 (o); r = 0 is the bottom row. ---

function newGameState() {
  return { board: Array.from({ length: ROWS }, () => new Array(COLS).fill(0)), moves: "", win: [] };
}
function cloneGame(g) { return { board: g.board.map((row) => row.slice()), moves: g.moves, win: g.win }; }
function toMove(g) { return g.moves.length % 2 === 0 ? 1 : 2; }
function height(g, c) {
  let r = 0;
  while (r < ROWS && g.board[r][c] !== 0) r++;
  return r;
}
function legal(g) {
  const cols = [];
  for (let c = 0; c < COLS; c++) if (height(g, c) < ROWS) cols.push(c);
  return cols;
}
function isOver(g) { return g.win.length > 0 || g.moves.length === ROWS * COLS; }

// The four or more through (r, c) of the stone there, or [].
function fourThrough(g, r, c) {
  const p = g.board[r][c];
  for (const [dr, dc] of [[0, 1], [1, 0], [1, 1], [1, -1]]) {
    const line = [[r, c]];
    for (const s of [1, -1]) {
      let rr = r + s * dr, cc = c + s * dc;
      while (rr >= 0 && rr < ROWS && cc >= 0 && cc < COLS && g.board[rr][cc] === p) {
        line.push([rr, cc]);
        rr += s * dr; cc += s * dc;
      }
    }
    if (line.length >= 4) return line;
  }
  return [];
}

// Drops the mover's stone in column c (0-based); returns "win", "draw" or "".
function drop(g, c) {
  const r = height(g, c);
  g.board[r][c] = toMove(g);
  g.moves += String(c + 1);
  g.win = fourThrough(g, r, c);
  return g.win.length ? "win" : g.moves.length === ROWS * COLS ? "draw" : "";
}

// --- The network. ---

// env.observe's planes, [1, H, W, 2] float32: plane 0 the mover's stones, plane 1 the
// opponent's, row 0 the top.
function observe(g) {
  const me = toMove(g);
  const data = new Float32Array(ROWS * COLS * 2);
  for (let r = 0; r < ROWS; r++) {
    for (let c = 0; c < COLS; c++) {
      const p = g.board[r][c];
      if (p !== 0) data[((ROWS - 1 - r) * COLS + c) * 2 + (p === me ? 0 : 1)] = 1;
    }
  }
  return new ort.Tensor("float32", data, [1, ROWS, COLS, 2]);
}

// The network on a position: logits [7], value (for the mover), the policy over the
// legal columns [7] (0 elsewhere) and the legal columns.
let queue = Promise.resolve();  // one session.run at a time (a new game may overlap a search)
function run(feeds) {
  const result = queue.then(() => session.run(feeds));
  queue = result.catch(() => {});
  return result;
}

async function evaluate(g) {
  const out = await run({ obs: observe(g) });
  const logits = Array.from(out.logits.data);
  const cols = legal(g);
  const top = Math.max(...cols.map((c) => logits[c]));
  const policy = new Array(COLS).fill(0);
  let total = 0;
  for (const c of cols) { policy[c] = Math.exp(logits[c] - top); total += policy[c]; }
  for (const c of cols) policy[c] /= total;
  return { logits, value: out.value.data[0], policy, legal: cols };
}

// --- A small PUCT search (AlphaZero's rule, not c4jax's Gumbel search). ---

async function expand(g) {
  const view = await evaluate(g);
  return { ...view, N: new Array(COLS).fill(0), W: new Array(COLS).fill(0), children: {} };
}

function select(node) {
  const total = node.N.reduce((a, b) => a + b, 0);
  let best = node.legal[0], bestScore = -Infinity;
  for (const a of node.legal) {
    const q = node.N[a] ? node.W[a] / node.N[a] : 0;
    const score = q + C_PUCT * node.policy[a] * Math.sqrt(total + 1) / (1 + node.N[a]);
    if (score > bestScore) { best = a; bestScore = score; }
  }
  return best;
}

// Runs `sims` simulations from g; returns the root (N, W per column: W/N is the value of
// the move for the side to move at g), or null once `wanted()` turns false (a new game
// or an undo: the search stops rather than share the network with the next one).
async function search(g, sims, wanted = () => true) {
  const root = await expand(g);
  for (let s = 0; s < sims; s++) {
    if (!wanted()) return null;
    const state = cloneGame(g);
    const path = [];
    let node = root, value;  // value: for the side to move after the last move of the path
    for (;;) {
      const a = select(node);
      path.push([node, a]);
      const result = drop(state, a);
      if (result === "win") { value = -1; break; }
      if (result === "draw") { value = 0; break; }
      if (!node.children[a]) { node.children[a] = await expand(state); value = node.children[a].value; break; }
      node = node.children[a];
    }
    for (let i = path.length - 1; i >= 0; i--) {
      const [n, a] = path[i];
      value = -value;
      n.N[a] += 1;
      n.W[a] += value;
    }
  }
  return root;
}

// The move and what it was chosen by: network alone (sims = 0) or the search.
async function think(g, sims, wanted = () => true) {
  if (sims === 0) {
    const view = await evaluate(g);
    const col = view.legal.reduce((best, c) => (view.logits[c] > view.logits[best] ? c : best));
    return { ...view, col, sims: 0 };
  }
  const root = await search(g, sims, wanted);
  if (root === null) return null;
  const col = root.legal.reduce((best, c) => (
    root.N[c] > root.N[best] || (root.N[c] === root.N[best] && root.policy[c] > root.policy[best])
      ? c : best));
  const visits = root.N.map((n) => n / sims);
  const q = root.N.map((n, c) => (n ? root.W[c] / n : null));
  return { logits: root.logits, value: q[col], policy: visits, legal: root.legal, col, sims, N: root.N, q };
}

// --- The page. ---

// What common/board.js shows and guards: the game on the board, the turn (ready once
// the network is loaded), and the human's move.
const page = {
  view: () => {
    const lastCol = game.moves.length ? Number(game.moves[game.moves.length - 1]) - 1 : -1;
    const winner = game.win.length ? markOf(game.board[game.win[0][0]][game.win[0][1]])
      : isOver(game) ? "draw" : null;
    return {
      board: game.board.map((row) => row.map((p) => (p ? markOf(p) : null))),
      toMove: markOf(toMove(game)),
      winner,
      legal: legal(game).map((c) => c + 1),
      last: lastCol >= 0 ? [height(game, lastCol) - 1, lastCol] : null,
      win: game.win,
    };
  },
  turn: () => ({
    ready: session !== null, busy, human: (mark) => mark === markOf(humanPlayer()),
  }),
  play: (col) => onColumn(col - 1),
};

const STATUS_WORDS = {  // no `loading`: the text stays "Loading the network..." or its error
  who: (mark, human) => `${mark} (${human ? "you" : "network"})`,
  draw: "Game over: draw",
  wins: (who) => `Game over: ${who} wins`,
  thinking: (mark, who) => `${who} to move (thinking...)`,
  toMove: (who) => `${who} to move`,
};

const PLAYER_WORDS = (mark, colour, human) =>
  `${mark} (${colour}${mark === "x" ? ", moves first" : ""}): ${human ? "you" : "the network"}`;

function renderHeat() {
  const a = analysis;
  const maxP = a ? Math.max(...a.policy, 1e-9) : 1;
  C4.renderHeat($("heat"), (cell, c) => {
    if (!a) return;
    const p = a.policy[c];
    const share = a.legal.includes(c) ? C4.pct(p) : "-";
    const style = C4.heatStyle("share", p / maxP);
    cell.style.background = style.background;
    cell.style.color = style.color;
    if (c === a.col) cell.classList.add("chosen");
    // .detail: the logit, or the visits, alone (a number to read back).
    const detail = a.sims === 0
      ? `<div class="n"><span class="word">logit </span><span class="detail">`
        + `${a.logits[c].toFixed(2)}</span></div>`
      : `<div class="q"><span class="word">value </span>${a.q[c] === null ? "-" : fmt(a.q[c])}`
        + `</div><div class="n"><span class="detail">${a.N[c]}</span>`
        + ` <span class="word">${a.N[c] === 1 ? "visit" : "visits"}</span></div>`;
    cell.innerHTML = `<div class="p">${share}</div>${detail}`;
    cell.title = `column ${c + 1}: `
      + (a.sims ? `${share} of the simulations, value for ${a.mark} `
        + `${a.q[c] === null ? "- (not tried)" : fmt(a.q[c])}, ${C4.count(a.N[c], "visit")}, `
        : `move probability ${share}, `)
      + `logit ${a.logits[c].toFixed(3)}`;
  });
  if (!a) {
    $("heat-key").textContent = "";
    $("legend").textContent = "";
  } else if (a.sims === 0) {
    $("heat-key").textContent = "Above each column: the network's probability of playing there"
      + " (%, from its policy) and the raw logit that probability comes from.";
    C4.renderLegend($("legend"), "share", "Colour: the network's move probability",
      ["least", "", "the network's favourite"]);
  } else {
    $("heat-key").textContent = `Above each column: the share of the ${a.sims} simulations`
      + ` spent on it (%), the value of playing there for ${a.mark} (the network; -1 it`
      + " loses, +1 it wins) and the simulations (visits).";
    C4.renderLegend($("legend"), "share", "Colour: the share of the simulations",
      ["least", "", "the most searched"]);
  }
  $("value").textContent = a
    ? `Network (${a.mark}) played column ${a.col + 1}`
      + (a.sims ? ` after ${a.sims} simulations; its value of the move, for ${a.mark}: `
        : ` (no search); its value of the position, for ${a.mark}: `) + fmt(a.value)
      + " (+1 = it wins, -1 = it loses)."
    : "";
}

function render() {
  C4.renderPlayers($("players"), page, PLAYER_WORDS);
  C4.renderBoard($("board"), page);
  renderHeat();
  C4.renderStatus($("status"), page, STATUS_WORDS);
  C4.showMoves($("moves"), game.moves, "(none)");
  $("undo").disabled = C4.undoTarget(game.moves, page.turn().human) === null;
}

async function agentMove() {
  if (session === null || busy || isOver(game) || toMove(game) === humanPlayer()) return;
  const mine = generation;
  busy = true;
  render();
  try {
    const view = await think(game, Number($("sims").value), () => mine === generation);
    if (mine !== generation) return;
    analysis = { ...view, mark: markOf(toMove(game)) };
    drop(game, view.col);
    $("error").textContent = "";
  } catch (err) {
    if (mine !== generation) return;  // a search given up on: its game is gone
    showFailure(err);
  } finally {
    if (mine === generation) {
      busy = false;
      render();
    }
  }
}

// A failed network call, with a link that asks the network for its move again.
function showFailure(err) {
  const box = $("error");
  box.textContent = `The network failed: ${err.message || err}. `;
  const retry = document.createElement("a");
  retry.href = "#";
  retry.id = "retry";
  retry.textContent = "Try again";
  retry.addEventListener("click", (event) => { event.preventDefault(); agentMove(); });
  box.appendChild(retry);
}

// The human's move in column c (0-based); C4's guard has let it through.
function onColumn(c) {
  drop(game, c);
  render();
  agentMove();
}

function newGame() {
  generation += 1;
  busy = false;
  game = newGameState();
  analysis = null;
  if (session !== null) $("error").textContent = "";  // a failed load keeps its reason
  render();
  agentMove();
}

// Takes back your last move and the network's reply (a late reply is dropped).
function undo() {
  const back = C4.undoTarget(game.moves, page.turn().human);
  if (back === null) return;
  generation += 1;
  busy = false;
  game = newGameState();
  for (const d of back) drop(game, Number(d) - 1);
  analysis = null;
  if (session !== null) $("error").textContent = "";
  render();
  agentMove();
}

async function main() {
  $("new-game").addEventListener("click", newGame);
  $("undo").addEventListener("click", undo);
  $("first").addEventListener("change", newGame);
  newGame();
  try {
    ort.env.wasm.numThreads = 1;  // no SharedArrayBuffer (cross-origin isolation) needed
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
