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

MJPEG over plain HTTP is what a browser's <img>, curl and most sensor dashboards read without
any player. The server is Starlette on uvicorn (the ``web`` extra); both are imported here only,
so the rest of the runtime stays numpy plus one backend.

The raw view: ``--no-raw`` never encodes or serves raw frames. Without it, the page's switch
turns the raw view off for every viewer; only a viewer on the board itself (a loopback
address, e.g. through an SSH tunnel) may turn it back on, so a remote viewer who was shown
"only what leaves the device" cannot undo that.

The server binds 127.0.0.1 unless told otherwise (``--web 0.0.0.0:8080``). Nothing is
encrypted or authenticated: expose it on a trusted network only.
"""
import asyncio
import collections
import html
import ipaddress
import json
import socket
import sys
import threading
import time
from typing import Callable, Optional, Tuple

import numpy as np

from sensorveil.runtime.errors import BackendUnavailableError, InputError
from sensorveil.runtime.preview import ViewComposer
from sensorveil.runtime.privatizer import Privatizer
from sensorveil.runtime.sources import Source, _cv2
from sensorveil.runtime.stream import STAGES, Counters, Stream, sigterm_as_interrupt

DEFAULT_HOST = "127.0.0.1"
BOUNDARY = "sensorveil-frame"
JPEG_QUALITY = 85
PANEL_PX = 360            # panel height in the page
RECENT_FRAMES = 60        # window of the FPS and stage-time figures
POLL_S = 0.02             # how often an MJPEG response looks for a new frame
RESEND_S = 1.0            # resend the last frame this often, so a dead client is noticed
COUNTER_KEYS = ("frames_in", "frames_out", "bad", "dropped", "reconnects")


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


# -- the stream, in a background thread --------------------------------------------------
class LiveFeed:
    """Runs the stream in a thread and keeps the newest JPEG of each view plus live counters.

    A recorded source (a file) is played at its own frame rate, as its camera delivered it,
    so the page shows motion at the real speed; ``loop`` replays it from the start when it
    ends. A live source runs as fast as it delivers.
    """

    def __init__(self, privatizer: Privatizer, open_source: Callable[[], Source], frames: "int | None" = None,
                 raw: bool = True, loop: bool = False, panel_px: int = PANEL_PX):
        self.privatizer, self.open_source = privatizer, open_source
        self.max_frames, self.loop = frames, loop
        self.composer = ViewComposer(privatizer, panel_px)
        self.raw_locked = not raw            # --no-raw: can never be switched on
        self.raw_enabled = raw
        self.lock = threading.Lock()
        self.closing = threading.Event()     # set on shutdown: the thread and the MJPEG responses end
        self.jpeg = {"raw": None, "privatized": None}
        self.sequence = 0
        self.status, self.error = "starting", None
        self.source_uri = None
        self.finished = Counters()           # counters of earlier passes over a looped file
        self.stream: "Stream | None" = None
        self.passes = 0
        self.recent_times = collections.deque(maxlen=RECENT_FRAMES)
        self.recent_stages = collections.deque(maxlen=RECENT_FRAMES)
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="sensorveil-feed", daemon=True)

    # -- control ---------------------------------------------------------------------------
    def start(self) -> "LiveFeed":
        self.thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self.closing.set()
        self.thread.join(timeout_s)

    def set_raw(self, enabled: bool) -> None:
        with self.lock:
            if enabled and self.raw_locked:
                raise PermissionError("the raw view was switched off with --no-raw")
            self.raw_enabled = bool(enabled)
            if not enabled:
                self.jpeg["raw"] = None      # the last raw frame is not kept around either

    def latest(self, view: str) -> "Tuple[int, Optional[bytes]]":
        with self.lock:
            return self.sequence, self.jpeg[view]

    # -- the loop --------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self.closing.is_set():
                with self.open_source() as source:
                    self.source_uri = source.uri
                    self._play(source)
                self.passes += 1
                if not self.loop or self.closing.is_set() or self._frames_left() == 0:
                    break
                self._finish_pass()
            self.status = "stopped" if self.closing.is_set() else "ended"
        except Exception as error:   # shown on the page and re-raised by serve(); the server stays up
            self.status, self.error = "failed", f"{type(error).__name__}: {error}"

    def _play(self, source: Source) -> None:
        self.stream = Stream(self.privatizer, source, frames=self._frames_left())
        interval = 1.0 / source.fps if (source.fps and not source.live) else 0.0
        next_due = time.monotonic()
        self.status = "running"
        for result in self.stream:
            self._publish(result)
            if self.closing.is_set():
                break
            if interval:   # a file plays at its camera's rate; a live sensor sets its own pace
                next_due = max(next_due + interval, time.monotonic() - interval)
                self.closing.wait(max(0.0, next_due - time.monotonic()))

    def _publish(self, result) -> None:
        cv2 = _cv2()
        if self.stream.counters.frames_out == 1:
            self.composer.fit(result)      # camera bundles: panels of the frames' aspect
        views = ("raw", "privatized") if self.raw_enabled else ("privatized",)
        encoded = {}
        for view in views:
            ok, data = cv2.imencode(".jpg", self.composer.panel_image(result, view),
                                    [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
            if ok:
                encoded[view] = data.tobytes()
        with self.lock:
            self.jpeg["privatized"] = encoded.get("privatized")
            self.jpeg["raw"] = encoded.get("raw") if self.raw_enabled else None
            self.sequence += 1
            self.recent_times.append(time.monotonic())
            self.recent_stages.append(result.timings_ms)

    def _frames_left(self) -> "int | None":
        if self.max_frames is None:
            return None
        done = self.finished.frames_out + (self.stream.counters.frames_out if self.stream else 0)
        return max(self.max_frames - done, 0)

    def _finish_pass(self) -> None:
        for key in COUNTER_KEYS:
            setattr(self.finished, key, getattr(self.finished, key) + getattr(self.stream.counters, key))
        self.stream = None

    # -- figures ---------------------------------------------------------------------------
    def counters(self) -> dict:
        current = self.stream.counters if self.stream is not None else Counters()
        with self.lock:
            times, stages = list(self.recent_times), list(self.recent_stages)
        fps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
        stage_p50 = {stage: float(np.median([t[stage] for t in stages])) for stage in STAGES if stages}
        preprocessor = getattr(self.stream.preprocessor, "name", None) if self.stream is not None else None
        return {"status": self.status, "error": self.error, "source": self.source_uri, "preprocessor": preprocessor,
                "backend": self.privatizer.backend_name, "fps": fps,
                **{key: getattr(self.finished, key) + getattr(current, key) for key in COUNTER_KEYS},
                "stages_ms_p50": stage_p50, "passes": self.passes, "raw_enabled": self.raw_enabled,
                "raw_locked": self.raw_locked, "uptime_s": time.monotonic() - self.started,
                "recent_errors": list(current.errors)}

    def report(self) -> dict:
        """The last pass's stream report, with the counters summed over every pass."""
        report = self.stream.report() if self.stream is not None else {}
        report.update({key: value for key, value in self.counters().items() if key in COUNTER_KEYS})
        report["passes"] = self.passes
        return report


