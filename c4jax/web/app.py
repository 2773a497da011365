"""The web app: a Connect Four page and a small JSON API over a ``Player``.

    app = make_app(Player.from_checkpoint("runs/X"))   # a FastAPI (ASGI) app
    guard.make_server(app, host="127.0.0.1", port=8000).run()  # python -m c4jax.serve does this

The page's files: ``web/served/`` is the page this app serves (``/`` is its
``index.html``, ``/static/`` its ``app.js`` and ``style.css``; its moves come
from the API below); ``web/common/`` holds ``board.js``, the board, status line
and move guards that it shares with ``web/standalone/`` (the page ``python -m
c4jax.export web`` writes, see ``c4jax.web.onnx``), served as ``/common/board.js``.

The API is stateless: the client sends the whole move string (Pons style,
digits 1-7) with every request, and gets the position back.

* ``GET /api/info`` -> the agents, the default simulations, ``sims``: the
  simulation counts a move may ask for, and ``max_sims``, the largest.
* ``POST /api/state {"moves": "4453", "column": 5}`` -> the position after
  ``moves`` and, if given, the human's move in ``column`` (1-7).
* ``POST /api/move {"moves": "4453", "sims": 64, "agent": "c4jax"}`` -> the
  agent's move: ``column`` (1-7), ``index`` (0-6), the position after it, and
  ``analysis`` of the position before it (``policy`` [7], ``q`` [7] with null
  where not searched, ``visits`` [7], ``value`` (of the improved policy),
  ``root_value``, ``chosen`` = ``index``, ``rule``: how it was chosen).

A position is ``{"moves", "board": [H][W] rows bottom first (0 x, 1 o, -1
empty), "to_move": "x"|"o", "legal": [1-7...], "winner": "x"|"o"|"draw"|null,
"winning_line": [[row, col]...] 0-based, "last_move": [row, col]|null}``.

Every bad request gets a 4xx JSON ``{"error": reason}``: malformed JSON or
fields (400/422), an illegal move string or column, a move after the game
ended, an unknown agent, a simulation count not offered (422), an unknown path
(404). Anything unexpected is a 500 ``{"error": "internal error"}``, logged in
one line; no traceback reaches the client, and the server keeps serving.

What one client (or a page on another site) may take of the server is bounded
by ``c4jax.web.guard`` (``Limits``: body size and time, header time, connections,
``Host``, ``Origin`` and ``Content-Type``) and here: searches run in two lanes of
one thread each, apart from the page's files, ``/api/info`` and ``/api/state``
(which never wait for a search): up to ``quick_sims`` simulations in one, more
in the other, so a cheap move never waits behind expensive ones. A lane holds at
most ``quick_searches`` / ``deep_searches`` moves (running or waiting); beyond
that a move gets a 503 with ``Retry-After`` instead of an ever longer queue.
Simulation counts are a fixed set (``SIMULATION_CHOICES`` and the player's
own), each compiled once, in the background when the server starts, so asking
for a new count cannot stall the server on compiling.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from c4jax.inputs import MAX_SIMULATIONS
from c4jax.position import MARKS, Position
from c4jax.web import guard
from c4jax.web.guard import BadRequest, Limits

STATIC_DIR = Path(__file__).parent / "served"  # the page python -m c4jax.serve serves
COMMON_DIR = Path(__file__).parent / "common"  # board.js, which both pages load
AGENT_NAME = "c4jax"  # the one agent served: the loaded network with its search
# The simulation counts a move may ask for (besides the player's own): the page's
# choices (web/served/app.js) and the cap that every command shares. Each is one
# compiled search, compiled when the server starts.
SIMULATION_CHOICES = (0, 4, 16, 64, 200, 800, 2000, MAX_SIMULATIONS)

log = logging.getLogger(__name__)


class StateRequest(BaseModel):
    """``POST /api/state``: a position, and optionally a move (1-7) to play in it."""

    model_config = ConfigDict(extra="forbid", strict=True)
    moves: str = ""
    column: int | None = None


class MoveRequest(BaseModel):
    """``POST /api/move``: the agent's move in a position."""

    model_config = ConfigDict(extra="forbid", strict=True)
    moves: str = ""
    sims: int | None = None
    agent: str = AGENT_NAME


