"""End-to-end stream benchmarks and device estimates.

Measured (on this machine, from a real source): frames per second through the whole loop
(capture -> preprocess -> inference -> postprocess), the per-stage split, the runtime's added
time over the bare model, the stream counters and the process's peak resident memory.

Estimated (never measured here, always labelled ESTIMATE, kept in their own table): per-frame
time on the profiled devices, following PR-GAN section 6.4 / Table 4 (which estimated device
figures from GTX 1080 Ti timings by linear regression). Here the regression is per device:
latency = a + b * MACs over the device profile's reference throughput figures for models whose
complexity is published (PR-GAN Table 3), evaluated at this bundle's MACs. A profile without at
least two such figures gets no estimate, with the reason.

    python -m sensorveil.benchmarks.stream_bench --device-name   # what device_benchmark.sh uses
"""
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from sensorveil.runtime import Privatizer
from sensorveil.runtime.sources import open_source
from sensorveil.runtime.spec import check_sensor_input
from sensorveil.runtime.stream import Stream, load_for_stream

# Multiply-accumulates of the models device profiles quote throughput for. PR-GAN Table 3
# (/work/shared/papers/prgan.md) lists them as "FLOP"; its MobileNetV2 figure (300M) is the
# multiply-add count of the MobileNetV2 paper, so the column is read as MACs throughout.
REFERENCE_MACS = {
    "MNIST": 1.6e6, "PubFig": 232e6, "WiFi": 2.1e6, "OccuTherm": 96.4e6, "MobileNet v2": 300e6,
}
REFERENCE_MACS_SOURCE = "PR-GAN Table 3 (complexity column read as multiply-accumulates)"
ESTIMATE_LABEL = "ESTIMATE (not measured)"


# -- measured --------------------------------------------------------------------------------
def peak_rss_mb() -> "float | None":
    """Peak resident memory of this process so far (None where `resource` is missing)."""
    try:
        import resource
    except ImportError:   # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024   # bytes on macOS, KiB on Linux


def benchmark_stream(bundle_dir, source: str, backend: str = "auto", frames: "int | None" = 300, warmup: int = 10,
                     privatizer: "Privatizer | None" = None, threads: "int | None" = None, prefetch: bool = True,
                     prepare_ahead: "bool | None" = None) -> dict:
    """Run ``frames`` timed frames (after ``warmup``; None: to the end of the source) from ``source``
    through the bundle, loaded as ``sensorveil run`` loads it (``load_for_stream``), then the model alone
    on the stream's last sample with the same privatizer: the stream's FPS over the model's own at the
    same settings. ``prefetch``/``prepare_ahead``: the ways a stream can run (scripts/stream_plumbing.py)."""
    privatizer = privatizer or load_for_stream(bundle_dir, backend=backend, threads=threads)
    with open_source(source, prefetch=prefetch) as stream_source:
        stream = Stream(privatizer, stream_source, frames=None if frames is None else warmup + frames,
                        warmup=warmup, prepare_ahead=prepare_ahead)
        last = None
        for last in stream:
            pass
        report = stream.report()
    if frames is not None and report.get("timed_frames", 0) < frames:    # the source ended first
        report["frames_asked"] = frames
        warnings.warn("{}: asked for {} timed frames, the source gave {} (after {} warm-up frames); the report "
                      "records the frames measured".format(source, frames, report.get("timed_frames", 0), warmup),
                      stacklevel=2)
    report["backend"] = privatizer.backend_name
    report["backend_why"] = getattr(privatizer, "backend_why", None)
    report["model_threads"] = privatizer.backend_options.get("threads")   # None: the library's default
    report["peak_rss_mb"] = peak_rss_mb()
    if last is not None and not getattr(stream.preprocessor, "batched", False) and report.get("fps"):
        report["model_alone_fps"] = model_alone_fps(privatizer, last.sample, calls=report["timed_frames"])
        report["stream_vs_model"] = report["fps"] / report["model_alone_fps"]
    return report


def model_alone_fps(privatizer: Privatizer, sample: np.ndarray, calls: int = 300, warmup: int = 10) -> float:
    """Calls per second of the backend alone on one sample (the whole privatizer call for a pipeline
    of several stages), back to back, as a stream would call it if frames cost nothing."""
    if privatizer.pipeline.single_model:
        model_input = privatizer.pipeline.graph_input(check_sensor_input(sample, privatizer.input_spec)[0])
        call = lambda: privatizer.pipeline.run_model(model_input)   # noqa: E731 - one line each way
    else:
        call = lambda: privatizer(sample)   # noqa: E731
    for _ in range(warmup):
        call()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return calls / (time.perf_counter() - start)


