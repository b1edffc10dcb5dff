"""The stream's read-ahead thread: frames decoded and pre-processed in their own
thread while the model runs, with the same outputs, counters and errors as one frame at a time."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import InputError
from sensorveil.runtime.sources import BadFrame, Frame, Source, SourceDisconnected
from sensorveil.runtime.stream import Stream, load_for_stream, run_stream, stream_threads
from sensorveil.runtime.synthetic_depth import make_identities, render_depth_frame

pytestmark = [pytest.mark.exports, pytest.mark.trains]


class MixedFrames(Source):
    """Kinect frames with an unreadable frame, a frame of the wrong kind and a gap in the numbering."""

    def open(self):
        identity = make_identities(1, seed=5)[0]
        self.frames = [render_depth_frame(identity, i % 2, np.random.default_rng(i), center=(212, 256))
                       for i in range(12)]

    def read(self):
        if self._count >= len(self.frames):
            return None
        index = self._next_index()
        if index == 3:
            raise BadFrame("frame 3 could not be decoded")
        data = self.frames[index]
        if index == 6:
            data = np.zeros((2, 2, 2, 2), np.uint16)    # not a depth image: spoilt in pre-processing
        return Frame(data, index / 30, index + (5 if index >= 9 else 0), "depth")   # numbers 9-13 never arrive


def stream_outputs(bundle, prepare_ahead):
    source = MixedFrames("mixed")
    source.open()
    stream = Stream(Privatizer.load(bundle, seed=7), source, prepare_ahead=prepare_ahead)
    outputs = [result.output for result in stream]
    return outputs, stream.report()


def test_reading_ahead_gives_the_same_frames_counters_and_errors_in_order(depth_bundle):
    ahead, ahead_report = stream_outputs(depth_bundle, True)
    one_by_one, report = stream_outputs(depth_bundle, False)
    assert ahead_report["prepared_ahead"] and not report["prepared_ahead"]
    assert len(ahead) == len(one_by_one) == 10
    assert all(np.array_equal(a, b) for a, b in zip(ahead, one_by_one))   # same seed, same order
    for key in ("frames_in", "frames_out", "bad", "dropped", "errors", "preprocessors"):
        assert ahead_report[key] == report[key], key
    assert report["bad"] == 2 and report["dropped"] == 5
    assert "frame 3 could not be decoded" in report["errors"][0]


def test_a_source_failure_in_the_reader_thread_reaches_the_caller(depth_bundle):
    class Unplugged(MixedFrames):
        def read(self):
            if self._count == 2:
                raise SourceDisconnected("kinect unplugged")
            return super().read()

    source = Unplugged("unplugged")
    source.open()
    stream = Stream(Privatizer.load(depth_bundle), source, prepare_ahead=True)
    with pytest.raises(SourceDisconnected, match="unplugged"):
        list(stream)
    assert stream.report()["frames_out"] == 2


def test_stopping_early_stops_the_reader_thread(depth_bundle):
    source = MixedFrames("mixed")
    source.open()
    for _ in Stream(Privatizer.load(depth_bundle), source, prepare_ahead=True):
        break
    assert not [thread for thread in threading.enumerate() if thread.name == "sensorveil read-ahead"]
    source.open()
    report = run_stream(Privatizer.load(depth_bundle), source, frames=2)
    assert report["frames_out"] == 2
    assert not [thread for thread in threading.enumerate() if thread.name == "sensorveil read-ahead"]


def test_a_stream_leaves_one_core_to_the_reader_unless_told(depth_bundle):
    assert stream_threads(cores=2) == 1 and stream_threads(cores=4) == 3 and stream_threads(cores=1) == 1
    assert load_for_stream(depth_bundle).backend_options["threads"] == stream_threads()
    assert load_for_stream(depth_bundle, threads=3).backend_options["threads"] == 3
    with pytest.raises(InputError):
        load_for_stream(depth_bundle, output="index")   # options still reach the Privatizer


def test_the_benchmark_puts_the_stream_beside_the_model_alone(depth_bundle):
    from sensorveil.benchmarks.stream_bench import benchmark_stream
    report = benchmark_stream(depth_bundle, "synthetic-depth:3", frames=20, warmup=2)
    assert report["prepared_ahead"] and report["model_threads"] == stream_threads()
    assert report["model_alone_fps"] > 0
    assert report["stream_vs_model"] == pytest.approx(report["fps"] / report["model_alone_fps"])
    # CPU time per frame, every thread counted: a reader thread's work makes it more than wall per frame
    assert report["cpu_ms_per_frame"] > 0
    assert report["cpu_cores_busy"] == pytest.approx(report["cpu_ms_per_frame"] * report["fps"] / 1e3)
