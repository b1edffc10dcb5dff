"""`sensorveil preview BUNDLE --source SRC --web [HOST:]PORT`: the preview as a web page served
from the board, for the many boards that have no display.

    GET  /                        the page: raw | privatized side by side, live counters, the
                                  bundle's audited privacy figures (from its manifest)
    GET  /stream/privatized.mjpg  MJPEG (multipart/x-mixed-replace) of what leaves the device
    GET  /stream/raw.mjpg         MJPEG of the model's raw input (404 once the raw view is off)
    GET  /frame/privatized.jpg    the newest privatized frame as one JPEG (raw: /frame/raw.jpg)
    GET  /api/status              counters as JSON (FPS, frames in/out/bad/dropped, stage times)
    GET  /api/bundle              the manifest's privacy figures and validation as JSON
    POST /api/raw                 {"enabled": false} stops serving the raw view to everyone
                                  (Content-Type: application/json; a real JSON boolean)

MJPEG over plain HTTP is what a browser's <img>, curl and most sensor dashboards read without
any player. The server is Starlette on uvicorn (the ``web`` extra); both are imported here only,
so the rest of the runtime stays numpy plus one backend.

The raw view: ``--no-raw`` never encodes or serves raw frames. Without it, the page's switch
turns the raw view off for every viewer; only a viewer on the board itself (a loopback
address, e.g. through an SSH tunnel) may turn it back on, so a remote viewer who was shown
"only what leaves the device" cannot undo that.

The server binds 127.0.0.1 unless told otherwise (``--web 0.0.0.0:8080``). Nothing is
encrypted or authenticated: expose it on a trusted network only.

Requests from other origins are refused (web_security): every request must name this server in
its Host header, a request with an Origin must come from this server's own page, and the raw
switch takes only a small application/json body. Open them as http://127.0.0.1:PORT/ (or the
address the server is bound to); a name such as board.local is refused.

Settings (an argument to ``serve``, else the environment, else the default):

    SENSORVEIL_WEB_MAX_CONNECTIONS  connections held open at once (32); more are closed on accept
    SENSORVEIL_WEB_MAX_STREAMS      MJPEG responses at once (8); more are a 503
"""
import asyncio
import ipaddress
import socket
import sys
import time
from typing import Callable, Tuple

from sensorveil.runtime.errors import BackendUnavailableError, InputError
from sensorveil.runtime.privatizer import Privatizer
from sensorveil.runtime.sources import Source
from sensorveil.runtime.stream import sigterm_as_interrupt
from sensorveil.runtime.web_feed import COUNTER_KEYS, JPEG_QUALITY, PANEL_PX, VIEWS, LiveFeed  # noqa: F401 (API)
from sensorveil.runtime.web_page import BOUNDARY, FIGURES, privacy_figures, render_page  # noqa: F401 (API)
from sensorveil.runtime.web_security import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_STREAMS,
    HEADER_TIMEOUT_S,
    MAX_CONNECTIONS_ENV,
    MAX_STREAMS_ENV,
    SEND_TIMEOUT_S,
    AddressCheck,
    HostGuard,
    Refused,
    StreamSlots,
    bounded_protocol,
    limit_setting,
    parse_switch,
    read_small_body,
    require_json,
)

DEFAULT_HOST = "127.0.0.1"
POLL_S = 0.02             # how often an MJPEG response looks for a new frame
RESEND_S = 1.0            # resend the last frame this often, so a dead client is noticed
WEB_EXTRA = ("the web preview needs Starlette and uvicorn: "
             "pip install 'sensorveil[web]' (or starlette uvicorn)")


