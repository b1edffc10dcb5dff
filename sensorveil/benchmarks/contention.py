"""`sensorveil benchmark BUNDLE --contend N`: what the runtime costs when it shares the CPU.

A board runs the privatizer beside a camera app, a decoder and whatever else the firmware runs. This
measures one bundle loaded for a stream (``load_for_stream``) with each ``cpu_policy``, first on the
quiet machine and then beside N busy-loop processes, and reports for each: the stream's FPS and
CPU-milliseconds per frame (every thread of this process: the pipeline's cost to the board), and the
model alone (back-to-back calls on the stream's last sample) the same way. A policy whose CPU per frame
grows under contention is burning cycles spinning or waiting on descheduled threads, not working.

The busy processes are always stopped: on return, on an error, on Ctrl-C; and each one also exits by
itself once its parent is gone, so even a killed benchmark leaves none behind.
"""
import multiprocessing
import os
import signal
import textwrap
import time

import numpy as np

from sensorveil.runtime.backends.cpu_policy import CPU_POLICIES
from sensorveil.runtime.spec import check_sensor_input

WIDTH = 100              # the table fits a 100-column terminal
READY_TIMEOUT_S = 30.0   # a spawned interpreter on a slow board takes seconds to start


def busy_loop(parent_pid: int, ready) -> None:
    """Burn one core until the parent is gone (the parent's normal stop is terminate())."""
    ready.set()
    while os.getppid() == parent_pid:
        for _ in range(200000):
            pass


class Contenders(object):
    """N busy-loop processes for the length of a ``with`` block."""

    def __init__(self, count: int):
        self.count = count
        self.processes = []

    def __enter__(self) -> "Contenders":
        # spawn, not fork: a fork of a process whose runtime threads hold locks is not safe everywhere
        context = multiprocessing.get_context("spawn")
        try:
            events = []
            for _ in range(self.count):
                ready = context.Event()
                process = context.Process(target=busy_loop, args=(os.getpid(), ready), daemon=True)
                process.start()
                self.processes.append(process)
                events.append(ready)
            for ready in events:      # measure only once every contender is burning
                ready.wait(READY_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def pids(self) -> "list[int]":
        return [process.pid for process in self.processes]

    def stop(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(5)
            if process.is_alive():     # Process.kill() is 3.7+; the boards run 3.6
                os.kill(process.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
                process.join(5)
        self.processes = []


def model_only(privatizer, sample: np.ndarray, calls: int, warmup: int = 10) -> dict:
    """FPS and CPU-ms per call of the model alone, back to back (the whole call for a multi-stage bundle)."""
    if privatizer.pipeline.single_model:
        model_input = privatizer.pipeline.graph_input(check_sensor_input(sample, privatizer.input_spec)[0])
        call = lambda: privatizer.pipeline.run_model(model_input)   # noqa: E731
    else:
        call = lambda: privatizer(sample)   # noqa: E731
    for _ in range(warmup):
        call()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        call()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"fps": calls / wall, "cpu_ms": 1e3 * cpu / calls}


def measure(privatizer, bundle, source: str, frames: int) -> dict:
    """One condition: the stream, then the model alone on a random in-range sample (these models take
    as long whatever the values)."""
    from sensorveil.benchmarks.bench import sensor_sample
    from sensorveil.benchmarks.stream_bench import benchmark_stream
    report = benchmark_stream(bundle, source, frames=frames, privatizer=privatizer)
    alone = model_only(privatizer, sensor_sample(privatizer), calls=frames)
    return {"stream_fps": report.get("fps"), "stream_cpu_ms": report.get("cpu_ms_per_frame"),
            "model_fps": alone["fps"], "model_cpu_ms": alone["cpu_ms"]}


def settings_of(privatizer) -> dict:
    """What the report says was used: the backend's own account of its CPU settings."""
    described = privatizer.pipeline.backend.describe()
    keep = ("backend", "library_version", "library", "device", "cpu_policy", "threads", "spinning", "config",
            "host_sync")
    settings = {key: described[key] for key in keep if key in described}
    settings["threads_asked"] = privatizer.backend_options.get("threads")
    return settings


def benchmark_contention(bundle, contend: int, source: str = "synthetic-depth", frames: int = 300,
                         backend: str = "auto", policies=CPU_POLICIES, log=None) -> dict:
    """Each policy quiet, then beside ``contend`` busy processes; the same loaded privatizer for both."""
    from sensorveil.runtime.stream import load_for_stream
    rows, pids = [], []
    for policy in policies:
        privatizer = load_for_stream(bundle, backend=backend, cpu_policy=policy)
        if log:
            log("{}: quiet, {} frames".format(policy, frames))
        quiet = measure(privatizer, bundle, source, frames)
        if log:
            log("{}: beside {} busy process(es)".format(policy, contend))
        with Contenders(contend) as contenders:
            pids += contenders.pids
            contended = measure(privatizer, bundle, source, frames)
        rows.append({"policy": policy, "settings": settings_of(privatizer), "quiet": quiet, "contended": contended})
    return {"bundle": str(bundle), "source": source, "frames": frames, "contenders": contend,
            "cores": os.cpu_count(), "load_average": _load_average(), "rows": rows, "contender_pids": pids}


def _load_average():
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):   # Windows
        return None


def _ratio(contended, quiet):
    return contended / quiet if contended and quiet else None


def _cells(figures: dict, fps_key: str, cpu_key: str) -> str:
    fps, cpu = figures.get(fps_key), figures.get(cpu_key)
    return "{:>9} {:>8}".format("-" if fps is None else format(fps, ",.1f"), "-" if cpu is None else format(cpu, ".2f"))


def format_contention(result: dict) -> str:
    """The terminal table: quiet and contended side by side, one row per policy and measure (100 columns)."""
    busy = "{} busy".format(result["contenders"])
    lines = ["{} on {} ({} cores): quiet vs beside {} busy-loop process(es)".format(
                 os.path.basename(str(result["bundle"]).rstrip("/")), result["source"], result["cores"],
                 result["contenders"]),
             "CPU ms: this process's CPU time (every thread) per frame; CPU x quiet: contended over quiet",
             "{:<10} {:<12} {:>9} {:>8}   {:>9} {:>8}   {:>10}".format(
                 "policy", "measure", "quiet FPS", "CPU ms", busy + " FPS", "CPU ms", "CPU x quiet")]
    for row in result["rows"]:
        for label, fps_key, cpu_key in (("stream", "stream_fps", "stream_cpu_ms"),
                                        ("model alone", "model_fps", "model_cpu_ms")):
            ratio = _ratio(row["contended"].get(cpu_key), row["quiet"].get(cpu_key))
            lines.append("{:<10} {:<12} {}   {}   {:>10}".format(
                row["policy"], label, _cells(row["quiet"], fps_key, cpu_key),
                _cells(row["contended"], fps_key, cpu_key), "-" if ratio is None else "{:.2f}x".format(ratio)))
    lines.append("settings used (each policy loaded as a stream loads it):")
    for row in result["rows"]:
        settings = ", ".join("{}={}".format(key, value) for key, value in row["settings"].items())
        lines += textwrap.wrap(settings, WIDTH, initial_indent="  {}: ".format(row["policy"]),
                               subsequent_indent="    ")
    if result.get("load_average"):
        lines.append("load average at the end (1, 5, 15 min): {}".format(
            ", ".join("{:.2f}".format(value) for value in result["load_average"])))
    return "\n".join(lines)
