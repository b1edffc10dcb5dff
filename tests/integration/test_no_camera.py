"""Where a camera source cannot be opened: `camera:N` with no camera is one clear line at
once, not OpenCV's warnings from each capture backend and half a minute of reconnecting."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.boots]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "schema1-prgan-digits-onnx"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="camera:N is checked against /dev/videoN on Linux")
def test_a_camera_that_is_not_there_is_one_line_at_once():
    pytest.importorskip("cv2")
    index = next(n for n in range(90, 200) if not os.path.exists(f"/dev/video{n}"))
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("SENSORVEIL_TRUSTED_KEYS", None)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "sensorveil", "run", str(FIXTURE), "--source", f"camera:{index}",
                           "--frames", "1"], env=environment, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - start
    error = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(error) == 1 and f"camera:{index}: no camera at index {index}" in error[0], done.stderr[-2000:]
    assert f"/dev/video{index} does not exist" in error[0]
    assert elapsed < 20, elapsed          # the interpreter and the bundle load; no reconnecting back-off