# -- the bundle's audited figures --------------------------------------------------------
FIGURES = (   # manifest metrics key, label; a missing key is left out of the page
    ("probing_acc_private", "probing attacker on the private attribute"),
    ("tree_acc_private", "tree attacker on the private attribute"),
    ("random_star", "Random* (best guess from the prior)"),
    ("protocol_acc_private", "fixed D_z on privatized output (paper protocol)"),
    ("original_acc_private", "fixed D_z on raw data"),
    ("probing_acc_useful", "utility probe on the useful attribute"),
    ("protocol_acc_useful", "fixed D_y on privatized output (paper protocol)"),
    ("utility_threshold", "utility threshold Acc(D_y)"),
)


def privacy_figures(manifest: dict) -> dict:
    """What the page and /api/bundle show: the manifest's measured figures, never recomputed here."""
    mechanism = manifest.get("mechanism", {})
    metrics = manifest.get("metrics", {}) or {}
    figures = [{"key": key, "label": label, "value": metrics[key]} for key, label in FIGURES
               if isinstance(metrics.get(key), (int, float))]
    validation = [{key: record.get(key) for key in ("backend", "graph", "precision", "status")}
                  for record in manifest.get("validation", [])]
    return {"mechanism": mechanism.get("name"), "kind": mechanism.get("kind"),
            "useful": mechanism.get("useful"), "private": mechanism.get("private"),
            "dataset": (manifest.get("dataset") or {}).get("name"), "figures": figures,
            "threshold_met": metrics.get("threshold_met"), "validation": validation}


