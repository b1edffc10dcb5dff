"""The web preview, end to end: the CLI serves real HTTP on 127.0.0.1 from the real walkway clip,
a plain HTTP client reads its MJPEG streams, and headless Chromium renders the page.

The browser test skips (and says why) where Chromium or Playwright is missing on a developer's
machine; under CI=true it fails instead, because CI must run it (.ci/run installs Chromium).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import WALKWAY

cv2 = pytest.importorskip("cv2", reason="the preview needs OpenCV (pip install opencv-python-headless)")
pytest.importorskip("starlette", reason="the web preview needs the web extra (pip install 'sensorveil[web]')")
pytest.importorskip("uvicorn", reason="the web preview needs the web extra (pip install 'sensorveil[web]')")

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("SENSORVEIL_ARTIFACTS", REPO / "test-artifacts"))
START_TIMEOUT_S = 60     # loading the bundle and opening the clip on a busy 2-core machine
STOP_TIMEOUT_S = 10
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


class PreviewServer:
    """`sensorveil preview BUNDLE --source walkway.avi --web 127.0.0.1:0` in a subprocess; the
    URL is read from its first line (port 0: the system picks a free port, no race)."""

    def __init__(self, bundle: Path, *extra: str, env: dict | None = None):
        self.env = {**os.environ, **(env or {})}
        if not WALKWAY.is_file():
            pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
        self.args = [sys.executable, "-m", "sensorveil", "preview", str(bundle), "--source", str(WALKWAY),
                     "--web", "127.0.0.1:0", *extra]

    def __enter__(self) -> "PreviewServer":
        self.process = subprocess.Popen(self.args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=self.env)
        # the console names the backend that ran first, then the URL: read until the URL, within the deadline
        deadline, lines, found = time.monotonic() + START_TIMEOUT_S, [], None
        while found is None and len(lines) < 10 and time.monotonic() < deadline:
            line = _read_line(self.process.stdout, max(deadline - time.monotonic(), 0.1))
            if not line:
                break
            lines.append(line)
            found = re.search(r"http://\S+/", line)
        if not found:
            self.__exit__()
            pytest.fail(f"the preview did not announce its URL: {lines!r}\n{self.stderr[-2000:]}")
        self.url = found.group(0)
        return self

    def __exit__(self, *exc) -> None:
        """Ctrl-C, as a user stops it; killed if it does not stop within STOP_TIMEOUT_S."""
        self.process.send_signal(signal.SIGINT)
        try:
            self.output, self.stderr = self.process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.output, self.stderr = self.process.communicate()
            pytest.fail(f"the preview did not stop within {STOP_TIMEOUT_S} s of Ctrl-C")

    def get(self, path: str, timeout: float = 10):
        return urllib.request.urlopen(self.url + path, timeout=timeout)

    def json(self, path: str) -> dict:
        with self.get(path) as response:
            return json.load(response)

    def post_json(self, path: str, data: dict) -> tuple[int, dict]:
        request = urllib.request.Request(self.url + path, data=json.dumps(data).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)

    def wait_for(self, condition, timeout_s: float = 30, what: str = "condition"):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            time.sleep(0.2)
        pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


def _read_line(stream, timeout_s: float) -> str | None:
    """readline() with a deadline: a server that hangs at start-up must not hang the test run."""
    line = []
    reader = threading.Thread(target=lambda: line.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    return line[0] if line else None


def read_mjpeg_parts(response, count: int) -> list[bytes]:
    """The first ``count`` JPEG parts of a multipart/x-mixed-replace response, as a plain client
    (a dashboard, curl) reads them: boundary line, headers, Content-Length bytes."""
    boundary = re.search(r"boundary=(\S+)", response.headers["Content-Type"]).group(1).encode()
    parts = []
    while len(parts) < count:
        line = response.readline().strip()
        if not line:
            continue
        assert line == b"--" + boundary, line
        headers = {}
        while (header := response.readline().strip()):
            key, _, value = header.decode().partition(":")
            headers[key.lower()] = value.strip()
        assert headers["content-type"] == "image/jpeg"
        parts.append(response.read(int(headers["content-length"])))
    return parts


def frames_out(server: PreviewServer) -> int:
    return server.json("api/status")["frames_out"]


# -- parsing the address ------------------------------------------------------------------
def test_web_address_binds_loopback_unless_a_host_is_given():
    from sensorveil.runtime.errors import InputError
    from sensorveil.runtime.web_preview import parse_web_address
    assert parse_web_address("8080") == ("127.0.0.1", 8080)
    assert parse_web_address("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_web_address("[::1]:0") == ("::1", 0)
    for bad in ("eighty", "70000", ":8080", "host:"):
        with pytest.raises(InputError, match="expected PORT or HOST:PORT"):
            parse_web_address(bad)


# -- real HTTP on 127.0.0.1 ---------------------------------------------------------------
@pytest.fixture(scope="module")
def server(depth_bundle):
    with PreviewServer(depth_bundle) as running:
        yield running


@pytest.mark.exports
@pytest.mark.trains
def test_mjpeg_streams_carry_decodable_jpegs_of_both_views(server):
    for view in ("privatized", "raw"):
        with server.get(f"stream/{view}.mjpg") as response:
            assert response.headers["Content-Type"].startswith("multipart/x-mixed-replace")
            parts = read_mjpeg_parts(response, 3)
        images = [cv2.imdecode(np.frombuffer(part, np.uint8), cv2.IMREAD_COLOR) for part in parts]
        assert all(image is not None and image.shape == (360, 360, 3) for image in images), view


@pytest.mark.exports
@pytest.mark.trains
def test_counters_move_and_privacy_figures_are_the_manifests(server, depth_bundle):
    first = server.wait_for(lambda: frames_out(server) or None, what="the first frame")
    server.wait_for(lambda: frames_out(server) > first, what="frames_out to grow")
    status = server.json("api/status")
    assert status["status"] == "running" and status["bad"] == 0 and status["fps"] > 0
    assert set(status["stages_ms_p50"]) >= {"capture", "preprocess", "inference", "postprocess"}
    metrics = json.loads((depth_bundle / "manifest.json").read_text())["metrics"]
    shown = {figure["key"]: figure["value"] for figure in server.json("api/bundle")["figures"]}
    assert shown["probing_acc_private"] == metrics["probing_acc_private"]
    assert shown["random_star"] == metrics["random_star"]


@pytest.mark.exports
@pytest.mark.trains
def test_a_remote_viewer_cannot_switch_the_raw_view_back_on(depth_bundle):
    """The switch's policy, through the app in-process: only a loopback client may re-enable raw."""
    from starlette.testclient import TestClient

    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.web_preview import LiveFeed, build_app
    privatizer = Privatizer.load(depth_bundle)
    feed = LiveFeed(privatizer, lambda: open_source("synthetic-depth:1", frames=1))   # never started
    app = build_app(feed, privatizer.manifest, bound=("0.0.0.0", 8080))
    remote = TestClient(app, base_url="http://127.0.0.1:8080", client=("203.0.113.7", 50000))
    assert remote.post("/api/raw", json={"enabled": False}).json() == {"raw_enabled": False}
    assert remote.post("/api/raw", json={"enabled": True}).status_code == 403
    assert remote.get("/frame/raw.jpg").status_code == 404
    local = TestClient(app, base_url="http://127.0.0.1:8080", client=("127.0.0.1", 50000))
    assert local.post("/api/raw", json={"enabled": True}).json() == {"raw_enabled": True}


