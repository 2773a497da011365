"""The web app: a Connect Four page and a small JSON API over a ``Player``.

    app = make_app(Player.from_checkpoint("runs/X"))   # a FastAPI (ASGI) app
    make_server(app, host="127.0.0.1", port=8000).run()  # python -m c4jax.serve does this

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
(``Limits``), so that the page stays quick for everyone else:

* a body over ``max_body`` bytes is refused (413) as soon as that many have
  arrived, chunked bodies included; a body not complete ``body_timeout``
  seconds after its headers gets a 408; both close the connection. Headers
  not complete ``header_timeout`` seconds after a connection opens (or after
  its previous answer) close it (``make_server``), and at most
  ``max_connections`` are open at once (beyond that, a 503);
* searches run in two lanes of one thread each, apart from the page's files,
  ``/api/info`` and ``/api/state`` (which never wait for a search): up to
  ``quick_sims`` simulations in one, more in the other, so a cheap move never
  waits behind expensive ones. A lane holds at most ``quick_searches`` /
  ``deep_searches`` moves (running or waiting); beyond that a move gets a 503
  with ``Retry-After`` instead of an ever longer queue;
* simulation counts are a fixed set (``SIMULATION_CHOICES`` and the player's
  own), each compiled once, in the background when the server starts, so
  asking for a new count cannot stall the server on compiling;
* DNS rebinding and other sites' pages: a ``Host`` that is not an IP address,
  ``localhost`` or one of ``allowed_hosts`` gets a 400; an ``Origin`` other
  than the ``Host`` a 403; a POST whose ``Content-Type`` is not
  ``application/json`` (what a cross-site form or ``text/plain`` fetch sends
  without asking) a 415.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import ipaddress
import logging
import math
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from c4jax import schema
from c4jax.inputs import MAX_SIMULATIONS
from c4jax.position import MARKS, Position

STATIC_DIR = Path(__file__).parent / "served"  # the page python -m c4jax.serve serves
COMMON_DIR = Path(__file__).parent / "common"  # board.js, which both pages load
AGENT_NAME = "c4jax"  # the one agent served: the loaded network with its search
# The simulation counts a move may ask for (besides the player's own): the page's
# choices (web/served/app.js) and the cap that every command shares. Each is one
# compiled search, compiled when the server starts.
SIMULATION_CHOICES = (0, 4, 16, 64, 200, 800, 2000, MAX_SIMULATIONS)
MAX_BODY = 4096  # bytes
LOOPBACK_NAMES = ("localhost",)  # names a DNS rebinding cannot take (IP addresses neither)

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request, connection or client may take of the server.

    Attributes:
        max_body: the largest request body, in bytes (413 beyond, while reading).
        body_timeout: seconds for a request's body to arrive once its headers
            have (408 after).
        header_timeout: seconds for a request's headers to arrive, from the
            connection or the previous answer on it (the connection is closed
            after; ``make_server``).
        max_connections: open connections at most; requests beyond get a 503
            (``make_server``).
        quick_sims: searches with at most this many simulations run in the quick
            lane, the others in the deep lane (one thread each).
        quick_searches, deep_searches: moves a lane holds at most, running or
            waiting; beyond, a 503 with ``Retry-After``.
        retry_after: the seconds a 503 asks a client to wait.
        shutdown_timeout: seconds a stopping server waits for open requests.
    """

    max_body: int = schema.field(MAX_BODY, ge=1)
    body_timeout: float = schema.field(10.0, gt=0)
    header_timeout: float = schema.field(10.0, gt=0)
    max_connections: int = schema.field(1000, ge=1)
    quick_sims: int = schema.field(64, ge=0, le=MAX_SIMULATIONS)
    quick_searches: int = schema.field(16, ge=1)
    deep_searches: int = schema.field(4, ge=1)
    retry_after: int = schema.field(2, ge=0)
    shutdown_timeout: float = schema.field(3.0, ge=0)

    def __post_init__(self):
        schema.check_fields(self, prefix="limits.")  # ValueError naming the field


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
    """A request the API refuses: ``status``, a reason for the client, extra headers,
    and whether to close the connection after the answer (when its body is not read)."""

    def __init__(
        self, status: int, reason: str, *, headers: dict[str, str] | None = None,
        close: bool = False,
    ):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = dict(headers or {})
        self.close = close


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


def host_name(host: str) -> str:
    """The name or address in a ``Host`` header, without its port, lower case:
    ``"Example.org:8000"`` -> ``"example.org"``, ``"[::1]:80"`` -> ``"::1"``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def host_allowed(host: str, allowed_hosts: tuple[str, ...] = ()) -> bool:
    """Whether a request's ``Host`` may be answered: an IP address (a page opened by
    address is this server's own), ``localhost``, or a name in ``allowed_hosts``.

    Any other name may be an attacker's domain that now resolves to this computer
    (DNS rebinding): its pages must not reach the API.
    """
    name = host_name(host)
    if name in LOOPBACK_NAMES or name in {host_name(h) for h in allowed_hosts}:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def origin_matches(origin: str, host: str) -> bool:
    """Whether a request's ``Origin`` (``scheme://host[:port]``) is the page's own ``Host``."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    return bool(sep) and scheme in ("http", "https") and rest == host.strip().lower()


