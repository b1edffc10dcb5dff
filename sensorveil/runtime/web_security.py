"""The web preview's request checks: who may ask, what they may send, and how many at once.

A page in a browser on the board (or a site that re-points its own name at the board: DNS
rebinding) can send requests to the preview from another origin. So:

* every request must name this server in its Host header: the address it is bound to, the
  address the client actually reached, or localhost / 127.0.0.1 / [::1], with the bound port.
  A rebinding site's requests carry the site's own name and are refused (403);
* a request that carries an Origin (a browser always sends one on POST) must come from this
  server's own origin (403 otherwise);
* the one state-changing request, POST /api/raw, must be ``Content-Type: application/json``
  (a cross-origin form or a ``no-cors`` fetch cannot send that) with a small body that is read
  incrementally and refused past ``MAX_BODY_BYTES`` (413) without being buffered whole;
* at most ``max_connections`` connections are held open (the rest are closed as they are
  accepted) and at most ``max_streams`` MJPEG responses run at once (the rest are a 503);
* a connection that starts no new request for a while is closed, the first request or any later
  one on a kept-alive connection (slowloris: headers sent a byte at a time), and an MJPEG
  response whose client stops reading ends once a frame cannot be sent within ``SEND_TIMEOUT_S``,
  so a few bad clients cannot hold every connection or stream slot;
* a request with more than one Host header is refused (400): which one names the server would
  depend on who reads it.
"""
import asyncio
import ipaddress
import json
import os
from typing import Optional, Tuple

from sensorveil.runtime.errors import InputError

MAX_BODY_BYTES = 1024          # {"enabled": false} is 18 bytes
BODY_TIMEOUT_S = 5.0           # a client that trickles its body holds a connection no longer
HEADER_TIMEOUT_S = 10.0        # a connection that starts no new request for this long (and more) is closed
SEND_TIMEOUT_S = 10.0          # an MJPEG response whose client reads nothing for this long ends
DEFAULT_MAX_CONNECTIONS = 32   # a browser opens up to 6 per server; a few viewers and dashboards
DEFAULT_MAX_STREAMS = 8        # MJPEG responses at once: the page shows two
MAX_CONNECTIONS_ENV = "SENSORVEIL_WEB_MAX_CONNECTIONS"
MAX_STREAMS_ENV = "SENSORVEIL_WEB_MAX_STREAMS"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


class Refused(Exception):
    """A request this server will not serve: ``status`` and one line saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def limit_setting(value: "Optional[int]", env: str, default: int) -> int:
    """A positive count from the argument, else the environment setting ``env``, else ``default``."""
    if value is None:
        text = os.environ.get(env, "").strip()
        if not text:
            return default
        if not text.isdigit():
            raise InputError(f"{env}={text!r}: expected a positive whole number")
        value = int(text)
    if int(value) < 1:
        raise InputError(f"{env} (or its argument) is {value}: expected a positive whole number")
    return int(value)


# -- Host and Origin ---------------------------------------------------------------------
def _name(text: str) -> str:
    """A host name as compared: lower case, an IP address in its one canonical spelling."""
    text = text.strip().lower().strip("[]")
    try:
        return ipaddress.ip_address(text).compressed
    except ValueError:
        return text


def split_host(value: str, default_port: int = 80) -> "Optional[Tuple[str, int]]":
    """``name[:port]`` or ``[IPv6][:port]`` -> (name, port); None for anything malformed."""
    value = value.strip()
    if not value or any(c in value for c in "/@\\ "):
        return None
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    else:
        name, sep, port = value.rpartition(":")
        if not sep:
            name, port = value, None
        elif ":" in name:   # a bare IPv6 address is not a valid Host
            return None
    if port is not None and (not port.isdigit() or not 0 < int(port) <= 65535):
        return None
    return (_name(name), int(port) if port is not None else default_port) if name else None


class AddressCheck:
    """Which Host headers and Origins name this server, bound to ``host``:``port``."""

    def __init__(self, host: str, port: int):
        self.port = port
        self.names = {_name(name) for name in LOOPBACK_NAMES}
        if host not in WILDCARDS:
            self.names.add(_name(host))

    def host_refusal(self, host_header: "Optional[str]", local_address: "Optional[str]") -> "Optional[str]":
        """None when ``host_header`` names this server; else why not. ``local_address`` is the
        address of this server that the client's connection reached (any address it is bound to)."""
        parsed = split_host(host_header or "")
        names = self.names | ({_name(local_address)} if local_address else set())
        if parsed is not None and parsed[0] in names and parsed[1] == self.port:
            return None
        shown = ", ".join(sorted(f"[{n}]" if ":" in n else n for n in names))
        return (f"Host {host_header!r} is not this server: expected one of {shown} with port {self.port} "
                "(a page from another site cannot use this preview)")

    def origin_refusal(self, origin: "Optional[str]", host_header: str) -> "Optional[str]":
        """None when there is no Origin or it is this server's own origin (the Host it was asked as)."""
        if origin is None:
            return None
        scheme, sep, rest = origin.strip().partition("://")
        if sep and scheme.lower() == "http" and split_host(rest) is not None \
                and split_host(rest) == split_host(host_header):
            return None
        return (f"Origin {origin!r} is not this server's own origin (http://{host_header}): "
                "a page from another site may not change this preview")


