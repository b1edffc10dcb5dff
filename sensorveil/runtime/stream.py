"""The sensor loop: read a frame, pre-process, privatize, post-process, hand to a sink.

    with open_source("camera:0") as source:
        report = run_stream(Privatizer.load("bundle"), source, sink=open_sink("udp://10.0.0.2:5005"))

Each frame's time is split into capture / preprocess / inference / postprocess / sink:

* capture:     ``source.read()`` (decoding a video frame, waiting for the sensor)
* preprocess:  frame -> sample (crop, resize; see preprocess.py), input validation and
               normalization to model units (``check_sensor_input`` + ``Privatizer.pipeline.graph_input``; only a
               reshape when the graph takes sensor units)
* inference:   the backend alone (``Privatizer.pipeline.run_model``)
* postprocess: model units -> sensor units (``Privatizer.pipeline.sensor_output``) and ``restore`` (e.g. paste)
* sink:        handing the output on
* units:       (not a separate stage) the Privatizer's share of preprocess + postprocess:
               validation and the sensor<->model unit mapping

A pipeline of more than one stage (PASS's model then its draw, Sanitizer's encoder, latent mechanism
and decoder) runs inside ``Privatizer.__call__``; for it the whole call is timed as inference and
the report says ``"split": "combined"``.

Counters: ``frames_in`` (frames read), ``frames_out`` (privatized and delivered), ``bad``
(unreadable or invalid frames: counted and skipped, the stream goes on), ``dropped`` (gaps in
the sensor's or file's frame numbers, plus outputs a sink failed to deliver) and
``reconnects`` (live source reopened after a disconnect). A recorded source that ends before the
number of frames it announced is reported with ``frames_missing`` (a damaged or truncated file).

Reading ahead: capture and pre-processing of the next frames run in their own thread (``ReadAhead``)
while the model runs on this one, so a stream's frame rate is set by its slowest side rather than
by the sum of all; their stage times are measured in that thread. A bundle whose declared
pre-processor follows frames one at a time (a camera's background model) stays so
(``StagePipeline.prepares_ahead``). The report's ``prepared_ahead`` says which way a stream ran. The
reader reads a :class:`Prefetching` source with ``read_direct()``, so a frame changes threads once.

The pre-processor follows the bundle and each frame: it is chosen per kind of frame (shape, dtype,
modality) and kept for frames of that kind, so one odd frame cannot switch a whole stream to another
path; ``preprocessors`` in the report counts the frames each path took.
"""
import os
import signal
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from sensorveil.runtime.backends import choose_backend
from sensorveil.runtime.bundle import open_bundle
from sensorveil.runtime.errors import InputError, OutputError
from sensorveil.runtime.preprocessor import MAX_PREPROCESSORS, PreprocessorCache, check_preprocessor, name_of  # noqa: F401
from sensorveil.runtime.privatizer import Privatizer
from sensorveil.runtime.sinks import Sink, SinkError
from sensorveil.runtime.sources import BadFrame, Frame, ReadAhead, Source, check_frame
from sensorveil.runtime.spec import check_sensor_input

STAGES = ("capture", "preprocess", "inference", "postprocess", "sink")
CPU_BACKENDS = ("onnxruntime", "openvino", "litert")   # those whose adapters take ``threads``
TIMING_WINDOW = 10000   # frames whose stage times the report's percentiles describe
MAX_ERRORS_KEPT = 5


@dataclass
class Result:
    """One privatized frame: what the preview shows and the sink received."""

    frame: Frame
    sample: np.ndarray        # the model's input in sensor units (raw: stays on the device)
    privatized: np.ndarray    # the privatized sample, same shape
    output: np.ndarray        # what left the device (sample, or a frame with the patch pasted)
    timings_ms: dict


@dataclass
class Prepared:
    """A frame read and pre-processed: all the model stage needs (made ahead when reading ahead)."""

    frame: Frame
    preprocessor: object
    sample: np.ndarray
    context: object
    batched: bool
    model_input: "np.ndarray | None"   # a one-model bundle's graph input; None when the whole call runs
    capture_ms: float
    preprocess_ms: float
    units_in_ms: float


@dataclass
class Spoilt:
    """A frame that was read but could not be pre-processed (counted as bad, in frame order)."""

    frame: Frame
    preprocessor: object
    error: Exception


@dataclass
class Counters:
    frames_in: int = 0
    frames_out: int = 0
    dropped: int = 0
    undelivered: int = 0     # privatized, but the sink failed to take them (also counted in dropped)
    bad: int = 0
    reconnects: int = 0
    errors: list = field(default_factory=list)   # the first few bad-frame reasons, for the log

    def record_error(self, error: Exception) -> None:
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(str(error))



