"""Streams that survive: damaged and truncated videos, odd frames, SIGTERM,
UDP sink addresses, oversized frames. Each case is run as a user or a device would meet it."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import InputError
from sensorveil.runtime.sinks import open_sink
from sensorveil.runtime.sources import MAX_FRAME_PIXELS, Frame, Source, open_source
from sensorveil.runtime.stream import run_stream
from sensorveil.runtime.synthetic_depth import make_identities, render_depth_frame
from tests.conftest import WALKWAY

cv2 = pytest.importorskip("cv2", reason="stream sources and sinks need OpenCV (pip install opencv-python-headless)")
REPO = Path(__file__).resolve().parents[2]


def numbered_mjpeg(path: Path, frames: int = 40) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25, (160, 120))
    for i in range(frames):
        image = np.full((120, 160, 3), (i * 6) % 255, np.uint8)
        cv2.putText(image, str(i), (40, 80), cv2.FONT_HERSHEY_SIMPLEX, 2, (255, 255, 255), 3)
        writer.write(image)
    writer.release()
    return path


@pytest.mark.exports
@pytest.mark.trains
def test_a_damaged_frame_in_a_video_is_counted_and_the_rest_still_streams(depth_bundle, tmp_path):
    data = bytearray(numbered_mjpeg(tmp_path / "clip.avi").read_bytes())
    jpeg_starts = [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == 0xD8]
    data[jpeg_starts[20]:jpeg_starts[21]] = bytes(jpeg_starts[21] - jpeg_starts[20])   # frame 20 zeroed
    damaged = tmp_path / "damaged.avi"
    damaged.write_bytes(bytes(data))
    with open_source(str(damaged)) as source:
        report = run_stream(Privatizer.load(depth_bundle), source)
    assert report["bad"] >= 1 and "frame 20 of 40 could not be decoded" in report["errors"][0]
    assert report["frames_out"] >= 35          # it went on past the damage instead of ending there


@pytest.mark.exports
@pytest.mark.trains
def test_a_truncated_video_reports_the_frames_it_never_delivered(depth_bundle, tmp_path, capsys):
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    whole = WALKWAY.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole[:len(whole) // 4])
    from sensorveil.cli import main
    out = tmp_path / "report.json"
    code = main(["run", str(depth_bundle), "--source", str(cut), "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["frames_announced"] == 795   # the container's header still says the whole clip
    assert report["frames_missing"] > 400 and report["frames_out"] < 400
    err = capsys.readouterr().err
    assert f"ended {report['frames_missing']} short of that" in err
    # a file that ends short of its own frame count is a damaged source, whatever the share of bad frames
    assert code == 1 and f"ended {report['frames_missing']} frames short of the 795 it announced" in err


@pytest.mark.exports
@pytest.mark.trains
def test_half_a_recording_fails_even_under_the_bad_share_unless_the_user_allows_a_partial_file(depth_bundle,
                                                                                              tmp_path, capsys):
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    whole = WALKWAY.read_bytes()
    cut = tmp_path / "half.avi"
    cut.write_bytes(whole[:len(whole) // 2])          # under half the frames missing: below --max-bad-share 0.5
    from sensorveil.cli import main
    from sensorveil.cli.run import stream_exit_code
    out = tmp_path / "report.json"
    assert main(["run", str(depth_bundle), "--source", str(cut), "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    assert 0 < report["frames_missing"] < report["frames_announced"] / 2
    assert "a damaged or truncated file (--allow-partial" in capsys.readouterr().err
    assert stream_exit_code(report, 0.5, allow_partial=True) == 0     # the user says it may be partial


def test_a_source_that_does_not_know_its_length_says_so_instead_of_a_negative_count(tmp_path):
    import cv2
    clip = tmp_path / "raw.mjpeg"      # a raw MJPEG stream: no container, no frame count
    with open(clip, "wb") as f:
        for k in range(5):
            f.write(cv2.imencode(".jpg", np.full((32, 32, 3), 40 * k, np.uint8))[1].tobytes())
    with open_source(str(clip)) as source:
        assert source.announced_frames is None


@pytest.mark.exports
@pytest.mark.trains
def test_the_preprocessor_follows_each_frame_not_the_first(depth_bundle):
    identity = make_identities(1, seed=3)[0]
    kinect = [render_depth_frame(identity, 0, np.random.default_rng(i), center=(212, 256)) for i in range(4)]

    class OddFirstFrame(Source):
        def open(self):
            self.frames = [np.full((100, 100), 1500, np.uint16)] + kinect

        def read(self):
            if self._count >= len(self.frames):
                return None
            index = self._next_index()
            return Frame(self.frames[index], index / 30, index, "depth")

    source = OddFirstFrame("odd-first")
    source.open()
    report = run_stream(Privatizer.load(depth_bundle), source)
    assert report["frames_out"] == 5
    assert report["preprocessors"]["depth-person-patch"] == 4   # Kinect frames kept the person patch
    assert sum(report["preprocessors"].values()) == 5


@pytest.mark.boots
@pytest.mark.exports
@pytest.mark.trains
def test_sigterm_ends_a_run_like_ctrl_c_with_its_report_and_a_playable_video(depth_bundle, tmp_path):
    video, out = tmp_path / "out.mp4", tmp_path / "report.json"
    process = subprocess.Popen([sys.executable, "-m", "sensorveil", "run", str(depth_bundle), "--source",
                                "synthetic-depth", "--sink", str(video), "--json", str(out)],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (video.is_file() and video.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.2)       # frames are flowing once the sink has written
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err.decode()[-2000:]
    report = json.loads(out.read_text())
    assert report["frames_out"] > 0
    capture = cv2.VideoCapture(str(video))
    readable = 0
    while capture.read()[0]:
        readable += 1
    # the container was finalised: every frame plays (the signal may land between a frame's sink write
    # and its count, so the file can hold one frame more than the report)
    assert report["frames_out"] <= readable <= report["frames_out"] + 1


@pytest.mark.parametrize("target, fragment", [("udp://127.0.0.1:99999", "port 99999 is out of range"),
                                              ("udp://127.0.0.1:0", "port 0 is out of range"),
                                              ("udp://no-such-host.invalid:9000", "cannot resolve host")])
def test_udp_sink_checks_its_address_once_at_open(target, fragment):
    with pytest.raises(InputError, match=fragment):
        open_sink(target)


@pytest.mark.exports
@pytest.mark.trains
def test_udp_sink_address_error_is_one_line_with_exit_2(depth_bundle, capsys):
    from sensorveil.cli import main
    assert main(["run", str(depth_bundle), "--source", "synthetic-depth", "--frames", "2",
                 "--sink", "udp://127.0.0.1:99999"]) == 2
    err = capsys.readouterr().err
    assert "port 99999 is out of range" in err and "Traceback" not in err


@pytest.mark.exports
@pytest.mark.trains
def test_an_oversized_png_is_refused_from_its_header_as_a_bad_frame(depth_bundle, tmp_path):
    identity = make_identities(1, seed=3)[0]
    frame = render_depth_frame(identity, 0, np.random.default_rng(0), center=(212, 256))
    cv2.imwrite(str(tmp_path / "000.png"), frame)
    side = int(MAX_FRAME_PIXELS ** 0.5) + 8
    cv2.imwrite(str(tmp_path / "001.png"), np.zeros((side, side), np.uint16))   # compresses to a few kB
    cv2.imwrite(str(tmp_path / "002.png"), frame)
    with open_source(f"depthdir:{tmp_path}") as source:
        report = run_stream(Privatizer.load(depth_bundle), source)
    assert (report["frames_out"], report["bad"]) == (2, 1)
    assert "exceeds the cap" in report["errors"][0]


class _Scripted:
    """A source that plays a script of frames, BadFrames and other errors, then ends."""

    def __new__(cls, script):
        from sensorveil.runtime.sources import Source

        class Scripted(Source):
            def open(self):
                self.items = iter(script)

            def read(self):
                item = next(self.items, None)
                if isinstance(item, Exception):
                    raise item
                return item
        return Scripted("scripted")


def _frame(index):
    from sensorveil.runtime.sources import Frame
    return Frame(np.full((4, 4), index, np.uint16), float(index), index, "depth")


def test_prefetching_keeps_frames_and_bad_frames_in_order():
    from sensorveil.runtime.sources import BadFrame, Prefetching
    source = Prefetching(_Scripted([_frame(0), BadFrame("torn"), _frame(2), _frame(3)]))
    with source:
        seen = []
        while True:
            try:
                frame = source.read()
            except BadFrame:
                seen.append("bad")
                continue
            if frame is None:
                break
            seen.append(frame.index)
        assert seen == [0, "bad", 2, 3]
        assert source.read() is None          # stays ended
    assert source._reader is None           # the reader thread was stopped on close


def test_prefetching_raises_a_fatal_source_error_in_the_caller_and_ends():
    from sensorveil.runtime.errors import BackendUnavailableError
    from sensorveil.runtime.sources import Prefetching
    source = Prefetching(_Scripted([_frame(0), BackendUnavailableError("camera gone"), _frame(2)]))
    with source:
        assert source.read().index == 0
        with pytest.raises(BackendUnavailableError, match="camera gone"):
            source.read()
        assert source.read() is None


def test_open_source_prefetches_and_close_stops_the_reader():
    import threading

    from sensorveil.runtime.sources import Prefetching, open_source
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY}")
    before = threading.active_count()
    with open_source(str(WALKWAY)) as source:
        assert isinstance(source, Prefetching)
        assert source.read().data.shape == (360, 480, 3)
        assert source.announced_frames and source.fps
    assert threading.active_count() == before


def test_prefetching_starts_its_thread_at_the_first_read_not_at_open():
    from sensorveil.runtime.sources import Prefetching
    before = threading.active_count()
    with Prefetching(_Scripted([_frame(0), _frame(1)])) as source:
        assert source._reader is None and threading.active_count() == before
        assert source.read().index == 0
        assert source._reader is not None
    assert threading.active_count() == before


UNCLOSED_SOURCE = """
import atexit, sys, threading
def readers_left():   # registered first, so it runs after sensorveil's own exit handlers (atexit is LIFO)
    print("readers left at exit:", sum(t.name.startswith("prefetch") and t.is_alive() for t in threading.enumerate()))
