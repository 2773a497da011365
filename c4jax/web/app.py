"""The web app: a Connect Four page and a small JSON API over a ``Player``.

    app = make_app(Player.from_checkpoint("runs/X"))   # a FastAPI (ASGI) app
    uvicorn.run(app, host="127.0.0.1", port=8000)      # python -m c4jax.serve does this

The page's files: ``web/served/`` is the page this app serves (``/`` is its
``index.html``, ``/static/`` its ``app.js`` and ``style.css``; its moves come
from the API below); ``web/common/`` holds ``board.js``, the board, status line
and move guards that it shares with ``web/standalone/`` (the page ``python -m
c4jax.export web`` writes, see ``c4jax.web.onnx``), served as ``/common/board.js``.

The API is stateless: the client sends the whole move string (Pons style,
digits 1-7) with every request, and gets the position back.

* ``GET /api/info`` -> the agents, the default and allowed simulations.
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
ended, an unknown agent, simulations out of range (422), a body over
``max_body`` bytes (413), an unknown path (404). Anything unexpected is a 500
``{"error": "internal error"}``, logged in one line; no traceback reaches the
client, and the server keeps serving.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from c4jax.position import MARKS, Position

STATIC_DIR = Path(__file__).parent / "served"  # the page python -m c4jax.serve serves
COMMON_DIR = Path(__file__).parent / "common"  # board.js, which both pages load
AGENT_NAME = "c4jax"  # the one agent served: the loaded network with its search
MAX_SIMULATIONS = 2000
MAX_BODY = 4096  # bytes
MAX_PLAYERS = 8  # players kept compiled, one per simulation count

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


class BadRequest(Exception):
    """A request the API refuses: ``status`` and a reason for the client."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


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
    """The JSON of a ``player.Analysis``: per-move lists of 7, NaN as null."""

    def number(x) -> float | None:
        x = float(x)
        return None if math.isnan(x) else round(x, 4)

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


def make_app(
    player,
    *,
    source: str = "",
    max_simulations: int = MAX_SIMULATIONS,
    max_body: int = MAX_BODY,
) -> FastAPI:
    """The ASGI app serving the page and the API for ``player``.

    Args:
        player: a ``c4jax.player.Player`` (anything with ``num_simulations``,
            ``analyse(moves)`` and ``with_simulations(n)``); its simulations
            are the default. Requests with other simulation counts use
            ``player.with_simulations`` (compiled once per count, a few kept).
        source: where the agent came from, shown on the page.
        max_simulations: the most simulations a request may ask for.
        max_body: the largest request body accepted, in bytes.
    """
    app = FastAPI(title="c4jax", docs_url=None, redoc_url=None, openapi_url=None)
    lock = threading.Lock()  # one search at a time: a Player is not thread-safe

    @functools.lru_cache(maxsize=MAX_PLAYERS)
    def player_for(sims: int):
        return player if sims == player.num_simulations else player.with_simulations(sims)

    def error(status: int, reason: str) -> JSONResponse:
        return JSONResponse({"error": reason}, status_code=status)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        """Refuses oversized bodies; turns anything unexpected into a JSON 500."""
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > max_body):
            return error(413, f"request body too large: at most {max_body} bytes")
        try:
            return await call_next(request)
        except Exception as err:  # the server keeps serving whatever happens
            log.error("internal error on %s %s: %r", request.method, request.url.path, err)
            return error(500, "internal error")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(BadRequest)
    async def bad_request(request: Request, exc: BadRequest):
        return error(exc.status, exc.reason)

    async def read_json(request: Request, model: type[BaseModel]) -> BaseModel:
        body = await request.body()  # also for chunked bodies without a length
        if len(body) > max_body:
            raise BadRequest(413, f"request body too large: at most {max_body} bytes")
        try:
            return model.model_validate_json(body or b"{}")
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
            "default_sims": int(player.num_simulations),
            "max_sims": max_simulations,
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

    def think(moves: str, sims: int):
        with lock:
            return player_for(sims).analyse(moves)

    @app.post("/api/move")
    async def agent_move(request: Request):
        req = await read_json(request, MoveRequest)
        if req.agent != AGENT_NAME:
            raise BadRequest(422, f"agent: unknown agent {req.agent!r}, allowed: {AGENT_NAME}")
        sims = player.num_simulations if req.sims is None else req.sims
        if not 0 <= sims <= max_simulations:
            raise BadRequest(422, f"sims: got {sims}, allowed 0-{max_simulations}")
        pos = _parse_position(req.moves)
        if pos.over:
            raise BadRequest(422, "the game is over: no more moves")
        analysis = await run_in_threadpool(think, pos.moves, sims)
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