def position_json(pos: Position) -> dict[str, Any]:
    """The JSON of a position (see the module docstring)."""
    return {
        "moves": pos.moves,
        "board": [list(row) for row in pos.grid],
        "to_move": MARKS[pos.to_move],
        "legal": [c + 1 for c in pos.legal],
        "winner": pos.result(),
        "winning_line": [list(cell) for cell in pos.winning_line],
        "last_move": list(pos.last_move) if pos.last_move else None,
    }


def analysis_json(analysis) -> dict[str, Any]:
    """The JSON of a ``player.Analysis``: per-move lists of 7, NaN and inf as null."""

    def number(x) -> float | None:
        x = float(x)
        return round(x, 4) if math.isfinite(x) else None

    q = analysis.q if analysis.q is not None else [math.nan] * len(analysis.policy)
    visits = analysis.visits if analysis.visits is not None else [0] * len(analysis.policy)
    return {
        "policy": [round(float(p), 4) for p in analysis.policy],
        "q": [number(x) for x in q],
        "visits": [int(v) for v in visits],
        # The value of playing the improved policy: unlike the root value, it does
        # not carry Gumbel search's underestimate (see search.SearchOutput).
        "value": number(_position_value(analysis)),
        "root_value": number(analysis.value),
        "chosen": int(analysis.action),
        "rule": getattr(analysis, "rule", ""),
    }


def _position_value(analysis) -> float:
    """The agent's value of the position: ``policy_value`` where known, else ``value``."""
    policy_value = getattr(analysis, "policy_value", None)
    return analysis.value if policy_value is None else policy_value


def _parse_position(moves: str) -> Position:
    if len(moves) > 42:
        raise BadRequest(422, f"moves: {len(moves)} moves, a game has at most 42")
    try:
        return Position.parse(moves)
    except ValueError as err:
        raise BadRequest(422, f"moves: {err}") from None


def _validation_reason(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "body"
    return f"{where}: {first.get('msg', 'invalid')}"


def simulation_choices(default: int) -> tuple[int, ...]:
    """The simulation counts a move may ask for: ``SIMULATION_CHOICES`` and ``default``."""
    return tuple(sorted({*SIMULATION_CHOICES, int(default)}))


class _Lane:
    """One thread that runs searches in turn, holding at most ``capacity`` of them."""

    def __init__(self, name: str, capacity: int, retry_after: int):
        self.name = name
        self.capacity = capacity
        self.retry_after = retry_after
        self.pending = 0  # searches submitted and not finished; changed on the event loop
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)

    async def run(self, fn, *args):
        """``fn(*args)`` in this lane's thread; a 503 if the lane is full."""
        if self.pending >= self.capacity:
            raise BadRequest(
                503, f"busy: {self.pending} moves are being searched; try again shortly",
                headers={"Retry-After": str(self.retry_after)},
            )
        loop = asyncio.get_running_loop()
        future = self.executor.submit(fn, *args)
        self.pending += 1

        def done(_):  # in the lane's thread; counted down on the loop's
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._finished)

        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def _finished(self) -> None:
        self.pending -= 1


