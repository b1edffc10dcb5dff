"""Stream sources, pre-processing, sinks, the stream loop and the stream benchmark, on real
bundles and real frames (synthetic depth, 16-bit PNG folders, .npy, vtest.avi)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sensorveil.runtime import Privatizer
from sensorveil.runtime.errors import BackendUnavailableError, InputError
from sensorveil.runtime.preprocess import DepthPersonPatch, FitToBundle, find_person
from sensorveil.runtime.sinks import UdpReceiver, open_sink
from sensorveil.runtime.sources import (
    Frame,
    Reconnecting,
    Source,
    SourceDisconnected,
    open_source,
    parse_source,
)
from sensorveil.runtime.stream import Stream, run_stream
from sensorveil.runtime.synthetic_depth import make_identities, render_depth_frame
from tests.conftest import VTEST

cv2 = pytest.importorskip("cv2", reason="stream sources and sinks need OpenCV (pip install opencv-python-headless)")


def depth_frames(n, seed=0):
    with open_source(f"synthetic-depth:{seed}", loop_frames=n, frames=n) as source:
        return [frame.data for frame in source]


def test_synthetic_depth_source_yields_kinect_frames_with_timestamps():
    with open_source("synthetic-depth:1", loop_frames=4, frames=6) as source:
        frames = list(source)
    assert len(frames) == 6
    assert all(f.data.shape == (424, 512) and f.data.dtype == np.uint16 and f.modality == "depth" for f in frames)
    assert [f.index for f in frames] == list(range(6))
    assert np.all(np.diff([f.timestamp for f in frames]) > 0)
    assert np.array_equal(frames[0].data, frames[4].data)   # the rendered walk is replayed


@pytest.mark.parametrize("center", [(120, 140), (300, 380), (212, 256)])
def test_person_finder_centres_the_patch_on_the_person(center):
    person = make_identities(2, seed=3)[0]
    frame = render_depth_frame(person, 0, np.random.default_rng(0), center=center)
    found = find_person(frame, 300.0, 4, (180, 180))
    assert found is not None and np.hypot(found[0] - center[0], found[1] - center[1]) < 20
    patch, (top, left, _) = DepthPersonPatch((180, 180)).prepare(Frame(frame, 0.0, 0, "depth"))
    assert patch.shape == (180, 180) and top <= center[0] < top + 180 and left <= center[1] < left + 180


def test_opencv_and_numpy_person_finders_agree(monkeypatch):
    """The OpenCV fast path (inRange, minMaxLoc, moments) finds the same centre as the numpy one."""
    from sensorveil.runtime import preprocess
    rng = np.random.default_rng(4)
    frames = [
        render_depth_frame(person, step % 2, rng, center=(int(rng.integers(100, 324)), int(rng.integers(100, 412))))
        for step, person in enumerate(make_identities(6, seed=5))
    ]
    fast = [find_person(frame, 300.0, 4, (180, 180)) for frame in frames]
    monkeypatch.setattr(preprocess, "_opencv", lambda: None)
    assert all(found is not None for found in fast)
    assert fast == [find_person(frame, 300.0, 4, (180, 180)) for frame in frames]


def test_empty_floor_keeps_the_frame_centre():
    floor = np.full((424, 512), 2800, dtype=np.uint16)
    assert find_person(floor, 300.0, 4, (180, 180)) is None
    _, (top, left, _) = DepthPersonPatch((180, 180)).prepare(Frame(floor, 0.0, 0, "depth"))
    assert (top, left) == (212 - 90, 256 - 90)


@pytest.mark.exports
@pytest.mark.trains
def test_depth_stream_privatizes_the_patch_and_frame_mode_leaks_nothing_else(depth_bundle):
    privatizer = Privatizer.load(depth_bundle)
    with open_source("synthetic-depth:2", loop_frames=3, frames=3) as source:
        results = list(Stream(privatizer, source, depth_output="frame"))
    assert len(results) == 3
    for result in results:
        assert np.array_equal(result.privatized, privatizer(result.sample))  # the split path == the call
        assert result.output.shape == (424, 512)
        top, left = np.argwhere(result.output > 0).min(axis=0) if result.output.any() else (0, 0)
        window = result.output[top : top + 180, left : left + 180]
        assert np.count_nonzero(result.output) == np.count_nonzero(window)  # nothing outside the patch


@pytest.mark.exports
@pytest.mark.trains
def test_depthdir_counts_a_corrupt_png_as_bad_and_goes_on(depth_bundle, tmp_path):
    for i, frame in enumerate(depth_frames(3)):
        assert cv2.imwrite(str(tmp_path / f"{i:04d}.png"), frame)
    (tmp_path / "0001b.png").write_bytes(b"not a png")
    cv2.imwrite(str(tmp_path / "0002b.png"), np.zeros((424, 512), np.uint8))  # 8-bit: not depth
    with open_source(f"depthdir:{tmp_path}") as source:
        report = run_stream(Privatizer.load(depth_bundle), source)
    assert (report["frames_in"], report["frames_out"], report["bad"], report["dropped"]) == (3, 3, 2, 0)
    assert any("16-bit" in error for error in report["errors"])


@pytest.mark.exports
@pytest.mark.trains
def test_npy_samples_pass_through_and_match_the_privatizer(digits_bundle, tmp_path):
    from sklearn.datasets import load_digits

    samples = load_digits().images[:12].astype(np.float32)
    np.save(tmp_path / "digits.npy", samples)
    privatizer = Privatizer.load(digits_bundle)
    with open_source(f"npy:{tmp_path / 'digits.npy'}") as source:
        outputs = [result.output for result in Stream(privatizer, source)]
    np.testing.assert_allclose(np.stack(outputs), privatizer(samples), rtol=0, atol=1e-5)


@pytest.mark.parametrize("bundle", ["digits_bundle", "schema1-pass"])
def test_a_nan_frame_is_counted_bad_not_fatal(bundle, request, tmp_path):
    """For a one-model bundle and for a pipeline of several stages (PASS: model, then the draw), which
    validates its input inside the Privatizer's call."""
    from pathlib import Path

    path = (
        Path(__file__).parents[1] / "fixtures" / "schema1-pass-digits-onnx"
        if bundle == "schema1-pass"
        else request.getfixturevalue(bundle)
    )
    samples = np.ones((5, 8, 8), np.float32)
    samples[2, 3, 3] = np.nan
    np.save(tmp_path / "x.npy", samples)
    with open_source(f"npy:{tmp_path / 'x.npy'}") as source:
        report = run_stream(Privatizer.load(path), source)
    assert (report["frames_out"], report["bad"]) == (4, 1) and "NaN" in report["errors"][0]