atexit.register(readers_left)
from sensorveil.runtime.sources import open_source
source = open_source(sys.argv[1])
source.read()
"""


def test_a_script_that_never_closes_its_source_exits_without_a_reader_thread_left_running():
    """A daemon reader torn down inside OpenCV's decoder aborts the process at exit (CI saw
    'FATAL: exception not rethrown'); an exit handler stops readers first, whoever forgot them."""
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY}")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", UNCLOSED_SOURCE, str(WALKWAY)], capture_output=True, text=True,
                          timeout=120, cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "readers left at exit: 0" in done.stdout, done.stdout


@pytest.mark.exports
@pytest.mark.trains
def test_a_stream_reading_ahead_reads_prefetching_in_its_own_reader_thread(depth_bundle):
    """One thread hop per frame: the stream's reader reads the source itself, Prefetching's thread never
    starts, and frames and bad frames still arrive in order and are counted."""
    from sensorveil.runtime.sources import BadFrame, Prefetching
    from sensorveil.runtime.stream import Stream
    identity = make_identities(1, seed=3)[0]
    frames = [Frame(render_depth_frame(identity, 0, np.random.default_rng(i), center=(212, 256)), i / 30, i,
                    "depth") for i in range(4)]
    readers = []

    class Watched(Prefetching):
        def read_direct(self):
            readers.append(threading.current_thread().name)
            return super().read_direct()

    with Watched(_Scripted([frames[0], BadFrame("torn"), frames[2], frames[3]])) as source:
        stream = Stream(Privatizer.load(depth_bundle), source, prepare_ahead=True)
        indices = [result.frame.index for result in stream]
        assert source._reader is None                      # Prefetching's own thread never started
    assert indices == [0, 2, 3] and stream.report()["bad"] == 1
    assert set(readers) == {"sensorveil read-ahead"}        # every read ran in the stream's reader thread


# -- bounded by construction ---------------------------------------------------------
def test_frames_of_ever_new_sizes_keep_the_preprocessor_cache_at_its_bound():
    """A source whose frame width changes every frame (400 widths) must not grow one pre-processor per width."""
    from sensorveil.runtime import stream as stream_module
    bound = getattr(stream_module, "MAX_PREPROCESSORS", 8)

    class Widening(Source):
        def open(self):
            pass

        def read(self):
            index = self._next_index()
            if index >= 400:
                return None
            width = 9 + index     # never the 8x8 sample shape itself (that would be passed through)
            return Frame(np.full((8, width), index % 256, np.uint8), index / 30, index, "gray")

    fixture = Path(__file__).parents[1] / "fixtures" / "schema1-prgan-digits-onnx"
    stream = stream_module.Stream(Privatizer.load(fixture, seed=0), Widening("widening:"), prepare_ahead=False)
    sizes = [len(stream.preprocessors) for _ in stream]
    assert stream.counters.frames_in == 400 and stream.counters.bad == 0
    assert max(sizes) == bound == len(stream.preprocessors) and bound <= 16
