"""Bounded by construction: a bundle's listed sizes are checked before a byte is read, every
source ends a stall with one error in bounded time, and the web preview drops clients that hold it without
reading or sending."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "schema1-prgan-digits-onnx"
GIB = 1 << 30

# open_bundle in a child that may not map more than 1 GiB: reading a 3 GiB file whole fails there
LOAD_CAPPED = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
               "from sensorveil.runtime.bundle import open_bundle\nfrom sensorveil.runtime.errors import BundleError\n"
               "try:\n    open_bundle(sys.argv[1])\n    print('loaded')\n"
               "except BundleError as error:\n    print('BundleError', error)\n")


@pytest.mark.parametrize("declared", [3 * GIB, 1000])
@pytest.mark.boots
def test_a_sparse_3_gib_file_is_refused_without_reading_it(tmp_path, declared):
    bundle = tmp_path / "bundle"
    shutil.copytree(FIXTURE, bundle)
    with open(bundle / "big.bin", "wb") as handle:
        handle.truncate(3 * GIB)                       # sparse: no disk, but 3 GiB to whoever reads it
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"]["big.bin"] = {"sha256": "0" * 64, "size": declared}
    path.write_text(json.dumps(manifest))
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("SENSORVEIL_TRUSTED_KEYS", None)
    done = subprocess.run([sys.executable, "-c", LOAD_CAPPED, str(bundle)], env=environment, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = "more than the 2147483648 bytes" if declared == 3 * GIB else f"big.bin has {3 * GIB} bytes, the " \
        "manifest says 1000"
    assert done.stdout.startswith("BundleError") and expected in done.stdout, done.stdout


# -- every source has an overall stall limit (part 1c) ----------------------------------------------------
@pytest.fixture()
def silent_server():
    """A real TCP server on localhost that accepts every connection and never sends a byte."""
    import socket
    import threading
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    for connection in held:
        connection.close()
    server.close()


STALLED = ("import sys, time\nfrom sensorveil.runtime.errors import BackendUnavailableError\n"
           "from sensorveil.runtime.sources import Reconnecting\nfrom sensorveil.runtime.sources.video import "
           "OpenCVSource\nstart = time.monotonic()\n"
           "source = Reconnecting(OpenCVSource(sys.argv[1], sys.argv[1], live=True, network_timeout_s=1), "
           "base_delay_s=0.1, max_attempts=1000, stall_limit_s=3)\n"
           "try:\n    source.open()\n    source.read()\n    print('a frame')\n"
           "except BackendUnavailableError as error:\n    print('BackendUnavailableError', error)\n"
           "print(round(time.monotonic() - start))\n")


@pytest.mark.boots
def test_an_http_source_that_never_sends_ends_with_one_error_in_bounded_time(silent_server):
    pytest.importorskip("cv2")
    url = f"http://127.0.0.1:{silent_server}/stream.mjpg"
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", STALLED, url], env=environment, capture_output=True, text=True,
                          timeout=60)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr[-2000:]
    assert lines[0].startswith("BackendUnavailableError") and "no frame for" in lines[0], lines
    assert int(lines[-1]) < 20


# -- the web preview drops clients that hold it (part 1d) --------------------------------------------------
@pytest.fixture()
def preview():
    """The web preview's real server (uvicorn, the bounded protocol) on 127.0.0.1 in a thread, over a live feed
    of the digits fixture on synthetic depth; short timeouts (1 s) and one stream slot, so a test is quick."""
    pytest.importorskip("cv2")
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import socket
    import threading
    import time

    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.web_preview import LiveFeed, _listening_socket, build_app, feed_server
    privatizer = Privatizer.load(FIXTURE, seed=0)
    feed = LiveFeed(privatizer, lambda: open_source("synthetic-depth:0"), loop=True)
    sock = _listening_socket("127.0.0.1", 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)   # accepted sockets inherit it: fills sooner
    port = sock.getsockname()[1]
    app = build_app(feed, privatizer.manifest, bound=("127.0.0.1", port), max_streams=1, send_timeout_s=1)
    server = feed_server(app, feed, max_connections=8, header_timeout_s=1)
    feed.start()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not (server.started and feed.latest("privatized")[1] is not None):
        assert time.monotonic() < deadline, "the preview did not start"
        time.sleep(0.05)
    yield port
    server.should_exit = True
    feed.closing.set()
    thread.join(10)
    feed.stop()
    sock.close()


def connect(port, receive_buffer=None):
    import socket
    client = socket.socket()
    if receive_buffer:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    client.connect(("127.0.0.1", port))
    return client


def read_head(client, timeout=10) -> bytes:
    client.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def closed_by_server(client) -> bool:
    import socket
    client.settimeout(0.2)
    try:
        return client.recv(65536) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_a_kept_alive_connection_that_dribbles_its_next_request_is_closed(preview):
    import time
    client = connect(preview)
    client.sendall(f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{preview}\r\n\r\n".encode())
    assert read_head(client).startswith(b"HTTP/1.1 200")
    slow = f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{preview}\r\nX-Slow: ".encode() + b"a" * 200
    start, closed = time.monotonic(), False
    for byte in slow:                                         # slowloris: a byte every 0.2 s, never the end
        try:
            client.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        if closed_by_server(client):
            closed = True
            break
        if time.monotonic() - start > 10:
            break
    client.close()
    assert closed and time.monotonic() - start < 6


def test_a_stream_whose_client_does_not_read_frees_its_slot(preview):
    import time
    request = f"GET /stream/privatized.mjpg HTTP/1.1\r\nHost: 127.0.0.1:{preview}\r\n\r\n".encode()
    stalled = connect(preview, receive_buffer=4096)
    stalled.sendall(request)                                   # and never reads a byte
    time.sleep(0.5)
    deadline, status = time.monotonic() + 20, b""
    while time.monotonic() < deadline:
        viewer = connect(preview)
        viewer.sendall(request)
        status = read_head(viewer)[:12]
        viewer.close()
        if status == b"HTTP/1.1 200":
            break
        assert status == b"HTTP/1.1 503", status             # the one slot is held
        time.sleep(0.5)
    stalled.close()
    assert status == b"HTTP/1.1 200"                           # the stalled client's slot came free


def test_duplicate_host_headers_are_refused(preview):
    client = connect(preview)
    client.sendall(f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{preview}\r\nHost: 127.0.0.1:{preview}\r\n\r\n"
                   .encode())
    head = read_head(client)
    client.close()
    assert head.startswith(b"HTTP/1.1 400"), head
