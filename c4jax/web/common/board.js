// The Connect Four board, status line and move guards that both pages share: the served
// page (c4jax/web/served, moves from the server's /api) and the standalone page
// (c4jax/web/standalone, moves from the network run in the browser). A plain script,
// loaded before the page's own app.js, that defines one global: C4.
//
// Each page hands the shared code a `game` object with three functions:
//   game.view() -> the position it shows (null while there is none yet):
//   { board:  [6][7] of "x" | "o" | null, row 0 the bottom row,
//     toMove: "x" | "o",
//     winner: "x" | "o" | "draw" | null,
//     legal:  the columns open, 1-7,
//     last:   [row, col] of the last stone (0-based) or null,
//     win:    [[row, col]...] of the four (or more) in a row, or [] }
//   game.turn() -> { ready, busy, human(mark) }: ready once the page can move at all,
//     busy while an agent move is on its way, human(mark) true where a person plays `mark`.
//   game.play(col) -> the person's move in column col (1-7), once the guard let it through.
// The shared code asks view() and turn() afresh at every render and every click.
//
// Also shared: the line saying which colour is which side and who plays it
// (renderPlayers), the colours of the heat map above the board and their legend
// (heatStyle, renderLegend), words for counts (count), and what Undo takes back
// (undoTarget).
"use strict";