class HostGuard:
    """ASGI middleware: every HTTP request names this server (Host) and, if it carries an
    Origin, comes from this server's own origin; anything else is a 403 before any route runs."""

    def __init__(self, app, check: AddressCheck):
        self.app, self.check = app, check

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}
        hosts = [value for key, value in scope["headers"] if key.lower() == b"host"]
        if len(hosts) > 1:
            from starlette.responses import JSONResponse
            await JSONResponse({"error": "{} Host headers refused: expected exactly one naming this server".format(
                len(hosts))}, status_code=400, headers={"Connection": "close"})(scope, receive, send)
            return
        local = (scope.get("server") or (None,))[0]
        refusal = (self.check.host_refusal(headers.get("host"), local)
                   or self.check.origin_refusal(headers.get("origin"), headers.get("host", "")))
        if refusal is None:
            return await self.app(scope, receive, send)
        from starlette.responses import JSONResponse
        await JSONResponse({"error": refusal}, status_code=403)(scope, receive, send)


# -- the body of a state-changing request ------------------------------------------------
def require_json(content_type: "Optional[str]") -> None:
    """Only a same-origin script can send application/json; a form or a no-cors fetch cannot."""
    media_type = (content_type or "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise Refused(403, f"Content-Type {content_type!r} refused: expected application/json")


async def read_small_body(request, limit: int = MAX_BODY_BYTES, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The body, read chunk by chunk and refused (413) as soon as it passes ``limit`` bytes, so a
    huge body is never held in memory; Content-Length is checked before anything is read."""
    length = request.headers.get("content-length")
    if length is not None and (not length.strip().isdigit() or int(length) > limit):
        raise Refused(413, f"Content-Length {length!r} refused: at most {limit} bytes")
    chunks, size = [], 0

    async def collect():
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"request body refused: more than {limit} bytes")
            chunks.append(chunk)
    try:
        await asyncio.wait_for(collect(), timeout_s)
    except asyncio.TimeoutError:
        raise Refused(408, f"request body not received within {timeout_s:g} s") from None
    return b"".join(chunks)


def parse_switch(body: bytes) -> bool:
    """``{"enabled": true|false}`` -> the boolean; a string, number or null is refused, never
    read as truthy (the string "false" would otherwise turn the raw view on)."""
    expected = 'expected JSON {"enabled": true|false}'
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, f"the body is not JSON: {expected}") from None
    if not isinstance(data, dict) or "enabled" not in data:
        raise Refused(400, f"no field \"enabled\": {expected}")
    value = data["enabled"]
    if not isinstance(value, bool):
        kind = "null" if value is None else {str: "a string", int: "a number", float: "a number"}.get(
            type(value), f"a JSON {type(value).__name__}")
        raise Refused(400, f"field \"enabled\" is {json.dumps(value)} ({kind}): expected true or false "
                           "(a JSON boolean)")
    return value


# -- how many at once --------------------------------------------------------------------
class StalledClient(Exception):
    """A streaming client read nothing for SEND_TIMEOUT_S: its response ends."""


class StreamSlots:
    """At most ``limit`` MJPEG responses at once; each holds its slot until it ends."""

    def __init__(self, limit: int, send_timeout_s: float = SEND_TIMEOUT_S):
        self.limit, self.open, self.send_timeout_s = limit, 0, send_timeout_s

    def full(self) -> bool:
        return self.open >= self.limit

    def hold(self, response):
        """An ASGI app that runs ``response`` in a slot and always closes its generator: an
        abandoned stream must not keep polling the feed. A part that cannot be sent within
        ``send_timeout_s`` (the client stopped reading, and the server's buffers are full) ends the
        response and frees the slot; the server then closes the connection."""
        async def app(scope, receive, send):
            async def timed_send(message):
                try:
                    await asyncio.wait_for(send(message), self.send_timeout_s)
                except asyncio.TimeoutError:
                    raise StalledClient() from None
            self.open += 1
            try:
                await response(scope, receive, timed_send)
            except StalledClient:
                pass      # the response is unfinished: uvicorn closes the connection
            finally:
                self.open -= 1
                await response.body_iterator.aclose()
        return app


def bounded_protocol(base, max_connections: int, header_timeout_s: float = HEADER_TIMEOUT_S):
    """uvicorn's HTTP protocol class ``base``, closing each connection accepted past
    ``max_connections`` at once, and any connection that has not completed a request's headers in
    ``header_timeout_s``: the first request, or the next one on a kept-alive connection, whose headers
    a slowloris client may send a byte at a time (uvicorn's keep-alive timer stops at the first byte).
    A response that is still running (an MJPEG stream) keeps its connection; the stream's own send
    timeout bounds it (StreamSlots). Slow or idle clients cannot pile up open sockets. (uvicorn's
    ``limit_concurrency`` only answers 503 once a request has arrived.)"""
    class BoundedProtocol(base):
        def connection_made(self, transport):
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                transport.close()
                return
            self._checked_cycle = None
            asyncio.get_event_loop().call_later(header_timeout_s, self._close_if_idle)

        def _close_if_idle(self):
            """Every ``header_timeout_s``: close unless a new request began since the last look, or the
            current one is still being answered."""
            if self.transport.is_closing():
                return
            cycle = self.cycle
            idle = cycle is None or (cycle is self._checked_cycle and cycle.response_complete)
            if idle:
                self.transport.close()
                return
            self._checked_cycle = cycle
            asyncio.get_event_loop().call_later(header_timeout_s, self._close_if_idle)
    return BoundedProtocol