@pytest.mark.exports
@pytest.mark.trains
def test_raw_switch_ends_open_raw_streams_and_refuses_new_ones(depth_bundle):
    with PreviewServer(depth_bundle) as server:
        with server.get("stream/raw.mjpg") as response:
            read_mjpeg_parts(response, 1)
            assert server.post_json("api/raw", {"enabled": False}) == (200, {"raw_enabled": False})
            started = time.monotonic()
            while response.read(65536):      # the open response ends, not only new ones
                assert time.monotonic() - started < 5, "raw stream still open 5 s after the switch"
        with pytest.raises(urllib.error.HTTPError) as refused:
            server.get("stream/raw.mjpg")
        assert refused.value.code == 404
        assert server.json("api/status")["raw_enabled"] is False
    assert "frames_out" in server.output     # Ctrl-C printed the stream report


@pytest.mark.exports
@pytest.mark.trains
def test_no_raw_never_serves_raw_frames(depth_bundle):
    with PreviewServer(depth_bundle, "--no-raw") as server:
        server.wait_for(lambda: frames_out(server) or None, what="the first frame")
        with server.get("") as page:
            assert 'src="stream/raw.mjpg"' not in page.read().decode()
        for path in ("stream/raw.mjpg", "frame/raw.jpg"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                server.get(path)
            assert refused.value.code == 404
        assert server.post_json("api/raw", {"enabled": True})[0] == 403   # not even from the board
        with server.get("frame/privatized.jpg") as response:
            assert response.read(2) == b"\xff\xd8"                         # JPEG start of image


# -- locked down: what a hostile page or client sends is refused --------------------------
PORT = 8080
HERE = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def app_client(depth_bundle):
    """The app in-process, bound to 127.0.0.1:8080, the raw view switched off; requests come from
    the board itself (loopback), the one client that may turn it back on."""
    from starlette.testclient import TestClient

    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.web_preview import LiveFeed, build_app
    privatizer = Privatizer.load(depth_bundle)
    feed = LiveFeed(privatizer, lambda: open_source("synthetic-depth:1", frames=1))   # never started
    feed.set_raw(False)
    client = TestClient(build_app(feed, privatizer.manifest, bound=("127.0.0.1", PORT)), base_url=HERE,
                        client=("127.0.0.1", 50000), raise_server_exceptions=False)
    client.feed = feed
    return client


@pytest.mark.exports
@pytest.mark.trains
def test_a_foreign_page_cannot_turn_the_raw_view_on(app_client):
    """The probe: a text/plain POST with a foreign Origin and Host (a simple request, which a browser
    sends cross-origin without asking), and its variants, each refused; the raw view stays off."""
    body = '{"enabled": true}'
    attempts = [
        {"Content-Type": "text/plain", "Origin": "http://evil.example", "Host": f"evil.example:{PORT}"},
        {"Content-Type": "text/plain", "Origin": "http://evil.example"},                 # right Host
        {"Content-Type": "application/json", "Origin": "http://evil.example"},
        {"Content-Type": "application/json", "Origin": "null"},                          # sandboxed frame
        {"Content-Type": "application/json", "Origin": f"http://localhost:{PORT}"},      # another origin
        {"Content-Type": "application/json", "Host": f"evil.example:{PORT}"},            # DNS rebinding
        {"Content-Type": "application/json", "Host": "127.0.0.1:9999"},
        {"Content-Type": "text/plain"},                                                  # no-cors / form
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
    ]
    for headers in attempts:
        response = app_client.post("/api/raw", content=body, headers=headers)
        assert response.status_code == 403, (headers, response.status_code, response.text)
        assert response.json()["error"] and "Traceback" not in response.text
        assert app_client.feed.raw_enabled is False, headers
    own = {"Content-Type": "application/json", "Origin": HERE}                             # the page itself
    assert app_client.post("/api/raw", content=body, headers=own).json() == {"raw_enabled": True}
    for host in (f"localhost:{PORT}", f"[::1]:{PORT}"):
        response = app_client.post("/api/raw", json={"enabled": False}, headers={"Host": host})
        assert response.json() == {"raw_enabled": False}, host


@pytest.mark.parametrize("value", ['"false"', '"true"', "0", "1", "null", "[]", "{}"])
@pytest.mark.exports
@pytest.mark.trains
def test_enabled_must_be_a_json_boolean(app_client, value):
    response = app_client.post("/api/raw", content='{"enabled": %s}' % value,
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert '"enabled"' in error and value in error and "expected true or false" in error, error
    assert app_client.feed.raw_enabled is False


@pytest.mark.exports
@pytest.mark.trains
def test_a_large_body_is_refused_before_it_is_read(app_client):
    big = b'{"enabled": false, "pad": "' + b"x" * 2048 + b'"}'
    response = app_client.post("/api/raw", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text
    chunked = app_client.post("/api/raw", content=iter([big[:512], big[512:]]),     # no Content-Length
                              headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413, chunked.text


@pytest.mark.exports
@pytest.mark.trains
def test_gets_from_a_foreign_host_and_unknown_views_are_refused_cleanly(app_client):
    for path in ("/frame/privatized.jpg", "/stream/privatized.mjpg", "/frame/raw.jpg", "/api/status", "/"):
        response = app_client.get(path, headers={"Host": "rebound.example"})
        assert response.status_code == 403, path
    for path in ("/frame/bogus.jpg", "/stream/bogus.mjpg", "/frame/..%2fraw.jpg", "/nothing"):
        response = app_client.get(path)
        assert response.status_code == 404, (path, response.status_code)
        assert "Traceback" not in response.text and "Error" not in response.text, path


def _raw_request(url: str, head: str, body: bytes = b"", wait_s: float = 5.0) -> bytes:
    """Send ``head`` (and ``body``) on a plain socket, keep it open, and return what comes back
    within ``wait_s``: the server must answer without waiting for a body it was promised."""
    import socket
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait_s) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except socket.timeout:
            pass
    return answer


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture(scope="module")
def limited_server(depth_bundle):
    with PreviewServer(depth_bundle, env={"SENSORVEIL_WEB_MAX_CONNECTIONS": "8",
                                          "SENSORVEIL_WEB_MAX_STREAMS": "2"}) as running:
        yield running


@pytest.mark.exports
@pytest.mark.trains
def test_a_huge_body_is_413_without_being_buffered(limited_server):
    """A 300 MB Content-Length, and a chunked body past the limit: each refused while the client
    still has most of its body to send (the server never waited for it)."""
    host = limited_server.url.split("/")[2]
    head = f"POST /api/raw HTTP/1.1\nHost: {host}\nContent-Type: application/json\n"
    answer = _raw_request(limited_server.url, head + "Content-Length: 300000000\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"connection: close" in answer.lower()                          # the rest is not read either
    chunk = b"1000\r\n" + b" " * 4096 + b"\r\n"                            # 4 KiB of a longer body
    answer = _raw_request(limited_server.url, head + "Transfer-Encoding: chunked\n", chunk)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


@pytest.mark.exports
@pytest.mark.trains
def test_open_connections_and_streams_are_bounded(limited_server):
    import socket
    host, port = limited_server.url.split("/")[2].split(":")
    pid = limited_server.process.pid
    before = _open_fds(pid)
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(200)]   # slow clients
    try:
        time.sleep(1.0)
        assert _open_fds(pid) <= before + 8 + 2, "200 idle clients held more than the 8 connections allowed"
    finally:
        for sock in idle:
            sock.close()
    limited_server.wait_for(lambda: _open_fds(pid) <= before + 2, timeout_s=15, what="the idle sockets to close")
    streams = [limited_server.get("stream/privatized.mjpg") for _ in range(2)]
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            limited_server.get("stream/privatized.mjpg")
        assert refused.value.code == 503
    finally:
        for response in streams:
            response.close()
    limited_server.wait_for(lambda: _try_stream(limited_server), timeout_s=10, what="a stream slot to free")
    assert frames_out(limited_server) > 0                                   # still serving


def _try_stream(server) -> bool:
    try:
        with server.get("stream/privatized.mjpg") as response:
            return bool(read_mjpeg_parts(response, 1))
    except urllib.error.HTTPError:
        return False


# -- a real browser -----------------------------------------------------------------------
def chromium_or_skip() -> str:
    """Debian's chromium (never a downloaded browser); skip with the reason, or fail under CI."""
    executable = os.environ.get("SENSORVEIL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "Playwright is not installed (pip install 'sensorveil[dev]')"
    if executable is None:
        missing = "Chromium is not installed (apt-get install chromium; .ci/run does this)"
    if missing:
        if IN_CI:
            pytest.fail(f"CI must run the browser test: {missing}")
        pytest.skip(missing)
    return executable


BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_page_in_headless_chromium_shows_both_views_and_live_counters(depth_bundle, capsys):
    executable = chromium_or_skip()
    from playwright.sync_api import sync_playwright
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "preview.png"
    with PreviewServer(depth_bundle) as server, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=BROWSER_ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 820})
            page.set_default_timeout(30_000)
            # "load" never fires while MJPEG images keep loading; the DOM is what the test needs
            page.goto(server.url, wait_until="domcontentloaded")
            for view in ("privatized", "raw"):   # frames arrived and were decoded by the browser
                page.wait_for_function(f"document.getElementById('{view}').naturalWidth > 0")
            page.wait_for_function("Number(document.getElementById('count-frames_out').textContent) > 0")
            first = int(page.text_content("#count-frames_out"))
            page.wait_for_function(f"Number(document.getElementById('count-frames_out').textContent) > {first}")
            assert page.text_content("#status") == "running"
            assert "probing attacker on the private attribute" in page.text_content("body")
            page.screenshot(path=str(screenshot))
            page.click("#raw-switch")            # the switch hides the raw view in the page too
            page.wait_for_function("document.getElementById('raw-off').style.display !== 'none'")
        finally:
            browser.close()
        assert server.json("api/status")["raw_enabled"] is False
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with capsys.disabled():
        print(f"\nweb preview screenshot: {screenshot}")


ATTACK_PAGE = """<!doctype html><title>elsewhere</title><script>
(async () => {
  const results = [];
  const attempts = [
    ["text/plain", {method: "POST", body: '{"enabled": true}', headers: {"Content-Type": "text/plain"}}],
    ["no-cors json", {method: "POST", mode: "no-cors", body: '{"enabled": true}',
                      headers: {"Content-Type": "application/json"}}],
  ];
  for (const [name, init] of attempts) {
    try {
      const r = await fetch("TARGET" + "api/raw", init);
      results.push(name + ": " + (r.type === "opaque" ? "opaque" : r.status));
    }
    catch (e) { results.push(name + ": " + e.name); }
  }
  window.results = results; document.title = "done";
})();
</script>"""


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_a_page_from_another_origin_in_chromium_cannot_turn_the_raw_view_on(depth_bundle):
    """A real browser on the board (loopback, so the old loopback-only check let it through) opens
    a page from another origin (another port) whose script posts {"enabled": true} to the preview
    as text/plain and as a no-cors JSON request; the server's own state says the raw view is still off."""
    executable = chromium_or_skip()
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from playwright.sync_api import sync_playwright

    with PreviewServer(depth_bundle) as server:
        assert server.post_json("api/raw", {"enabled": False}) == (200, {"raw_enabled": False})
        page_bytes = ATTACK_PAGE.replace("TARGET", server.url).encode()

        class Elsewhere(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page_bytes)))
                self.end_headers()
                self.wfile.write(page_bytes)

            def log_message(self, *args):
                pass

        other = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
        threading.Thread(target=other.serve_forever, daemon=True).start()
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=executable, args=BROWSER_ARGS, timeout=60_000)
                try:
                    page = browser.new_page()
                    page.set_default_timeout(30_000)
                    page.goto(f"http://127.0.0.1:{other.server_address[1]}/", wait_until="domcontentloaded")
                    page.wait_for_function("document.title === 'done'")
                    results = page.evaluate("window.results")
                finally:
                    browser.close()
        finally:
            other.shutdown()
            other.server_close()
        assert len(results) == 2, results
        status = server.json("api/status")
        assert status["raw_enabled"] is False, (results, status)
        with pytest.raises(urllib.error.HTTPError) as refused:
            server.get("frame/raw.jpg")
        assert refused.value.code == 404