def media_type(content_type: str) -> str:
    """``"application/json; charset=utf-8"`` -> ``"application/json"``."""
    return content_type.partition(";")[0].strip().lower()


def _headers(scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}


async def _answer(scope, send, error: BadRequest) -> None:
    """Sends ``error`` as the JSON answer (closing the connection after it if it says so)."""
    response = JSONResponse({"error": error.reason}, status_code=error.status,
                            headers=error.headers)
    if error.close:
        response.headers["connection"] = "close"
    await response(scope, _no_receive, send)


async def _no_receive():  # what _answer's response is given to read: nothing
    return {"type": "http.disconnect"}


class _Guard:
    """ASGI middleware: the ``Host``, ``Origin`` and ``Content-Type`` checks, the body's
    size and time limits while it is read, and a JSON 500 for anything unexpected."""

    def __init__(self, app, *, limits: Limits, allowed_hosts: tuple[str, ...]):
        self.app = app
        self.limits = limits
        self.allowed_hosts = allowed_hosts

    def refusal(self, scope) -> BadRequest | None:
        """Why a request is refused from its headers alone, or None."""
        headers = _headers(scope)
        host = headers.get("host")
        if host is not None and not host_allowed(host, self.allowed_hosts):
            return BadRequest(
                400, f"host: {host_name(host)[:100]!r} is not a name of this server (start it with"
                " --allowed-host NAME to open the page by that name)", close=True,
            )
        origin = headers.get("origin")
        if origin is not None and not origin_matches(origin, host or ""):
            return BadRequest(403, f"origin: {origin[:100]!r} is not this page", close=True)
        length = headers.get("content-length")
        if length is not None:
            if not length.isascii() or not length.isdigit():
                return BadRequest(400, "content-length: not a number", close=True)
            if len(length) > 18 or int(length) > self.limits.max_body:
                return BadRequest(413, self.too_large(), close=True)
        if scope["method"] == "POST":
            kind = media_type(headers.get("content-type", ""))
            if kind != "application/json":
                return BadRequest(
                    415, f"content-type: got {kind[:60]!r}, allowed: application/json",
                    close=True,
                )
        return None

    def too_large(self) -> str:
        return f"request body too large: at most {self.limits.max_body} bytes"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refused = self.refusal(scope)
        if refused is not None:
            return await _answer(scope, send, refused)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.limits.body_timeout
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except TimeoutError:
                raise BadRequest(
                    408, f"request body not complete after {self.limits.body_timeout:g} s",
                    close=True,
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limits.max_body:
                    raise BadRequest(413, self.too_large(), close=True)
            return message

        async def tracked_send(message):
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except BadRequest as err:
            if not started:
                await _answer(scope, send, err)
        except ClientDisconnect:
            pass  # the client is gone: no one to answer
        except Exception as err:  # the server keeps serving whatever happens
            log.error("internal error on %s %s: %r", scope["method"], scope["path"], err)
            if not started:
                await _answer(scope, send, BadRequest(500, "internal error"))


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
    limits: Limits = Limits(),
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
    app.add_middleware(_Guard, limits=limits, allowed_hosts=tuple(allowed_hosts))

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


def _guarded_h11(header_timeout: float):
    """uvicorn's h11 protocol with a time limit on each request's headers.

    uvicorn limits the wait between requests (``timeout_keep_alive``) but not
    a request's headers: a client that sends them byte by byte, or stops half
    way, held its connection for good. Here a timer starts when a connection
    opens and after each answer, stops when the request's headers are in, and
    closes the connection if it fires first. When the server stops, a request
    still sending its body is closed at once.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _header_timer = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:  # the headers are in
                self._disarm()

        def on_response_complete(self) -> None:
            self._arm()  # before a pipelined request is handled (and disarms it)
            super().on_response_complete()

        def shutdown(self) -> None:
            # The server stops: a request still sending its body will not be
            # answered; closing it ends its wait at once (rather than a cancelled
            # task and a traceback after the shutdown timeout).
            cycle = self.cycle
            if cycle is not None and not cycle.response_started and (
                self.conn.their_state is h11.SEND_BODY
            ):
                self.transport.close()
                return
            super().shutdown()

    return GuardedH11Protocol


def make_server(
    app, *, host: str, port: int, limits: Limits = Limits(), log_level: str = "warning"
):
    """A ``uvicorn.Server`` for ``app`` on ``host:port`` with ``limits``' header
    timeout, connection cap and shutdown timeout (``server.run()`` serves).

    Args:
        app: the ASGI app, ``make_app``'s (given the same ``limits``).
        host, port: the address to listen on (port 0: any free one).
        limits: see ``Limits``.
        log_level: uvicorn's (``warning``: refused connections and errors only).
    """
    import uvicorn

    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            http=_guarded_h11(limits.header_timeout),
            limit_concurrency=limits.max_connections,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=math.ceil(limits.shutdown_timeout),
            log_level=log_level,
        )
    )