def stream_columns(report: dict) -> dict:
    """The measured stream figures as flat table columns."""
    stages = report.get("stages_ms", {})
    columns = {"stream_backend_why": report.get("backend_why"),
               "stream_fps": report.get("fps"), "stream_model_alone_fps": report.get("model_alone_fps"),
               "stream_vs_model": report.get("stream_vs_model"), "stream_model_threads": report.get("model_threads"),
               "stream_prepared_ahead": report.get("prepared_ahead"),
               "stream_cpu_ms_per_frame": report.get("cpu_ms_per_frame"),
               "stream_preprocessor": report.get("preprocessor"), "stream_timed_frames": report.get("timed_frames")}
    columns.update({f"{stage}_ms": stages[stage]["mean"] for stage in
                    ("capture", "preprocess", "inference", "postprocess") if stage in stages})
    columns.update({"runtime_added_pct": _percent(report.get("runtime_added_fraction")),
                    "units_added_pct": _percent(report.get("units_fraction")),
                    "frames_in": report["frames_in"], "frames_out": report["frames_out"],
                    "dropped": report["dropped"], "bad": report["bad"], "peak_rss_mb": report.get("peak_rss_mb")})
    return columns


def _percent(fraction):
    return None if fraction is None else 100.0 * fraction


# -- estimated -------------------------------------------------------------------------------
def reference_macs(model_name: str) -> "float | None":
    for key, macs in REFERENCE_MACS.items():
        if key.lower() in model_name.lower():
            return macs
    return None


def estimate_device(profile: dict, macs: float) -> dict:
    """One device's ESTIMATE row for a model of ``macs`` multiply-accumulates per frame."""
    points = [(reference_macs(ref["model"]), 1000.0 / ref["fps"], ref)
              for ref in profile.get("reference_throughput", []) if ref.get("fps")]
    points = [(m, ms, ref) for m, ms, ref in points if m is not None]
    row = {"device": profile["name"], "label": ESTIMATE_LABEL, "backend": profile.get("backend"),
           "precision": profile.get("precision")}
    if len(points) < 2:
        row["estimate_note"] = (f"no estimate: the profile has {len(points)} reference figure(s) for models of "
                                "published complexity; 2 or more are needed")
        return row
    x, y = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    slope, intercept = np.polyfit(x, y, 1)
    latency_ms = float(intercept + slope * macs)
    if latency_ms <= 0:
        row["estimate_note"] = "no estimate: the reference figures do not fit a positive latency at this size"
        return row
    second_hand = any(ref.get("estimated_by_source") for *_, ref in points)
    row.update({"est_latency_ms": latency_ms, "est_fps": 1000.0 / latency_ms, "reference_points": len(points),
                "estimate_note": "linear fit of latency vs MACs over the profile's reference figures"
                                 + (" (themselves estimates in their source)" if second_hand else "")})
    return row


def estimate_devices(macs: "float | None") -> "list[dict]":
    """ESTIMATE rows for every device profile; empty where devices or MACs are unknown."""
    try:
        from sensorveil.devices import list_profiles, load_profile
    except ImportError:
        return []
    if not macs:
        return [{"device": name, "label": ESTIMATE_LABEL, "estimate_note": "no estimate: bundle lacks a FLOP count"}
                for name in list_profiles()]
    return [estimate_device(load_profile(name), macs) for name in list_profiles()]


# -- into `sensorveil benchmark` ------------------------------------------------------------
def add_stream_and_estimates(result: dict, bundle_dir, source: "str | None", frames: int = 300) -> dict:
    """Extend a ``benchmark_bundle`` result: measured stream columns on each backend's row (when
    a source is given) and the ESTIMATES table, kept apart under ``estimates``."""
    if source is not None:
        for row in result["rows"]:
            report = benchmark_stream(bundle_dir, source, backend=row["backend"], frames=frames)
            row.update(stream_columns(report))
            row["stream_errors"] = report["errors"] or None
        result["source"] = source
        # the frames measured, not the frames asked for: a short clip ends before --frames
        result["stream_frames"] = min(row.get("stream_timed_frames") or 0 for row in result["rows"])
        result["stream_frames_asked"] = frames
    flops = next((row.get("flops_torch") or row.get("flops_onnx") for row in result["rows"]), None)
    result["estimates"] = estimate_devices(flops / 2 if flops else None)   # FLOPs = 2 * MACs (flops.py)
    result["device"] = detected_device()
    return result


def format_estimates(result: dict) -> str:
    """The ESTIMATES table as Markdown, under a heading that says what it is."""
    from sensorveil.benchmarks.report import format_markdown
    rows = result.get("estimates") or []
    return (f"## Device estimates: {ESTIMATE_LABEL}\n\nFrom this bundle's MACs and each device profile's "
            f"reference figures ({REFERENCE_MACS_SOURCE}); not measured on the devices.\n\n"
            + format_markdown(rows))


# -- device naming ---------------------------------------------------------------------------
def detected_device() -> dict:
    """The best-matching device profile, or this machine's platform description."""
    try:
        from sensorveil.devices import detect
        matches = detect()
    except ImportError:
        matches = []
    if matches:
        return {"name": matches[0]["name"], "matched_by": matches[0]["matched_by"], "profile": True}
    return {"name": f"{platform.system()}-{platform.machine()}".lower(), "matched_by": ["platform"], "profile": False}


def default_report_path(directory: "str | Path" = "reports") -> Path:
    """reports/DEVICE-YYYYmmdd-HHMMSS.json, named after the detected device."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(directory) / f"{detected_device()['name']}-{stamp}.json"
