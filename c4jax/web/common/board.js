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
"use strict";

const C4 = (() => {
  const ROWS = 6, COLS = 7;
  const MARKS = ["x", "o"];  // x moves first

  const $ = (id) => document.getElementById(id);

  // A value with its sign and two decimals; "-" where there is none.
  function fmt(x) { return x === null || x === undefined ? "-" : (x >= 0 ? "+" : "") + x.toFixed(2); }

  // --- Move strings: the columns played, digits 1-7 (Pons style). ---

  // The side to move after `moves`.
  function moverOf(moves) { return MARKS[moves.length % 2]; }

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
    ROWS, COLS, MARKS, $, fmt, moverOf, showMoves, playable, renderBoard, renderHeat,
    renderStatus,
  });
})();