# -- the web app -------------------------------------------------------------------------
def build_app(feed: LiveFeed, manifest: dict):
    """The Starlette app over ``feed``: the page, MJPEG streams, JSON counters, the raw switch."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
        from starlette.routing import Route
    except ImportError:
        raise BackendUnavailableError("the web preview needs Starlette and uvicorn: "
                                      "pip install 'sensorveil[web]' (or starlette uvicorn)") from None
    figures = privacy_figures(manifest)
    figures["signature"] = feed.privatizer.signature   # trusted, signed, unsigned (runtime.trust)

    def raw_refused(view: str):
        if view == "raw" and not feed.raw_enabled:
            return Response("the raw view is off: only privatized frames are served\n", status_code=404,
                            media_type="text/plain")
        return None

    async def mjpeg(view: str):
        last, last_sent = -1, 0.0
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

    async def page(request: Request):
        return HTMLResponse(render_page(figures, feed))

    async def stream(request: Request):
        view = request.path_params["view"]
        refused = raw_refused(view)
        return refused or StreamingResponse(mjpeg(view), media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}",
                                            headers={"Cache-Control": "no-store"})

    async def frame(request: Request):
        view = request.path_params["view"]
        refused = raw_refused(view)
        if refused:
            return refused
        _, data = feed.latest(view)
        if data is None:
            return Response("no frame yet\n", status_code=503, media_type="text/plain")
        return Response(data, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    async def status(request: Request):
        return JSONResponse(feed.counters(), headers={"Cache-Control": "no-store"})

    async def bundle(request: Request):
        return JSONResponse(figures)

    async def raw_switch(request: Request):
        try:
            enabled = (await request.json())["enabled"]
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": 'expected JSON {"enabled": true|false}'}, status_code=400)
        host = request.client.host if request.client else ""
        if enabled and not is_loopback(host):
            return JSONResponse({"error": "only a viewer on the board itself may turn the raw view on"},
                                status_code=403)
        try:
            feed.set_raw(bool(enabled))
        except PermissionError as error:
            return JSONResponse({"error": str(error)}, status_code=403)
        return JSONResponse({"raw_enabled": feed.raw_enabled})

    views = "{view:str}"
    return Starlette(routes=[
        Route("/", page),
        Route(f"/stream/{views}.mjpg", stream),
        Route(f"/frame/{views}.jpg", frame),
        Route("/api/status", status),
        Route("/api/bundle", bundle),
        Route("/api/raw", raw_switch, methods=["POST"]),
    ])


def serve(privatizer: Privatizer, open_source: Callable[[], Source], address: str = "8080",
          frames: "int | None" = None, raw: bool = True, loop: bool = False, announce=print) -> dict:
    """Serve the page until Ctrl-C (SIGINT/SIGTERM); return the stream report."""
    try:
        import uvicorn
    except ImportError:
        raise BackendUnavailableError("the web preview needs Starlette and uvicorn: "
                                      "pip install 'sensorveil[web]' (or starlette uvicorn)") from None
    host, port = parse_web_address(address)
    feed = LiveFeed(privatizer, open_source, frames=frames, raw=raw, loop=loop)
    app = build_app(feed, privatizer.manifest)
    sock = _listening_socket(host, port)
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
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, lifespan="off")
    server = _feed_server(config, feed)
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


def _feed_server(config, feed: LiveFeed):
    """A uvicorn.Server that also tells the feed to close on Ctrl-C, so open MJPEG responses end."""
    import uvicorn

    class FeedServer(uvicorn.Server):
        def handle_exit(self, sig, frame):
            feed.closing.set()
            super().handle_exit(sig, frame)
    return FeedServer(config)


# -- the page ----------------------------------------------------------------------------
def _percent(value) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "-"


def render_page(figures: dict, feed: LiveFeed) -> str:
    """One self-contained page (no external scripts or fonts: boards are often offline)."""
    esc = html.escape
    attrs = lambda value: ", ".join(value) if isinstance(value, list) else str(value)  # noqa: E731
    rows = "".join(f"<tr><td>{esc(f['label'])}</td><td class=num>{_percent(f['value'])}</td></tr>"
                   for f in figures["figures"])
    signature = figures.get("signature") or {}
    rows += f"<tr><td>bundle signature</td><td class=num>{esc(str(signature.get('status', '-')))}</td></tr>"
    met = figures["threshold_met"]
    if met is not None:
        rows += f"<tr><td>utility threshold met</td><td class=num>{'yes' if met else 'NO'}</td></tr>"
    checks = "".join(f"<li>{esc(str(r['backend']))} {esc(str(r['precision']))}: {esc(str(r['status']))}</li>"
                     for r in figures["validation"]) or "<li>none recorded</li>"
    stage_rows = "".join(f"<tr><td>{stage} ms (p50)</td><td class=num id=stage-{stage}>-</td></tr>"
                         for stage in STAGES)
    counter_rows = "".join(f"<tr><td>{key.replace('_', ' ')}</td><td class=num id=count-{key}>-</td></tr>"
                           for key in ("fps",) + COUNTER_KEYS)
    return PAGE.format(
        mechanism=esc(str(figures["mechanism"])), dataset=esc(str(figures["dataset"])),
        useful=esc(attrs(figures["useful"])), private=esc(attrs(figures["private"])),
        figure_rows=rows or "<tr><td colspan=2>the manifest records no privacy figures</td></tr>",
        checks=checks, counter_rows=counter_rows, stage_rows=stage_rows, boundary=BOUNDARY,
        raw_display="" if feed.raw_enabled else "none",
        raw_src='src="stream/raw.mjpg"' if feed.raw_enabled else "", off_display="none" if feed.raw_enabled else "",
        initial=json.dumps({"raw_enabled": feed.raw_enabled, "raw_locked": feed.raw_locked}))


PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>sensorveil preview: {mechanism}</title>
<meta name=viewport content="width=device-width, initial-scale=1">
<style>
body {{ font-family: system-ui, sans-serif; margin: 16px; background: #111; color: #eee; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }} .sub {{ color: #aaa; margin: 0 0 12px; }}
.views {{ display: flex; gap: 12px; flex-wrap: wrap; }}
figure {{ margin: 0; }} figcaption {{ font-size: 14px; color: #ccc; margin-bottom: 4px; }}
.view img, .off {{ width: {panel}px; height: {panel}px; background: #222; display: block; }}
.off {{ display: flex; align-items: center; justify-content: center; text-align: center; color: #aaa;
        border: 1px dashed #555; padding: 16px; box-sizing: border-box; }}
.panels {{ display: flex; gap: 24px; flex-wrap: wrap; margin-top: 16px; }}
table {{ border-collapse: collapse; font-size: 14px; }} td {{ padding: 2px 10px 2px 0; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
h2 {{ font-size: 15px; margin: 0 0 6px; }} ul {{ margin: 4px 0; padding-left: 18px; font-size: 13px; }}
button {{ margin-top: 10px; padding: 6px 10px; }} #status {{ font-weight: bold; }}
</style></head><body>
<h1>sensorveil live preview: {mechanism}</h1>
<p class=sub>trained on {dataset}; keeps <b>{useful}</b>, hides <b>{private}</b>.
Status: <span id=status>starting</span> <span id=error></span><br>
<span id=path-note></span></p>
<div class=views>
 <figure class=view id=raw-figure style="display:{raw_display}"><figcaption>raw input (stays on the device)</figcaption>
  <img id=raw alt="raw view" {raw_src}></figure>
 <figure class=view id=raw-off style="display:{off_display}"><figcaption>raw input</figcaption>
  <div class=off>raw view off: this server sends only privatized frames</div></figure>
 <figure class=view><figcaption>privatized (what leaves the device)</figcaption>
  <img id=privatized alt="privatized view" src="stream/privatized.mjpg"></figure>
</div>
<button id=raw-switch>Stop serving the raw view</button>
<div class=panels>
 <div><h2>Live counters</h2><table>{counter_rows}{stage_rows}</table></div>
 <div><h2>Audited privacy figures (bundle manifest)</h2><table>{figure_rows}</table>
  <h2 style="margin-top:10px">Export validation</h2><ul>{checks}</ul></div>
</div>
<script>
const state = {initial};
function showRaw(on) {{
  document.getElementById('raw-figure').style.display = on ? '' : 'none';
  document.getElementById('raw-off').style.display = on ? 'none' : '';
  const button = document.getElementById('raw-switch');
  button.textContent = on ? 'Stop serving the raw view' : 'Serve the raw view again (on the board only)';
  button.disabled = state.raw_locked;
  if (!on) document.getElementById('raw').removeAttribute('src');
  else if (!document.getElementById('raw').getAttribute('src'))
    document.getElementById('raw').src = 'stream/raw.mjpg?' + Date.now();
}}
document.getElementById('raw-switch').onclick = async () => {{
  const response = await fetch('api/raw', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},
                                          body: JSON.stringify({{enabled: !state.raw_enabled}})}});
  const answer = await response.json();
  if (response.ok) {{ state.raw_enabled = answer.raw_enabled; showRaw(state.raw_enabled); }}
  else document.getElementById('error').textContent = answer.error;
}};
function put(id, text) {{ const cell = document.getElementById(id); if (cell) cell.textContent = text; }}
async function poll() {{
  try {{
    const c = await (await fetch('api/status', {{cache: 'no-store'}})).json();
    put('status', c.status); put('error', c.error || '');
    put('path-note', c.preprocessor === 'fit-to-bundle' ? 'Frames reach this bundle through the demonstration path ' +
        '(grayscale, centre crop, resize): it shows the cost and the effect on an image; the bundle protects ' +
        'only the kind of data it was trained on.' : '');
    put('count-fps', c.fps.toFixed(1));
    for (const key of ['frames_in', 'frames_out', 'bad', 'dropped', 'reconnects']) put('count-' + key, c[key]);
    for (const [stage, ms] of Object.entries(c.stages_ms_p50)) put('stage-' + stage, ms.toFixed(2));
    if (c.raw_enabled !== state.raw_enabled) {{ state.raw_enabled = c.raw_enabled; showRaw(c.raw_enabled); }}
  }} catch (e) {{ put('status', 'server unreachable'); }}
  setTimeout(poll, 500);
}}
showRaw(state.raw_enabled); poll();
</script></body></html>
""".replace("{panel}", str(PANEL_PX))
