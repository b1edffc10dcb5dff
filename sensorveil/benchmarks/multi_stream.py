"""`sensorveil benchmark BUNDLE --streams N --source SRC`: how many sensors one board serves.

N sources (the same SOURCE opened N times, each with its own pre-processor, as N cameras would be)
feed one runtime. Each round reads one frame from every source, pre-processes each, privatizes the N
samples in ONE batched call (backends run a batch faster per sample than single calls: one kernel
launch and better use of the cores), and restores each. As in a single stream, the next round is read
and pre-processed in a reader thread while the model runs on this one, and a CPU backend gets every
core but the reader's (camera bundles excepted: see ``can_prepare_ahead``). For every stream count n
in 1, 2, 4, ..., N:

* aggregate FPS: all frames privatized / wall time;
* per-frame latency p50 and p95: a frame waits for its whole round, so its latency is the round's
  work, from the first read to the last restore. Time a prepared round spends in the read-ahead queue
  is left out: a file is read as fast as it decodes, so it queues there, while a live sensor delivers
  at its own rate and finds the queue empty.

A user reads the row where the per-stream FPS still reaches the sensor's rate (30 for a Kinect or a
camera) as the number of sensors one board serves at that rate.
"""
import time
from functools import partial

import numpy as np

from sensorveil.runtime import Privatizer
from sensorveil.runtime.preprocess import make_preprocessor
from sensorveil.runtime.sources import ReadAhead, open_source
from sensorveil.runtime.stream import load_for_stream

SENSOR_FPS = 30.0


def stream_counts(most: int) -> "list[int]":
    """1, 2, 4, ... up to ``most``, and ``most`` itself."""
    counts, n = [], 1
    while n < most:
        counts.append(n)
        n *= 2
    return counts + [most]


def read_round(sources: list, preprocessors: list, input_spec) -> "tuple | None":
    """One frame from every source, pre-processed: (seconds it took, prepared samples); None once one
    has ended."""
    started = time.perf_counter()
    frames = [source.read() for source in sources]
    if any(frame is None for frame in frames):
        return None
    for i, frame in enumerate(frames):
        if preprocessors[i] is None:
            preprocessors[i] = make_preprocessor(frame, input_spec)
    prepared = [pre.prepare(frame) for pre, frame in zip(preprocessors, frames)]
    return time.perf_counter() - started, prepared


def privatize_round(privatizer: Privatizer, preprocessors: list, prepared: list) -> None:
    """The round's samples privatized as one batch, each restored by its own pre-processor."""
    privatized = privatizer(np.stack([sample for sample, _ in prepared]))
    for pre, output, (sample, context) in zip(preprocessors, privatized, prepared):
        if output.shape == sample.shape:
            pre.restore(output, context)


def measure_streams(privatizer: Privatizer, source: str, streams: int, rounds: int, warmup: int = 5) -> dict:
    """One row: ``streams`` sources through one runtime for ``rounds`` timed rounds."""
    ahead = privatizer.pipeline.prepares_ahead
    # reading ahead, the reader thread decodes itself; serial rounds let each source decode ahead.
    # open_source opens each source: opening again would start a second capture of the same file
    opened = [open_source(source, prefetch=not ahead) for _ in range(streams)]
    preprocessors = [None] * streams
    reader = None
    try:
        produce = partial(read_round, opened, preprocessors, privatizer.input_spec)
        reader = ReadAhead(produce, name="sensorveil streams read-ahead") if ahead else None
        next_round = reader.take if reader else produce
        latencies, started = [], None
        for index in range(warmup + rounds):
            if index == warmup:
                started = time.perf_counter()
            item = next_round()
            if item is None:
                break
            reading_s, prepared = item
            begun = time.perf_counter()
            privatize_round(privatizer, preprocessors, prepared)
            if index >= warmup:
                latencies.append((reading_s + time.perf_counter() - begun) * 1e3)
        wall = time.perf_counter() - started if started is not None else 0.0
    finally:
        if reader is not None:
            reader.stop()
        for each in opened:
            each.close()
    if not latencies:
        raise ValueError(f"{source} delivered no frames after the warm-up; expected a source with more frames")
    fps = streams * len(latencies) / wall
    p50, p95 = np.percentile(latencies, [50, 95])
    return {"streams": streams, "rounds": len(latencies), "aggregate_fps": fps, "per_stream_fps": fps / streams,
            "latency_p50_ms": float(p50), "latency_p95_ms": float(p95),
            "keeps_sensor_rate": fps / streams >= SENSOR_FPS}


def benchmark_streams(bundle_dir, source: str, streams: int, rounds: int = 200, backend: str = "auto",
                      log=print) -> dict:
    if streams < 1:
        raise ValueError(f"--streams {streams}: expected 1 or more")
    privatizer = load_for_stream(bundle_dir, backend=backend)
    rows = []
    for n in stream_counts(streams):
        log(f"{n} stream(s) of {source} through one {privatizer.backend_name} runtime")
        rows.append(measure_streams(privatizer, source, n, rounds))
    served = [row["streams"] for row in rows if row["keeps_sensor_rate"]]
    return {"bundle": str(bundle_dir), "source": source, "backend": privatizer.backend_name,
            "batched": True, "read_ahead": privatizer.pipeline.prepares_ahead,
            "model_threads": privatizer.backend_options.get("threads"), "sensor_fps": SENSOR_FPS, "rows": rows,
            "most_streams_at_sensor_rate": max(served) if served else 0}


def format_streams(result: dict) -> str:
    """The terminal table, one row per stream count (fits 80 columns)."""
    lines = [f"{result['source']} x N into one {result['backend']} runtime (one batched call per round)",
             f"{'streams':>7} {'aggregate FPS':>13} {'per stream':>10} {'p50 ms':>8} {'p95 ms':>8}  "
             f"{'>= ' + format(result['sensor_fps'], '.0f') + ' FPS each':>14}"]
    for row in result["rows"]:
        lines.append(f"{row['streams']:7d} {row['aggregate_fps']:13,.1f} {row['per_stream_fps']:10,.1f} "
                     f"{row['latency_p50_ms']:8.2f} {row['latency_p95_ms']:8.2f}  "
                     f"{'yes' if row['keeps_sensor_rate'] else 'no':>14}")
    lines += ["latency: a frame waits for its round (all N frames read, privatized in one batch, restored);",
              "the next round is read ahead while the model runs (its time queued is not latency).",
              f"Of the counts measured, up to {result['most_streams_at_sensor_rate']} stream(s) keep "
              f"{result['sensor_fps']:.0f} FPS each on this machine."]
    return "\n".join(lines)
