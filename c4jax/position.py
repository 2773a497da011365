"""One Connect Four position on the host, in plain Python: for play, the web app and checks.

    pos = Position.parse("4453")   # Pons-style move string, digits 1-7
    pos.legal                       # (0, 1, ..., 6): open columns, 0-based
    pos.play(2).moves               # "44533"
    Position.parse("1212121").winner, pos.winning_line

``env`` is the batched, jittable game; this is the same rules for one game,
without JAX, so that validating a request or drawing a board costs
microseconds. Cells are ``(row, column)``, both 0-based, row 0 the bottom.
"""

from __future__ import annotations

import dataclasses
import numbers

NUM_ROWS = 6  # env.NUM_ROWS (no import: this module stays free of JAX)
NUM_COLS = 7  # env.NUM_COLS
MARKS = ("x", "o")  # first player, second player
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


@dataclasses.dataclass(frozen=True)
class Position:
    """The position after a move string.

    Attributes:
        moves: the move string, digits 1-7, first player first.
        grid: ``[H][W]`` tuple of tuples, row 0 the bottom: 0 first player, 1
            second player, -1 empty.
        winner: 0 or 1 when a player has four in a row, -1 a draw (full board),
            None while the game goes on.
        winning_line: the cells ``(row, col)`` of every line of four or more
            through the winning stone (empty unless someone won).
    """

    moves: str
    grid: tuple[tuple[int, ...], ...]
    winner: int | None
    winning_line: tuple[tuple[int, int], ...]

    @classmethod
    def parse(cls, moves: str) -> Position:
        """The position after ``moves``.

        Raises:
            ValueError: not a string, a character other than 1-7, a move into
                a full column, or a move after the game ended; the message
                names the move.
        """
        if not isinstance(moves, str):
            raise ValueError(f"moves must be a string of digits 1-7, got {type(moves).__name__}")
        pos = cls("", tuple((-1,) * NUM_COLS for _ in range(NUM_ROWS)), None, ())
        for i, char in enumerate(moves):
            where = f"move {i + 1} of {moves!r}"
            if char not in "1234567":
                raise ValueError(f"{where}: {char!r} is not a column 1-7")
            if pos.winner is not None:
                raise ValueError(f"{where}: the game already ended")
            if pos.height(int(char) - 1) == NUM_ROWS:
                raise ValueError(f"{where}: column {char} is full")
            pos = pos.play(int(char) - 1)
        return pos

    def height(self, column: int) -> int:
        """Stones in a 0-based column."""
        return sum(row[column] != -1 for row in self.grid)

    @property
    def to_move(self) -> int:
        """0 if the first player (x) moves next, else 1."""
        return len(self.moves) % 2

    @property
    def over(self) -> bool:
        return self.winner is not None

    @property
    def legal(self) -> tuple[int, ...]:
        """The 0-based columns that can be played (none once the game is over)."""
        if self.over:
            return ()
        return tuple(c for c in range(NUM_COLS) if self.height(c) < NUM_ROWS)

    @property
    def last_move(self) -> tuple[int, int] | None:
        """The cell ``(row, col)`` of the last stone dropped, None on the empty board."""
        if not self.moves:
            return None
        column = int(self.moves[-1]) - 1
        return self.height(column) - 1, column

    def play(self, column: int) -> Position:
        """The position after dropping a stone in the 0-based ``column``.

        Raises:
            ValueError: the column is out of range or full, or the game is over.
        """
        # numbers.Integral: a numpy integer too (np.argmax of a policy); a bool is not one.
        if isinstance(column, bool) or not isinstance(column, numbers.Integral) or not (
                0 <= column < NUM_COLS):
            raise ValueError(f"column {column!r}: allowed 0-{NUM_COLS - 1} (0-based)")
        column = int(column)
        if self.over:
            raise ValueError("the game is over")
        row = self.height(column)
        if row == NUM_ROWS:
            raise ValueError(f"column {column + 1} is full")
        player = self.to_move
        grid = tuple(
            tuple(player if (r, c) == (row, column) else v for c, v in enumerate(cells))
            for r, cells in enumerate(self.grid)
        )
        line = _lines_through(grid, row, column)
        moves = self.moves + str(column + 1)
        if line:
            winner = player
        elif len(moves) == NUM_ROWS * NUM_COLS:
            winner = -1
        else:
            winner = None
        return Position(moves, grid, winner, line)

    def result(self) -> str | None:
        """``"x"`` or ``"o"`` (the winner's mark), ``"draw"``, or None while live."""
        if self.winner is None:
            return None
        return "draw" if self.winner == -1 else MARKS[self.winner]


def _lines_through(grid, row: int, col: int) -> tuple[tuple[int, int], ...]:
    """Cells of every run of 4+ of the stone at (row, col), sorted; empty if none."""
    player = grid[row][col]
    cells: set[tuple[int, int]] = set()
    for dr, dc in _DIRECTIONS:
        run = [(row, col)]
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < NUM_ROWS and 0 <= c < NUM_COLS and grid[r][c] == player:
                run.append((r, c))
                r, c = r + sign * dr, c + sign * dc
        if len(run) >= 4:
            cells.update(run)
    return tuple(sorted(cells))