class Stream:
    """Iterate to get one :class:`Result` per privatized frame; ``report()`` at any time.

    ``warmup`` frames are processed and counted but left out of the timings, so one-off
    costs (backend first-run, caches) do not distort the per-stage figures.
    """

    def __init__(self, privatizer: Privatizer, source: Source, sink: "Sink | None" = None,
                 frames: "int | None" = None, warmup: int = 0, depth_output: str = "patch", preprocessor=None,
                 prepare_ahead: "bool | None" = None):
        self.privatizer, self.source, self.sink = privatizer, source, sink
        # the loaded bundle's internals a stream drives: the first graph alone, the units around it, and the
        # frame pre-processor the bundle declares
        self.pipeline = privatizer.pipeline
        self.prepare_ahead = self.pipeline.prepares_ahead if prepare_ahead is None else bool(prepare_ahead)
        self._reader = None            # the ReadAhead thread, started by the first frame
        # reading ahead, _prepare already runs in the reader thread: no second hop through Prefetching's
        self._read = getattr(source, "read_direct", source.read) if self.prepare_ahead else source.read
        self.max_frames, self.warmup, self.depth_output = frames, warmup, depth_output
        if preprocessor is not None:
            check_preprocessor(preprocessor)
        self.preprocessor = preprocessor
        self.fixed_preprocessor = preprocessor is not None   # the caller's choice serves every frame
        self.preprocessors = PreprocessorCache()   # kind of frame -> its pre-processor, bounded (LRU)
        self.preprocessed = {}         # pre-processor name -> frames it prepared
        self.source_ended = False
        self.split = self.pipeline.single_model
        self.counters = Counters()
        # the newest TIMING_WINDOW frames per stage: a stream that runs for days keeps bounded memory
        self.samples_ms = {stage: deque(maxlen=TIMING_WINDOW) for stage in STAGES + ("units",)}
        self.timed_frames = 0
        self.timed_wall_s = 0.0
        self.timed_cpu_s = 0.0         # the process's CPU time (every thread) over the timed frames
        self._last_index: "int | None" = None
        self._unreadable_since_last = 0
        self.unreadable = 0            # frames the source could not read or decode (also in bad)

    def __iter__(self) -> Iterator[Result]:
        timed_since = time.perf_counter() if self.warmup == 0 else None
        cpu_since = time.process_time()
        try:
            while self.max_frames is None or self.counters.frames_out < self.max_frames:
                result = self._next()
                if result is None:
                    break
                if result is False:
                    continue
                if timed_since is not None:
                    for stage, value in result.timings_ms.items():
                        self.samples_ms[stage].append(value)
                    self.timed_frames += 1
                    self.timed_wall_s = time.perf_counter() - timed_since
                    self.timed_cpu_s = time.process_time() - cpu_since
                elif self.counters.frames_out >= self.warmup:
                    timed_since, cpu_since = time.perf_counter(), time.process_time()
                yield result
        finally:   # also when the consumer stops early: the reader must not outlive the source
            self.close()
            self.counters.reconnects = getattr(self.source, "reconnects", 0)

    def _next(self) -> "Result | None | bool":
        """A Result, None at the end of the source, False for a bad frame (counted)."""
        item = self._take_prepared()
        if item is None:
            self.source_ended = True
            return None
        if isinstance(item, BadFrame):          # unreadable: it used a frame number, not a dropped frame
            self._bad(item)
            self._unreadable_since_last += 1
            self.unreadable += 1
            return False
        self.counters.frames_in += 1
        self._count_gap(item.frame.index)
        if item.preprocessor is not None:      # None: a frame refused before any pre-processor saw it
            name = item.preprocessor.name
            self.preprocessed[name] = self.preprocessed.get(name, 0) + 1
        if isinstance(item, Spoilt):
            self._bad(item.error)
            return False
        return self._privatize(item)

    def _prepare(self) -> "Prepared | Spoilt | BadFrame | None":
        """Read and pre-process one frame (the part that may run ahead in its own thread): a Prepared,
        None at the end of the source, or what spoilt the frame. Counting is left to the consumer, so
        the counters stay in one thread and in frame order."""
        clock = time.perf_counter   # seconds (perf_counter_ns needs Python 3.7)
        t_capture = clock()
        try:
            frame = self._read()
        except BadFrame as error:
            return error
        if frame is None:
            return None
        t_pre = clock()
        preprocessor = None
        model_input = None
        try:
            check_frame(frame.data)     # an odd frame is counted bad here, before any pre-processor sees it
            preprocessor = self._preprocessor_for(frame)
            sample, context = preprocessor.prepare(frame)
            t_units_in = clock()
            batched = preprocessor.batched   # a batch per frame (camera crops)
            if self.split and not batched:
                batch, _ = check_sensor_input(sample, self.privatizer.input_spec)
                model_input = self.pipeline.graph_input(batch)
        except InputError as error:
            return Spoilt(frame, preprocessor, error)
        t_ready = clock()
        return Prepared(frame, preprocessor, sample, context, batched, model_input,
                        capture_ms=(t_pre - t_capture) * 1e3, preprocess_ms=(t_ready - t_pre) * 1e3,
                        units_in_ms=(t_ready - t_units_in) * 1e3)

    def _privatize(self, item: "Prepared") -> "Result | bool":
        """Model, post-processing and sink for one prepared frame (always in the consumer's thread)."""
        clock = time.perf_counter
        sample, context, preprocessor = item.sample, item.context, item.preprocessor
        t_infer = clock()
        if item.batched and len(sample) == 0:      # nobody in this frame: nothing to privatize
            privatized = sample
            t_post = clock()
        elif item.model_input is not None:
            model_output = self.pipeline.run_model(item.model_input)
            t_post = clock()
            try:
                privatized = self.pipeline.sensor_output(model_output)[0]
            except OutputError as error:
                self._bad(error)
                return False
        else:
            try:   # a pipeline of several stages validates inside the call: a bad frame is counted here
                known, keys = preprocessor.known(context), preprocessor.keys(context)
                privatized = self.privatizer(sample, known=known, keys=keys)
            except (InputError, OutputError) as error:
                self._bad(error)
                return False
            t_post = clock()
        t_units_out = clock()
        output = preprocessor.restore(privatized, context) if same_samples(privatized, sample) else privatized
        t_sink = clock()
        if self.sink is not None:
            try:
                self.sink.write(output, item.frame)
            except SinkError as error:
                self.counters.dropped += 1
                self.counters.undelivered += 1
                self.counters.record_error(error)
        t_end = clock()
        self.counters.frames_out += 1
        timings = {"capture": item.capture_ms, "preprocess": item.preprocess_ms,
                   "inference": (t_post - t_infer) * 1e3, "postprocess": (t_sink - t_post) * 1e3,
                   "sink": (t_end - t_sink) * 1e3,
                   # the Privatizer's own share of pre/post: validation and the sensor<->model unit mapping
                   "units": item.units_in_ms + (t_units_out - t_post) * 1e3}
        return Result(item.frame, sample, privatized, output, timings)

    # -- reading ahead ----------------------------------------------------------------------
    def _take_prepared(self):
        if not self.prepare_ahead:
            return self._prepare()
        if self._reader is None:
            self._reader = ReadAhead(self._prepare)
        return self._reader.take()

    def close(self) -> None:
        """Stop the read-ahead thread (iteration does this when it ends); the source stays the caller's."""
        if self._reader is not None:
            self._reader.stop()
            self._reader = None

    def _preprocessor_for(self, frame: Frame):
        if not self.fixed_preprocessor:
            kind = (frame.data.shape, frame.data.dtype.str, frame.modality)
            self.preprocessor = self.preprocessors.get_or_make(
                kind, lambda: self.pipeline.make_preprocessor(frame, self.depth_output))
        return self.preprocessor

    def frames_missing(self) -> "int | None":
        """Frames a recorded source announced but never delivered, once it has ended; else None."""
        announced = getattr(self.source, "announced_frames", None)
        if not (self.source_ended and announced):
            return None
        seen = self.counters.frames_in + self.unreadable + max(self.counters.dropped - self.counters.undelivered, 0)
        return max(int(announced) - seen, 0)

    def _bad(self, error: Exception) -> None:
        self.counters.bad += 1
        self.counters.record_error(error)

    def _count_gap(self, index: int) -> None:
        if self._last_index is not None:
            missing = index - self._last_index - 1 - self._unreadable_since_last
            self.counters.dropped += max(missing, 0)
        self._last_index, self._unreadable_since_last = index, 0

    def report(self) -> dict:
        """Counters, per-stage times and end-to-end FPS over the timed (post-warmup) frames."""
        timed = self.timed_frames
        stages = {stage: summarize_ms(values) for stage, values in self.samples_ms.items() if values}
        report = {"source": self.source.uri, "preprocessor": name_of(self.preprocessor),
                  "preprocessors": dict(self.preprocessed),
                  "frames_announced": getattr(self.source, "announced_frames", None),
                  "frames_missing": self.frames_missing(),
                  "split": "stages" if self.split else "combined", "prepared_ahead": self.prepare_ahead,
                  **{key: value for key, value in vars(self.counters).items()},
                  "timed_frames": timed, "warmup_frames": self.warmup, "stages_ms": stages}
        if timed and self.timed_wall_s > 0:
            # end to end: everything the loop did, consumer included, over the timed frames
            report["fps"] = timed / self.timed_wall_s
            report["cpu_ms_per_frame"] = 1e3 * self.timed_cpu_s / timed
            report["cpu_cores_busy"] = self.timed_cpu_s / self.timed_wall_s
            report.update(runtime_overhead(stages))
        return report


