// The served Connect Four page: its moves come from the stateless JSON API of
// c4jax/web/app.py. The board, status line and move guards are common/board.js's (C4).
"use strict";

const SIMS_CHOICES = [0, 4, 16, 64, 200, 800, 2000];
const AGENT_DELAY_MS = 150; // a pause between agent moves, so agent-vs-agent games can be followed

let moves = "";          // the game so far, digits 1-7
let position = null;     // the server's JSON of the position after `moves`
let analysis = null;     // the agent's view before its last move (+ `mark`, the side it played)
let generation = 0;      // bumped by new game / undo / settings: late agent replies are dropped
let busy = false;        // an agent move is on its way

const { $, fmt } = C4;

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) {
    const error = new Error(data.error || `HTTP ${response.status}`);
    // A busy server (503) says when to ask again: the page does, on its own.
    const after = Number(response.headers.get("Retry-After"));
    if (response.status === 503) error.retryAfter = Number.isFinite(after) ? after : 2;
    throw error;
  }
  return data;
}

function controller(mark) { return $("player-" + mark).value; }
function showError(text) { $("error").textContent = text || ""; }

// What common/board.js shows and guards: the server's position (board cells 0 x, 1 o,
// -1 empty), the turn, and the human's move.
const game = {
  view: () => position && {
    board: position.board.map((row) => row.map((who) => C4.MARKS[who] || null)),
    toMove: position.to_move,
    winner: position.winner,
    legal: position.legal,
    last: position.last_move,
    win: position.winning_line,
  },
  turn: () => ({ ready: true, busy, human: (mark) => controller(mark) === "human" }),
  play: (col) => onColumn(col),
};

const STATUS_WORDS = {
  loading: "Loading...",
  who: (mark, human) => `${mark} (${human ? "human" : "agent"})`,
  draw: "Game over: a draw.",
  wins: (who) => `Game over: ${who} wins.`,
  thinking: (mark) => `Agent (${mark}) is thinking...`,
  toMove: (who, human) => `${who} to move${human ? ": click a column." : "."}`,
};

const PLAYER_WORDS = (mark, colour, human) =>
  `${mark} (${colour}${mark === "x" ? ", moves first" : ""}): ${human ? "human" : "agent"}`;

function renderHeat() {
  const byValue = $("heat-by").value === "q";
  const maxP = analysis ? Math.max(...analysis.policy, 1e-9) : 1;
  const mark = analysis ? analysis.mark : "";
  C4.renderHeat($("heat"), (cell, c) => {
    if (!analysis) {
      cell.innerHTML = `<div class="p">-</div>`;
      return;
    }
    const p = analysis.policy[c];
    const q = analysis.q[c];
    const n = analysis.visits[c];
    const style = byValue ? C4.heatStyle("value", q) : C4.heatStyle("share", p / maxP);
    cell.style.background = style.background;
    cell.style.color = style.color;
    if (analysis.chosen === c) cell.classList.add("chosen");
    const open = p > 0 || n > 0;
    cell.innerHTML = `<div class="p">${open ? C4.pct(p) : "-"}</div>`
      + `<div class="q"><span class="word">value </span>${fmt(q)}</div>`
      + `<div class="n">${n} <span class="word">${n === 1 ? "visit" : "visits"}</span></div>`;
    cell.title = `column ${c + 1}: the search's policy ${C4.pct(p)}; `
      + (q === null ? "not searched" : `value of this move for ${mark} (the agent): ${fmt(q)}`
        + " (-1 it loses, +1 it wins)")
      + `; ${C4.count(n, "visit")}`;
  });
  $("heat-key").textContent = analysis
    ? `Above each column: the search's policy (%), the value of playing there for ${mark}`
      + ` (the agent; -1 it loses, +1 it wins) and the simulations spent on it (visits).`
    : "";
  if (!analysis) {
    $("legend").textContent = "";
  } else if (byValue) {
    C4.renderLegend($("legend"), "value", `Colour: the value of each move for ${mark} (the agent)`,
      [`-1: ${mark} loses`, "0: a draw", `+1: ${mark} wins`]);
  } else {
    C4.renderLegend($("legend"), "share", "Colour: the search's policy",
      ["least", "", "the agent's favourite"]);
  }
  $("value").textContent = analysis
    ? `Agent (${mark}) played column ${analysis.chosen + 1} (${analysis.rule || "its choice"});`
      + ` its value of the position, for ${mark}: ${fmt(analysis.value)}`
      + ` (+1 = it wins, -1 = it loses).`
    : "The agent's view of each column shows above the board after its move.";
}