@pytest.mark.exports
@pytest.mark.trains
def test_stage_timings_stay_bounded_on_a_long_stream(digits_bundle, tmp_path, monkeypatch):
    from sensorveil.runtime import stream as stream_module

    monkeypatch.setattr(stream_module, "TIMING_WINDOW", 50)
    np.save(tmp_path / "x.npy", np.ones((180, 8, 8), np.float32))
    with open_source(f"npy:{tmp_path / 'x.npy'}") as source:
        stream = Stream(Privatizer.load(digits_bundle), source)
        for _ in stream:
            pass
    report = stream.report()
    assert all(len(values) <= 50 for values in stream.samples_ms.values())
    assert report["timed_frames"] == 180 and report["frames_out"] == 180


@pytest.mark.exports
@pytest.mark.trains
def test_a_huge_batch_runs_in_chunks_with_the_same_result(digits_bundle):
    from sensorveil.runtime import privatizer as privatizer_module

    p = Privatizer.load(digits_bundle)
    x = np.random.default_rng(0).uniform(0, 16, size=(2500, 8, 8)).astype(np.float32)
    whole = p(x)
    assert whole.shape == (2500, 8, 8) and len(x) > privatizer_module.MAX_CHUNK
    np.testing.assert_allclose(whole[-7:], p(x[-7:]), atol=1e-5)


@pytest.fixture(scope="module")
def vtest():
    if not VTEST.is_file():
        pytest.skip(f"vtest.avi not found at {VTEST} (set SENSORVEIL_SHARED)")
    return VTEST


@pytest.mark.exports
@pytest.mark.trains
def test_video_file_camera_path_matches_opencv_area_resize(depth_bundle, vtest):
    privatizer = Privatizer.load(depth_bundle)
    with open_source(str(vtest)) as source:
        results = list(Stream(privatizer, source, frames=30))
        report_fps = source.fps
    assert [r.frame.index for r in results] == list(range(30))
    assert results[5].frame.timestamp == pytest.approx(5 / report_fps)
    frame = results[10].frame.data  # 480x640 BGR -> centre 480x480 -> 180x180
    gray = cv2.cvtColor(frame[:, 80:560], cv2.COLOR_BGR2GRAY).astype(np.float32)
    expected = cv2.resize(gray, (180, 180), interpolation=cv2.INTER_AREA) * (4500 / 255)
    sample = results[10].sample
    assert sample.dtype == np.uint16 and sample.shape == (180, 180)
    # three 8-bit roundings apart (the reference's grey; the runtime's resize and grey): within 1.5 levels
    assert np.abs(sample.astype(np.float32) - expected).max() <= 1.5 * 4500 / 255