def parse_web_address(text: str) -> "Tuple[str, int]":
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, port); a bare port binds 127.0.0.1."""
    host, sep, port = str(text).strip().rpartition(":")
    host = host.strip("[]") if sep else DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535 or (sep and not host):
        raise InputError(f"--web {text!r}: expected PORT or HOST:PORT (e.g. 8080, 0.0.0.0:8080); "
                         "port 0 picks a free one")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- the web app -------------------------------------------------------------------------
class PreviewRoutes:
    """The app's handlers over one feed: the page, MJPEG streams, JSON counters, the raw switch."""

    def __init__(self, feed: LiveFeed, figures: dict, max_streams: int = DEFAULT_MAX_STREAMS,
                 send_timeout_s: float = SEND_TIMEOUT_S):
        from starlette import responses
        self.feed, self.figures, self.responses = feed, figures, responses
        self.slots = StreamSlots(max_streams, send_timeout_s)

    def raw_refused(self, view: str):
        if view not in VIEWS:   # an unknown name is a plain 404, never a lookup error
            return self.responses.Response(f"no such view: expected one of {', '.join(VIEWS)}\n",
                                           status_code=404, media_type="text/plain")
        if view == "raw" and not self.feed.raw_enabled:
            return self.responses.Response("the raw view is off: only privatized frames are served\n",
                                           status_code=404, media_type="text/plain")
        return None

    async def mjpeg(self, view: str):
        feed, last, last_sent = self.feed, -1, 0.0
        while not feed.closing.is_set():
            if view == "raw" and not feed.raw_enabled:
                return   # switched off: the open response ends too, not just new ones
            sequence, data = feed.latest(view)
            now = time.monotonic()
            if data is not None and (sequence != last or now - last_sent > RESEND_S):
                last, last_sent = sequence, now
                yield (f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(data)}\r\n\r\n"
                       .encode() + data + b"\r\n")
            else:
                await asyncio.sleep(POLL_S)

    async def page(self, request):
        return self.responses.HTMLResponse(render_page(self.figures, self.feed))

    async def stream(self, request):
        view = request.path_params["view"]
        refused = self.raw_refused(view)
        if refused:
            return refused
        if self.slots.full():
            return self.responses.Response(
                f"too many open streams (at most {self.slots.limit}, {MAX_STREAMS_ENV}); try again later\n",
                status_code=503, media_type="text/plain", headers={"Retry-After": "5"})
        return self.slots.hold(self.responses.StreamingResponse(
            self.mjpeg(view), media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}",
            headers={"Cache-Control": "no-store"}))

    async def frame(self, request):
        view = request.path_params["view"]
        refused = self.raw_refused(view)
        if refused:
            return refused
        _, data = self.feed.latest(view)
        if data is None:
            return self.responses.Response("no frame yet\n", status_code=503, media_type="text/plain")
        return self.responses.Response(data, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    async def status(self, request):
        return self.responses.JSONResponse(self.feed.counters(), headers={"Cache-Control": "no-store"})

    async def bundle(self, request):
        return self.responses.JSONResponse(self.figures)

    async def raw_switch(self, request):
        """Host and Origin were checked by HostGuard; here the body: JSON, small, a real boolean."""
        JSONResponse = self.responses.JSONResponse
        try:
            require_json(request.headers.get("content-type"))
            enabled = parse_switch(await read_small_body(request))
        except Refused as refused:
            # after a refused body the connection closes: the rest of it is not read and discarded
            close = {"Connection": "close"} if refused.status in (408, 413) else None
            return JSONResponse({"error": refused.message}, status_code=refused.status, headers=close)
        host = request.client.host if request.client else ""
        if enabled and not is_loopback(host):
            return JSONResponse({"error": "only a viewer on the board itself may turn the raw view on"},
                                status_code=403)
        try:
            self.feed.set_raw(enabled)
        except PermissionError as error:
            return JSONResponse({"error": str(error)}, status_code=403)
        return JSONResponse({"raw_enabled": self.feed.raw_enabled})


def build_app(feed: LiveFeed, manifest: dict, bound: "Tuple[str, int]" = (DEFAULT_HOST, 8080),
              max_streams: "int | None" = None, send_timeout_s: float = SEND_TIMEOUT_S):
    """The Starlette app over ``feed``: the page, MJPEG streams, JSON counters, the raw switch.
    ``bound``: the (host, port) the server listens on; requests must name it in their Host."""
    try:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.routing import Route
    except ImportError:
        raise BackendUnavailableError(WEB_EXTRA) from None
    figures = privacy_figures(manifest)
    figures["signature"] = feed.privatizer.signature   # trusted, signed, unsigned (runtime.trust)
    routes = PreviewRoutes(feed, figures, limit_setting(max_streams, MAX_STREAMS_ENV, DEFAULT_MAX_STREAMS),
                           send_timeout_s)
    views = "{view:str}"
    return Starlette(routes=[
        Route("/", routes.page),
        Route(f"/stream/{views}.mjpg", routes.stream),
        Route(f"/frame/{views}.jpg", routes.frame),
        Route("/api/status", routes.status),
        Route("/api/bundle", routes.bundle),
        Route("/api/raw", routes.raw_switch, methods=["POST"]),
    ], middleware=[Middleware(HostGuard, check=AddressCheck(*bound))])


def serve(privatizer: Privatizer, open_source: Callable[[], Source], address: str = "8080",
          frames: "int | None" = None, raw: bool = True, loop: bool = False, announce=print,
          max_connections: "int | None" = None, max_streams: "int | None" = None) -> dict:
    """Serve the page until Ctrl-C (SIGINT/SIGTERM); return the stream report. ``max_connections``
    and ``max_streams`` default to SENSORVEIL_WEB_MAX_CONNECTIONS / _MAX_STREAMS, else 32 and 8."""
    try:
        import uvicorn  # noqa: F401  (checked here, before any work; feed_server uses it)
    except ImportError:
        raise BackendUnavailableError(WEB_EXTRA) from None
    host, port = parse_web_address(address)
    max_connections = limit_setting(max_connections, MAX_CONNECTIONS_ENV, DEFAULT_MAX_CONNECTIONS)
    max_streams = limit_setting(max_streams, MAX_STREAMS_ENV, DEFAULT_MAX_STREAMS)
    feed = LiveFeed(privatizer, open_source, frames=frames, raw=raw, loop=loop)
    sock = _listening_socket(host, port)
    app = build_app(feed, privatizer.manifest, bound=(host, sock.getsockname()[1]), max_streams=max_streams)
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{sock.getsockname()[1]}/"
    if not is_loopback(host):
        print(f"warning: the preview is exposed on {host} without encryption or a password"
              + ("; anyone who can reach it sees the RAW sensor view (use --no-raw)" if raw else ""),
              file=sys.stderr, flush=True)
    feed.start()
    announce(f"serving the preview on {url} (Ctrl-C to stop)")
    sys.stdout.flush()
    # graceful shutdown would otherwise wait for endless MJPEG responses; closing ends them
    # the bounded protocol below keeps connections at max_connections; uvicorn's own limit (a 503
    # once connections or tasks reach it) is one above, so it bites only on requests in flight
    server = feed_server(app, feed, max_connections)
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then hands the signal on to the previous
    # handler; SIGTERM's default would kill the process before the report is printed
    try:
        with sigterm_as_interrupt():
            server.run(sockets=[sock])
    except KeyboardInterrupt:   # the normal way to stop
        pass
    finally:
        feed.stop()
        sock.close()
    if feed.error:
        raise InputError(f"the stream failed: {feed.error}")
    return feed.report()


def _listening_socket(host: str, port: int) -> socket.socket:
    """Bound and listening before the URL is announced, so a client that reads it can connect;
    port 0 asks the system for a free port (tests, several previews on one board)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise InputError(f"--web {host}:{port}: cannot listen there ({error.strerror}); "
                         "expected a free port on an address of this machine") from None
    sock.listen(64)
    return sock


def feed_server(app, feed: LiveFeed, max_connections: int, header_timeout_s: float = HEADER_TIMEOUT_S):
    """The uvicorn server of ``app``: its connections bounded (web_security.bounded_protocol: at most
    ``max_connections``, each closed when it starts no request for ``header_timeout_s``)."""
    import uvicorn
    # the bounded protocol keeps connections at max_connections; uvicorn's own limit (a 503 once connections or
    # tasks reach it) is one above, so it bites only on requests in flight
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, lifespan="off",
                            limit_concurrency=max_connections + 1)
    config.load()   # resolves the HTTP protocol class, which is then bounded (the server keeps a loaded config)
    config.http_protocol_class = bounded_protocol(config.http_protocol_class, max_connections, header_timeout_s)
    return _feed_server(config, feed)


def _feed_server(config, feed: LiveFeed):
    """A uvicorn.Server that also tells the feed to close on Ctrl-C, so open MJPEG responses end."""
    import uvicorn

    class FeedServer(uvicorn.Server):
        def handle_exit(self, sig, frame):
            feed.closing.set()
            super().handle_exit(sig, frame)
    return FeedServer(config)