function render() {
  C4.renderPlayers($("players"), game, PLAYER_WORDS);
  C4.renderBoard($("board"), game);
  renderHeat();
  C4.renderStatus($("status"), game, STATUS_WORDS);
  C4.showMoves($("moves"), moves, "(empty board)");
  $("undo").disabled = C4.undoTarget(moves, game.turn().human) === null;
}

async function setPosition(newMoves) {
  const gen = ++generation;
  busy = false;
  try {
    const data = await api("/api/state", { moves: newMoves });
    if (gen !== generation) return;
    position = data;
    moves = data.moves;
    showError("");
  } catch (err) {
    showError(err.message);
  }
  render();
  maybeAgent();
}

// Calls maybeAgent after `ms`, unless a new game, undo or setting came in between.
function agentAfter(ms) {
  const gen = generation;
  setTimeout(() => { if (gen === generation) maybeAgent(); }, ms);
}

async function maybeAgent() {
  if (!position || position.winner || busy || controller(position.to_move) !== "agent") return;
  const gen = generation;
  const sent = moves;
  busy = true;
  render();
  const mark = position.to_move;
  let retry = null;  // seconds before asking again (the server was busy)
  try {
    const data = await api("/api/move", { moves, sims: Number($("sims").value) });
    if (gen !== generation || moves !== sent) return;
    position = data;
    moves = data.moves;
    analysis = { ...data.analysis, mark };
    showError("");
  } catch (err) {
    if (gen !== generation) return;
    retry = err.retryAfter ?? null;
    showError(retry === null ? err.message : `${err.message} (asking again in ${retry} s)`);
  } finally {
    if (gen === generation) {
      busy = false;
      render();
    }
  }
  if (gen !== generation) return;
  if (retry !== null) agentAfter(1000 * retry);
  else if (!$("error").textContent) agentAfter(AGENT_DELAY_MS);
}

// The human's move in column col (1-7); C4's guard has let it through. A reply to a
// position that is no longer shown (a second click before the first one's answer,
// a new game) is dropped.
async function onColumn(col) {
  const gen = generation;
  const sent = moves;
  try {
    const data = await api("/api/state", { moves, column: col });
    if (gen !== generation || moves !== sent) return;
    position = data;
    moves = data.moves;
    showError("");
  } catch (err) {
    if (gen !== generation) return;
    showError(err.message);
  }
  render();
  maybeAgent();
}

function newGame() {
  analysis = null;
  setPosition("");
}

// Takes back the last move a person played and the agent's reply (one move when no
// person plays), as C4.undoTarget says.
function undo() {
  const back = C4.undoTarget(moves, game.turn().human);
  if (back === null) return;
  analysis = null;
  setPosition(back);
}

async function init() {
  $("new-game").addEventListener("click", newGame);
  $("undo").addEventListener("click", undo);
  $("heat-by").addEventListener("change", renderHeat);
  for (const id of ["player-x", "player-o", "sims"]) {
    $(id).addEventListener("change", () => {
      generation++;
      busy = false;
      showError("");
      render();
      maybeAgent();
    });
  }
  try {
    const info = await api("/api/info");
    const choices = [...new Set([...SIMS_CHOICES, info.default_sims])]
      .filter((n) => n <= info.max_sims).sort((a, b) => a - b);
    for (const n of choices) {
      const option = document.createElement("option");
      option.value = String(n);
      option.textContent = n === 0 ? "0 (network alone)" : String(n);
      option.selected = n === info.default_sims;
      $("sims").appendChild(option);
    }
    const source = info.source || info.agents[0];
    $("source").textContent = `Agent: ${source}` + (/simulations/.test(source) ? "."
      : ` (${info.default_sims} simulations per move by default).`);
  } catch (err) {
    showError(err.message);
  }
  await setPosition("");
}

init();