# --- the report's figures: per-stage latency summaries and what the runtime adds to the model ---

def summarize_ms(values) -> dict:
    array = np.asarray(values, dtype=np.float64)
    p50, p95 = np.percentile(array, [50, 95])
    return {"mean": float(array.mean()), "p50": float(p50), "p95": float(p95)}


def runtime_overhead(stages: dict) -> dict:
    """What the runtime adds on top of the bare model per frame, from medians (robust to load
    spikes of other processes; the same choice as the benchmark's overhead_ratio_p50).

    ``runtime_added_*``: preprocess + postprocess, i.e. everything the runtime does per frame
    besides the backend, the sensor (capture) and the application's sink; this includes the
    frame-to-sample work (person finding, resizing). ``units_*``: the Privatizer's own part of
    it (input validation and the sensor<->model unit mapping), what the runtime adds to a
    caller who hands it samples.
    """
    median = {stage: stages[stage]["p50"] for stage in stages}
    model = median["inference"]
    added = median.get("preprocess", 0.0) + median.get("postprocess", 0.0)
    units = median.get("units", 0.0)
    return {"model_ms_p50": model, "runtime_added_ms_p50": added, "units_ms_p50": units,
            "runtime_added_fraction": added / model if model > 0 else None,
            "units_fraction": units / model if model > 0 else None}


