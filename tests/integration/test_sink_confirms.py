"""A video sink confirms what it wrote: a file that does not hold every frame the stream delivered (here the file
size limit a full disk imposes) fails the run with one line, instead of exit 0 and a file with no frame."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.boots, pytest.mark.exports, pytest.mark.trains]

REPO = Path(__file__).resolve().parents[2]
LIMITED = r"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)        # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from sensorveil.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run_limited(limit, bundle, video, report):
    return subprocess.run([sys.executable, "-c", LIMITED, str(limit), "run", str(bundle), "--source",
                           "synthetic-depth", "--frames", "40", "--sink", f"video:{video}", "--json", str(report)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_video_the_disk_could_not_hold_fails_the_run(depth_bundle, tmp_path):
    done = run_limited(30_000, depth_bundle, tmp_path / "out.mp4", tmp_path / "report.json")
    assert done.returncode == 1, done.stderr[-2000:]
    line = [entry for entry in done.stderr.splitlines() if "frames written, the file holds" in entry]
    assert line and "out.mp4: 40 frames written" in line[0]


def test_a_video_that_fits_is_confirmed(depth_bundle, tmp_path):
    done = run_limited(1 << 30, depth_bundle, tmp_path / "out.mp4", tmp_path / "report.json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "report.json").read_text())["sink_error"] is None