def test_video_files_decode_on_one_thread_frame_for_frame_as_opencv_does(vtest):
    """The reader thread decodes with one FFmpeg thread (sources.DECODER_THREADS), so the decoder keeps
    off the model's cores; the frames are the same as OpenCV's default capture gives."""
    if not hasattr(cv2, "CAP_PROP_N_THREADS"):
        pytest.skip(f"OpenCV {cv2.__version__} cannot set the decoder's threads (4.6+)")
    plain = cv2.VideoCapture(str(vtest))
    with open_source(str(vtest), prefetch=False) as source:
        assert source.capture.get(cv2.CAP_PROP_N_THREADS) == 1
        for _ in range(40):
            ok, expected = plain.read()
            assert ok and np.array_equal(source.read().data, expected)
    plain.release()


@pytest.mark.parametrize("shape", [(360, 480, 3), (480, 640, 3), (200, 331), (181, 190, 4)])
def test_opencv_and_numpy_fits_agree_within_one_source_level(shape):
    """When shrinking (the only case FitToBundle gives to OpenCV), the OpenCV fast path (8-bit
    INTER_AREA, then 8-bit grey) and the numpy path (grey, then float area resampling) are the same
    mapping up to the two 8-bit roundings."""
    from sensorveil.runtime.preprocess import _fit_with_numpy, _fit_with_opencv

    image = np.random.default_rng(sum(shape)).integers(0, 256, size=shape, dtype=np.uint8)
    fast, slow = _fit_with_opencv(cv2, image, 180, 180), _fit_with_numpy(image, 180, 180)
    assert fast.shape == slow.shape == (180, 180) and fast.dtype == np.uint8 and slow.dtype == np.float32
    assert np.abs(fast - slow).max() <= 1.0 + 1e-3
    assert np.abs(fast - slow).mean() < 0.4  # rounding, not a shifted or transposed image


