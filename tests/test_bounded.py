"""Bounded by construction (issue 52, part 1): a bundle's listed sizes are checked before a byte is read, every
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

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "schema1-prgan-digits-onnx"
GIB = 1 << 30

# open_bundle in a child that may not map more than 1 GiB: reading a 3 GiB file whole fails there
LOAD_CAPPED = ("import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
               "from sensorveil.runtime.bundle import open_bundle\nfrom sensorveil.runtime.errors import BundleError\n"
               "try:\n    open_bundle(sys.argv[1])\n    print('loaded')\n"
               "except BundleError as error:\n    print('BundleError', error)\n")


@pytest.mark.parametrize("declared", [3 * GIB, 1000])
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