def make_app(
    player,
    *,
    source: str = "",
    limits: Limits = guard.DEFAULT_LIMITS,
    allowed_hosts: tuple[str, ...] = (),
    warm_up: bool = True,
) -> FastAPI:
    """The ASGI app serving the page and the API for ``player``.

    Args:
        player: a ``c4jax.player.Player`` (anything with ``num_simulations``,
            ``analyse(moves)`` and ``with_simulations(n)``); its simulations
            are the default. The other counts of ``simulation_choices`` use
            ``player.with_simulations``, one player each, kept.
        source: where the agent came from, shown on the page.
        limits: what one request, connection or client may take (``Limits``).
        allowed_hosts: names besides IP addresses and ``localhost`` that the
            page may be opened by (the ``Host`` check, against DNS rebinding).
        warm_up: compile every simulation count when the app starts (its
            lifespan), in the search lanes, default count first.
    """
    default = int(player.num_simulations)
    choices = simulation_choices(default)
    players = {n: player if n == default else player.with_simulations(n) for n in choices}
    quick = _Lane("c4jax-quick-search", limits.quick_searches, limits.retry_after)
    deep = _Lane("c4jax-deep-search", limits.deep_searches, limits.retry_after)

    def lane(sims: int) -> _Lane:
        return quick if sims <= limits.quick_sims else deep

    def think(moves: str, sims: int):  # in the lane of sims: one thread uses each player
        return players[sims].analyse(moves)

    def compile_search(sims: int) -> None:
        try:
            players[sims].analyse("")
        except Exception as err:  # a request with this count will say what is wrong
            log.warning("warning: compiling the search with %d simulations: %r", sims, err)

    def compile_in_turn(todo: list[int]) -> None:
        """Compiles ``todo[0]`` in its lane, then queues the next: one at a time, so
        that a move asked for meanwhile waits for one compile at most, not all."""
        if todo:
            try:
                future = lane(todo[0]).executor.submit(compile_search, todo[0])
            except RuntimeError:  # the app has stopped: its lanes are shut down
                return
            future.add_done_callback(lambda f: f.cancelled() or compile_in_turn(todo[1:]))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if warm_up:  # the default first, in each lane
            order = sorted(choices, key=lambda n: (n != default, n))
            compile_in_turn([n for n in order if n <= limits.quick_sims])
            compile_in_turn([n for n in order if n > limits.quick_sims])
        yield
        for each in (quick, deep):
            each.executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(
        title="c4jax", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan
    )
    app.add_middleware(guard.Guard, limits=limits, allowed_hosts=tuple(allowed_hosts))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest):
        if exc.close:  # the guard answers those, and closes the connection
            raise exc
        return JSONResponse({"error": exc.reason}, status_code=exc.status, headers=exc.headers)

    async def read_json(request: Request, model: type[BaseModel]) -> BaseModel:
        body = bytearray()
        async for chunk in request.stream():  # the guard counts and times every chunk
            body += chunk
        try:
            return model.model_validate_json(bytes(body) or b"{}")
        except ValidationError as err:
            kinds = {e.get("type") for e in err.errors()}
            status = 400 if "json_invalid" in kinds else 422
            raise BadRequest(status, _validation_reason(err)) from None

    @app.get("/", include_in_schema=False)
    async def index():
        return FileResponse(STATIC_DIR / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.mount("/common", StaticFiles(directory=COMMON_DIR), name="common")

    @app.get("/api/info")
    async def info():
        return {
            "agents": [AGENT_NAME],
            "source": source,
            "default_sims": default,
            "max_sims": max(choices),
            "sims": list(choices),
        }

    @app.post("/api/state")
    async def state(request: Request):
        req = await read_json(request, StateRequest)
        pos = _parse_position(req.moves)
        if req.column is not None:
            if not 1 <= req.column <= 7:
                raise BadRequest(422, f"column: got {req.column}, allowed 1-7")
            if pos.over:
                raise BadRequest(422, "the game is over: no more moves")
            if pos.height(req.column - 1) == 6:
                raise BadRequest(422, f"column {req.column} is full")
            pos = pos.play(req.column - 1)
        return position_json(pos)

    @app.post("/api/move")
    async def agent_move(request: Request):
        req = await read_json(request, MoveRequest)
        if req.agent != AGENT_NAME:
            raise BadRequest(422, f"agent: unknown agent {req.agent!r}, allowed: {AGENT_NAME}")
        sims = default if req.sims is None else req.sims
        if sims not in players:
            shown = sims if abs(sims) < 10**12 else f"{str(sims)[:12]}..."
            raise BadRequest(
                422, f"sims: got {shown}, allowed: {', '.join(map(str, choices))}"
            )
        pos = _parse_position(req.moves)
        if pos.over:
            raise BadRequest(422, "the game is over: no more moves")
        analysis = await lane(sims).run(think, pos.moves, sims)
        index = int(analysis.action)
        if index not in pos.legal:  # never expected: the search masks full columns
            raise RuntimeError(f"the agent chose column {index + 1}, not legal in {pos.moves!r}")
        after = pos.play(index)
        return {
            **position_json(after),
            "column": index + 1,
            "index": index,
            "sims": sims,
            "analysis": analysis_json(analysis),
        }

    return app