def can_prepare_ahead(bundle) -> bool:
    """Whether frames of a loaded ``bundle`` may be pre-processed ahead in another thread: not where the
    pre-processor it declares follows them one at a time (a camera's background model is updated by the next
    frame's detection while ``restore`` pastes onto it)."""
    return bundle.declared is None or bundle.declared.prepares_ahead


def stream_threads(cores: "int | None" = None) -> int:
    """CPU threads for the model in a stream that reads ahead: every core but the one the read-ahead
    thread decodes and pre-processes on: model threads on every core fight that thread for one
    (docs/stream_plumbing.md measures each thread count, python scripts/stream_plumbing.py)."""
    return max(1, (cores or os.cpu_count() or 1) - 1)


def load_for_stream(path, backend: str = "auto", threads: "int | None" = None, cpu_policy="shared", **options):
    """``Privatizer.load`` for a stream: a CPU backend gets ``threads`` (default ``stream_threads()``)
    when the stream will read ahead; accelerators and camera bundles keep their defaults. A stream runs
    beside a decoder and a camera app: ``cpu_policy`` "shared" (threads that sleep) by default."""
    bundle = open_bundle(path, trusted_keys=options.pop("trusted_keys", None))
    name, why = choose_backend(bundle, backend)
    if name in CPU_BACKENDS and (threads or can_prepare_ahead(bundle)):
        options["threads"] = threads or stream_threads()
    if options.get("output") is None and bundle.declared is not None:
        options["output"] = bundle.declared.stream_output(bundle.manifest)   # a camera bank's people in colour
    privatizer = Privatizer(bundle, backend=name, cpu_policy=cpu_policy, **options)
    privatizer.backend_why = why      # auto's reasons, not "asked for": the name was resolved here
    return privatizer


def same_samples(privatized: np.ndarray, sample: np.ndarray) -> bool:
    """Whether the privatized batch holds samples to restore into frames: the samples' shape, or the same
    samples in colour (a camera bundle's colour substitutes)."""
    return privatized.shape == sample.shape or privatized.shape == sample.shape + (3,)


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM (what systemd and docker send) ends a stream like Ctrl-C: the report is written and
    the sink's container finalised. Only the main thread may set handlers; elsewhere, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_stream(privatizer: Privatizer, source: Source, sink: "Sink | None" = None, frames: "int | None" = None,
               warmup: int = 0, depth_output: str = "patch", prepare_ahead: "bool | None" = None) -> dict:
    """Run until the source ends, ``frames`` frames are out or Ctrl-C; return the stream's report."""
    stream = Stream(privatizer, source, sink, frames=frames, warmup=warmup, depth_output=depth_output,
                    prepare_ahead=prepare_ahead)
    try:
        with sigterm_as_interrupt():
            for _ in stream:
                pass
    except KeyboardInterrupt:   # an endless sensor stream ends here; its counters still matter
        pass
    finally:
        stream.close()
    return stream.report()