const C4 = (() => {
  const ROWS = 6, COLS = 7;
  const MARKS = ["x", "o"];  // x moves first
  const COLOURS = { x: "red", o: "yellow" };  // style.css's --x and --o, in words

  const $ = (id) => document.getElementById(id);

  // A value with its sign and two decimals; "-" where there is none.
  function fmt(x) { return x === null || x === undefined ? "-" : (x >= 0 ? "+" : "") + x.toFixed(2); }

  // A share (0-1) in percent, one decimal ("100%" whole, to fit a phone's column).
  function pct(p) { return p >= 0.9995 ? "100%" : (100 * p).toFixed(1) + "%"; }

  // `n` and the word, plural unless n is 1: count(1, "visit") -> "1 visit".
  function count(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

  // --- Move strings: the columns played, digits 1-7 (Pons style). ---

  // The side to move after `moves`.
  function moverOf(moves) { return MARKS[moves.length % 2]; }

  // What Undo goes back to: the moves before the last one a person played (so it takes
  // back that move and the agent's replies after it), with human(mark) true where a
  // person plays mark; with no person at all, the moves before the last one. null when
  // there is nothing to take back.
  function undoTarget(moves, human) {
    if (!MARKS.some(human)) return moves ? moves.slice(0, -1) : null;
    for (let i = moves.length - 1; i >= 0; i--) {
      if (human(moverOf(moves.slice(0, i)))) return moves.slice(0, i);
    }
    return null;
  }

  // The move string as the pages show it: `empty` when no move was played.
  function showMoves(el, moves, empty) { el.textContent = moves || empty; }

  // --- The guard: may a person drop a stone in column `col` (1-7) now? ---

  function playable(game, col) {
    const view = game.view(), turn = game.turn();
    return Boolean(view) && turn.ready && !turn.busy && !view.winner && turn.human(view.toMove)
      && view.legal.includes(col);
  }

  // --- The board: 7 .col elements (data-col 1-7) of 6 .cell elements (data-row 0-5,
  // the bottom first; .x / .o, .last, .win). A click on a column calls game.play(col) only
  // if the guard, asked at the time of the click, lets it (not thinking, the column not
  // full, the game not over, a person to move); the playable columns are marked. ---

  function renderBoard(el, game) {
    const view = game.view();
    el.textContent = "";
    const wins = new Set((view ? view.win : []).map(([r, c]) => `${r},${c}`));
    const last = view && view.last ? view.last.join(",") : "";
    for (let c = 0; c < COLS; c++) {
      const col = document.createElement("div");
      col.className = "col" + (playable(game, c + 1) ? " playable" : "");
      col.dataset.col = String(c + 1);
      col.title = `column ${c + 1}`;
      col.addEventListener("click", () => { if (playable(game, c + 1)) game.play(c + 1); });
      for (let r = 0; r < ROWS; r++) {
        const cell = document.createElement("div");
        const who = view ? view.board[r][c] : null;
        cell.className = "cell" + (who ? " " + who : "");
        if (`${r},${c}` === last) cell.classList.add("last");
        if (wins.has(`${r},${c}`)) cell.classList.add("win");
        cell.dataset.row = String(r);
        col.appendChild(cell);
      }
      el.appendChild(col);
    }
  }

  // --- The row of 7 .heat-cell elements (data-col 1-7) above the board: fill(cell, c)
  // writes column c's (0-based) numbers into each. ---

  function renderHeat(el, fill) {
    el.textContent = "";
    for (let c = 0; c < COLS; c++) {
      const cell = document.createElement("div");
      cell.className = "heat-cell";
      cell.dataset.col = String(c + 1);
      fill(cell, c);
      el.appendChild(cell);
    }
  }

  // --- The heat map's colours: a share (0-1, of the largest shown) in shades of blue,
  // a value (-1 a loss .. +1 a win, null where there is none) from purple through white
  // to green (not red: x's stones are red; and purple/green reads in red-green colour
  // blindness). { background, color } for a .heat-cell. ---

  const HEAT_BLUE = "31, 79, 168", HEAT_LOSS = "118, 42, 131", HEAT_WIN = "27, 120, 55";

  function heatStyle(kind, x) {
    if (kind === "value") {
      if (x === null || x === undefined) return { background: "#fff", color: "#222" };
      const alpha = Math.min(1, Math.abs(x)) * 0.85;
      const rgb = x >= 0 ? HEAT_WIN : HEAT_LOSS;
      return { background: `rgba(${rgb}, ${alpha.toFixed(3)})`, color: alpha > 0.45 ? "#fff" : "#222" };
    }
    const strength = Math.max(0, Math.min(1, x));
    return {
      background: `rgba(${HEAT_BLUE}, ${(0.08 + 0.85 * strength).toFixed(3)})`,
      color: strength > 0.5 ? "#fff" : "#222",
    };
  }

  // --- The legend of the heat map's colours, into el (a .legend): `title`, then a strip
  // of the colours with the words `ends` = [low, middle, high] (middle may be "") under
  // it. kind: "share" or "value", as for heatStyle. ---

  function renderLegend(el, kind, title, ends) {
    el.textContent = "";
    const head = document.createElement("span");
    head.className = "legend-title";
    head.textContent = title;
    const strip = document.createElement("span");
    strip.className = "legend-strip";
    const stops = kind === "value" ? [-1, -0.5, 0, 0.5, 1] : [0, 0.25, 0.5, 0.75, 1];
    strip.style.background = `linear-gradient(to right, ${
      stops.map((x) => heatStyle(kind, x).background).join(", ")})`;
    const words = document.createElement("span");
    words.className = "legend-words";
    for (const [i, text] of ends.entries()) {
      const word = document.createElement("span");
      word.className = ["low", "mid", "high"][i];
      word.textContent = text;
      words.appendChild(word);
    }
    const key = document.createElement("span");
    key.className = "legend-key";
    key.append(strip, words);
    el.append(head, key);
    el.dataset.kind = kind;
  }

  // --- The players line, into el: for x then o, a stone of its colour and
  // words(mark, colour, human) with human = turn.human(mark), e.g. "x (red, moves
  // first): you". ---

  function renderPlayers(el, game, words) {
    const turn = game.turn();
    el.textContent = "";
    for (const mark of MARKS) {
      const item = document.createElement("span");
      item.className = "player";
      item.dataset.mark = mark;
      const stone = document.createElement("span");
      stone.className = "stone " + mark;
      stone.setAttribute("aria-hidden", "true");
      item.append(stone, words(mark, COLOURS[mark], turn.human(mark)));
      el.appendChild(item);
    }
  }

  // --- The status line: who has won, or who is to move; class "over" once the game is.
  // The words are the page's: words.draw, words.wins(who), words.thinking(mark, who),
  // words.toMove(who, human), with who = words.who(mark, human). Before the page is
  // ready (no view, or not turn.ready) it shows words.loading, or keeps its text where
  // that is undefined. ---

  function renderStatus(el, game, words) {
    const view = game.view(), turn = game.turn();
    if (!view || !turn.ready) {
      el.classList.remove("over");
      if (words.loading !== undefined) el.textContent = words.loading;
      return;
    }
    el.classList.toggle("over", Boolean(view.winner));
    const who = (mark) => words.who(mark, turn.human(mark));
    if (view.winner === "draw") {
      el.textContent = words.draw;
    } else if (view.winner) {
      el.textContent = words.wins(who(view.winner));
    } else if (turn.busy) {
      el.textContent = words.thinking(view.toMove, who(view.toMove));
    } else {
      el.textContent = words.toMove(who(view.toMove), turn.human(view.toMove));
    }
  }

  return Object.freeze({
    ROWS, COLS, MARKS, COLOURS, $, fmt, pct, count, moverOf, undoTarget, showMoves, playable,
    renderBoard, renderHeat, heatStyle, renderLegend, renderPlayers, renderStatus,
  });
})();