def test_camera_frames_map_to_the_bundle_range_by_one_table():
    """The 8-bit grey image goes through FitToBundle.levels (one lookup), which is the float range map
    of each of the 256 levels: a uint16 depth bundle gets round(level * 4500 / 255)."""
    from sensorveil.runtime.preprocess import FitToBundle
    from sensorveil.runtime.sources import Frame
    from sensorveil.runtime.spec import TensorSpec

    spec = TensorSpec("x", (180, 180), (180, 180), np.dtype(np.uint16), 0, 4500, 0, 4500)
    fit = FitToBundle(spec, (0, 255))
    assert fit.levels.dtype == np.uint16 and fit.levels[255] == 4500 and fit.levels[1] == round(4500 / 255)
    image = np.random.default_rng(3).integers(0, 256, size=(360, 480, 3), dtype=np.uint8)
    sample, _ = fit.prepare(Frame(image, 0.0, 0, "bgr"))
    grey = cv2.cvtColor(cv2.resize(image[:, 60:420], (180, 180), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY)
    assert sample.dtype == np.uint16 and np.array_equal(sample, fit.levels[grey])
    camera = FitToBundle(TensorSpec("x", (180, 180), (180, 180), np.dtype(np.uint8), 0, 255, 0, 255), (0, 255))
    assert camera.levels_are_identity and np.array_equal(camera.prepare(Frame(image, 0.0, 0, "bgr"))[0], grey)


def test_enlarging_frames_keep_the_numpy_area_resampler():
    """OpenCV's INTER_AREA turns bilinear when enlarging; a frame smaller than the bundle must get the
    same area resampling as without OpenCV."""
    from sensorveil.runtime.preprocess import FitToBundle, _fit_with_numpy
    from sensorveil.runtime.sources import Frame
    from sensorveil.runtime.spec import TensorSpec

    spec = TensorSpec("x", (180, 180), (180, 180), np.dtype(np.float32), 0, 255, 0, 255)
    image = np.random.default_rng(0).integers(0, 256, size=(97, 131), dtype=np.uint8)
    sample, _ = FitToBundle(spec, (0, 255)).prepare(Frame(image, 0.0, 0, "gray"))
    assert np.allclose(sample, np.clip(_fit_with_numpy(image[:, 17:114], 180, 180), 0, 255), atol=1e-4)


def test_fit_to_bundle_refuses_vector_bundles():
    from sensorveil.runtime.spec import TensorSpec

    spec = TensorSpec("x", (520,), (520,), np.dtype(np.uint8), 0, 1, 0, 1)
    with pytest.raises(InputError, match="2-D image"):
        FitToBundle(spec, (0, 255))


class FlakySensor(Source):
    """A live sensor that unplugs after `unplug_after` frames and refuses `refusals` reopenings."""

    live = True

    def __init__(self, unplug_after=3, refusals=2, total=6):
        super().__init__("flaky")
        self.unplug_after, self.refusals, self.total, self.opened = unplug_after, refusals, total, 0

    def open(self):
        self.opened += 1
        if 1 < self.opened <= 1 + self.refusals:
            raise SourceDisconnected("still unplugged")

    def read(self):
        if self._count >= self.total:
            return None
        if self._count == self.unplug_after and self.opened == 1:
            raise SourceDisconnected("unplugged")
        index = self._next_index()
        return Frame(np.full((8, 8), index, np.float32), float(index), index, "array")


@pytest.mark.exports
@pytest.mark.trains
def test_a_disconnected_sensor_is_reopened_with_back_off(digits_bundle):
    delays = []
    source = Reconnecting(FlakySensor(), base_delay_s=0.5, max_delay_s=1.5, sleep=delays.append)
    source.open()
    report = run_stream(Privatizer.load(digits_bundle), source)
    assert delays == [0.5, 1.0, 1.5]  # doubled each try, capped
    assert (report["frames_out"], report["reconnects"], report["bad"]) == (6, 1, 0)


def test_a_sensor_that_never_comes_back_gets_one_clear_error():
    source = Reconnecting(FlakySensor(refusals=99), max_attempts=3, sleep=lambda s: None)
    source.open()
    with pytest.raises(BackendUnavailableError, match="gave up after 3 attempts.*still unplugged"):
        list(source)


@pytest.mark.exports
@pytest.mark.trains
def test_frame_number_gaps_count_as_dropped(digits_bundle):
    class Skipping(Source):
        def open(self):
            self.indices = iter([0, 1, 4, 5, 9])

        def read(self):
            index = next(self.indices, None)
            return None if index is None else Frame(np.zeros((8, 8), np.float32), index / 30, index, "array")

    source = Skipping("skipping")
    source.open()
    report = run_stream(Privatizer.load(digits_bundle), source)
    assert (report["frames_out"], report["dropped"]) == (5, 5)


@pytest.mark.exports
@pytest.mark.trains
def test_udp_sink_sends_exactly_the_privatized_output(depth_bundle):
    receiver = UdpReceiver(port=0, host="127.0.0.1", timeout_s=5)
    sent = []
    sink = open_sink(f"udp://127.0.0.1:{receiver.port}")
    try:
        with open_source("synthetic-depth:4", loop_frames=2, frames=2) as source:
            for result in Stream(Privatizer.load(depth_bundle), source, sink=sink):
                sent.append(result.output)
                array, index, timestamp = receiver.receive()  # 180x180 uint16 = 2 datagrams
                assert index == result.frame.index and timestamp == result.frame.timestamp
                assert array.dtype == np.uint16 and np.array_equal(array, result.output)
                assert not np.array_equal(array, result.sample)  # the raw patch is not what travels
    finally:
        sink.close()
        receiver.close()
    assert len(sent) == 2


@pytest.mark.exports
@pytest.mark.trains
def test_png_and_npz_sinks_keep_sensor_units(depth_bundle, tmp_path):
    privatizer = Privatizer.load(depth_bundle)
    for fmt in ("png", "npz"):
        sink = open_sink(f"{fmt}:{tmp_path / fmt}")
        with open_source("synthetic-depth:5", loop_frames=2, frames=2) as source:
            outputs = [r.output for r in Stream(privatizer, source, sink=sink)]
        sink.close()
        files = sorted((tmp_path / fmt).iterdir())
        assert len(files) == 2
        stored = cv2.imread(str(files[1]), -1) if fmt == "png" else np.load(files[1])["output"]
        assert stored.dtype == np.uint16 and np.array_equal(stored, outputs[1])


@pytest.mark.parametrize(
    "uri, fragment",
    [
        ("webcam", "expected one of: camera:N"),
        ("npy:/nonexistent.npy", "file not found"),
        ("depthdir:/nonexistent", "not a folder"),
        ("k4a:/nonexistent.mkv", "recording not found"),
    ],
)
def test_bad_source_uris_get_one_clear_error(uri, fragment):
    with pytest.raises(InputError, match=fragment):
        open_source(uri)


def test_unknown_sink_is_a_clear_error():
    with pytest.raises(InputError, match="udp://HOST:PORT"):
        open_sink("tcp://somewhere")


@pytest.mark.parametrize(
    "uri, module, hint",
    [("kinect", "pylibfreenect2", "libfreenect2"), ("k4a", "pyk4a", "pyk4a"), ("k4a:1", "pyk4a", "pyk4a")],
)
def test_kinect_sources_without_their_library_say_what_to_install(uri, module, hint):
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here; this checks the message when it is not")
    with pytest.raises(BackendUnavailableError, match=hint):
        parse_source(uri).open()


@pytest.mark.parametrize("uri, module", [("kinect", "pylibfreenect2"), ("k4a", "pyk4a")])
def test_kinect_hardware_streams_depth_in_millimetres(uri, module):
    pytest.importorskip(
        module, reason=f"{module} is not installed (needs the sensor's SDK); hardware path unverified here"
    )
    try:
        source = open_source(uri)
    except BackendUnavailableError as error:
        pytest.skip(f"no {uri} device connected: {error}")
    with source:
        frame = source.read()
    assert frame.data.dtype == np.uint16 and frame.data.ndim == 2 and frame.modality == "depth"


@pytest.mark.boots
def test_stream_modules_import_without_torch_sdk_or_opencv():
    code = (
        "import sys, sensorveil.runtime.stream, sensorveil.runtime.sources, sensorveil.runtime.sinks, "
        "sensorveil.runtime.preview, sensorveil.runtime.synthetic_depth, sensorveil.runtime; "
        "bad = [m for m in ('torch', 'sensorveil.sdk', 'sensorveil.export', 'cv2') if m in sys.modules]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.exports
@pytest.mark.trains
def test_benchmark_with_a_source_reports_stream_split_and_labelled_estimates(depth_bundle):
    from sensorveil.benchmarks.bench import benchmark_bundle

    result = benchmark_bundle(
        depth_bundle, backend="onnxruntime", iters=20, warmup=2, source="synthetic-depth:6", stream_frames=20
    )
    row = result["rows"][0]
    for column in (
        "stream_fps",
        "capture_ms",
        "preprocess_ms",
        "inference_ms",
        "postprocess_ms",
        "runtime_added_pct",
        "peak_rss_mb",
    ):
        assert row[column] is not None and row[column] > 0, column
    assert row["frames_out"] == 30 and row["bad"] == 0  # 10 warm-up + 20 timed frames
    assert result["estimates"] and all(e["label"].startswith("ESTIMATE") for e in result["estimates"])
    assert not any(key.startswith("est_") for key in row)  # estimates never enter measured rows
    assert result["device"]["name"]


@pytest.mark.exports
@pytest.mark.trains
def test_cli_run_writes_a_report_and_a_sink(depth_bundle, tmp_path, capsys):
    import json

    from sensorveil.cli import main

    code = main(
        [
            "run",
            str(depth_bundle),
            "--source",
            "synthetic-depth:7",
            "--frames",
            "4",
            "--sink",
            f"npz:{tmp_path / 'out'}",
            "--json",
            str(tmp_path / "report.json"),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["frames_out"] == 4 and len(list((tmp_path / "out").iterdir())) == 4
    assert "inference_ms" in capsys.readouterr().out


@pytest.mark.exports
@pytest.mark.trains
def test_cli_run_fails_when_nothing_is_delivered_or_too_much_is_bad(digits_bundle, tmp_path, capsys):
    from sensorveil.cli import main

    np.save(tmp_path / "x.npy", np.ones((4, 8, 8), np.float32))
    not_a_folder = tmp_path / "not-a-directory"
    not_a_folder.write_text("x")  # (root ignores permissions, so a file stands in the way)
    code = main(["run", str(digits_bundle), "--source", f"npy:{tmp_path / 'x.npy'}", "--sink", f"npz:{not_a_folder}"])
    error = capsys.readouterr().err
    assert code == 2 and "expected a writable directory" in error and "Traceback" not in error
    from sensorveil.cli import stream_exit_code

    every_write_failed = {"frames_out": 3, "undelivered": 3, "bad": 0, "dropped": 3, "errors": ["disk full"]}
    assert stream_exit_code(every_write_failed, 0.5) == 1
    assert "no privatized frame was delivered (first error: disk full)" in capsys.readouterr().err
    bad = np.ones((4, 8, 8), np.float32)
    bad[1:] = np.nan  # 3 of 4 frames bad: over the 0.5 default
    np.save(tmp_path / "bad.npy", bad)
    assert main(["run", str(digits_bundle), "--source", f"npy:{tmp_path / 'bad.npy'}"]) == 1
    assert "75% of the frames were bad, dropped or missing (3 bad" in capsys.readouterr().err
    assert main(["run", str(digits_bundle), "--source", f"npy:{tmp_path / 'bad.npy'}", "--max-bad-share", "0.8"]) == 0
