"""What one client, or a page on another site, may take of the web server.

    app = make_app(player, limits=Limits(max_body=4096))   # c4jax.web.app adds Guard
    make_server(app, host="127.0.0.1", port=8000).run()    # python -m c4jax.serve does this

``Guard`` is the app's outermost ASGI middleware, ``make_server`` the uvicorn
server around the app, and ``Limits`` holds their numbers (the search lanes'
too, which ``c4jax.web.app`` keeps):

* a body over ``max_body`` bytes is refused (413) as soon as that many have
  arrived, chunked bodies included; a body not complete ``body_timeout``
  seconds after its headers gets a 408; both close the connection, and so
  does any answer given before the request's body was read. Headers
  not complete ``header_timeout`` seconds after a connection opens (or after
  its previous answer) close it (``make_server``), and at most
  ``max_connections`` are open at once (beyond that, a 503);
* DNS rebinding and other sites' pages: a ``Host`` that is not an IP address,
  ``localhost`` or one of ``allowed_hosts`` gets a 400; an ``Origin`` other
  than the ``Host`` a 403; a POST whose ``Content-Type`` is not
  ``application/json`` (what a cross-site form or ``text/plain`` fetch sends
  without asking) a 415;
* anything unexpected is a JSON 500 ``{"error": "internal error"}``, logged in
  one line, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import math

from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from c4jax import schema
from c4jax.inputs import MAX_SIMULATIONS

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


DEFAULT_LIMITS = Limits()


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


class Guard:
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
        headers = _headers(scope)
        # Whether the request's body is all read: until then, an answer closes the
        # connection (the app may answer without reading it: a 404, a 405), as no
        # timer watches a connection whose client still owes a body nobody reads.
        body_read = (headers.get("content-length", "0") in ("", "0")
                     and "transfer-encoding" not in headers)

        async def limited_receive():
            nonlocal received, body_read
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
                if not message.get("more_body", False):
                    body_read = True
            return message

        async def tracked_send(message):
            nonlocal started
            started = True
            if message["type"] == "http.response.start" and not body_read:
                message = {**message, "headers": [*message.get("headers", ()),
                                                  (b"connection", b"close")]}
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
    app, *, host: str, port: int, limits: Limits = DEFAULT_LIMITS, log_level: str = "warning"
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
