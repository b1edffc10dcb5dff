"""`sensorveil benchmark BUNDLE`: complexity, batch-1 latency and FPS per backend, and the
runtime's overhead over a raw onnxruntime session running the very same model file.

The runtime's time includes input validation and the sensor<->model unit conversion; the raw
session gets the array the graph takes, already prepared (normalized, or for a bundle with the units
inside its graph, the sensor frame in the model's layout). Calls alternate between the two so drift in CPU
clocks or background load hits both equally, and the overhead ratio compares medians.
"""
import time
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.latency import matmul_peak_gflops, percentiles
from sensorveil.benchmarks.report import cpu_description
from sensorveil.benchmarks.stream_bench import add_stream_and_estimates
from sensorveil.runtime import BackendUnavailableError, Privatizer, open_bundle
from sensorveil.runtime.backends import REGISTRY, library_available, resolve_backend

try:
    from tqdm.auto import tqdm
except ImportError:
    def tqdm(iterable=None, **_):
        return iterable


def sensor_sample(privatizer: Privatizer, seed: int = 0) -> np.ndarray:
    """One random in-range sample in sensor units (latency of these nets does not depend on values)."""
    spec = privatizer.input_spec
    rng = np.random.default_rng(seed)
    sample = rng.uniform(spec.low, spec.high, size=spec.sample_shape)
    return sample.astype(spec.dtype)


BLOCK = 25   # calls per turn when several calls take turns


def paired_latency(calls: dict, iters: int, warmup: int, desc: str) -> dict:
    """Time several zero-argument calls that take turns in blocks, and summarise each.

    Turns share out drift in clock speed and background load; blocks (rather than alternating
    every call) matter because each onnxruntime session keeps its worker threads spinning for a
    moment after a run, which would otherwise slow down whichever session runs next. The first
    call of each block is not timed, for the same reason.
    """
    for _ in range(warmup):
        for call in calls.values():
            call()
    samples = {name: [] for name in calls}
    progress = tqdm(total=iters, desc=desc, leave=False, disable=None)
    while len(samples[next(iter(calls))]) < iters:
        todo = min(BLOCK, iters - len(samples[next(iter(calls))]))
        for name, call in calls.items():
            call()
            for _ in range(todo):
                start = time.perf_counter()
                call()
                samples[name].append((time.perf_counter() - start) * 1e3)
        if hasattr(progress, "update"):
            progress.update(todo)
    if hasattr(progress, "close"):
        progress.close()
    return {name: {**percentiles(values), "samples_ms": values} for name, values in samples.items()}


def backends_to_measure(privatizer_manifest: dict, requested: str) -> "list[str]":
    carried = [name for name in privatizer_manifest["artifacts"] if name in REGISTRY]
    if requested == "all":
        return [name for name in carried if library_available(name)]
    return [requested]


def benchmark_backend(bundle_dir, backend: str, iters: int, warmup: int) -> dict:
    privatizer = Privatizer.load(bundle_dir, backend=backend)
    manifest = privatizer.manifest
    sample = sensor_sample(privatizer)
    model_input = privatizer.pipeline.graph_input(sample[None])   # what the graph takes: model or sensor units
    calls = {"runtime": lambda: privatizer(sample), "model": lambda: privatizer.pipeline.run_model(model_input)}
    raw_session = _raw_onnxruntime_session(privatizer)
    if raw_session is not None:
        input_name = raw_session.get_inputs()[0].name
        calls["raw_onnxruntime"] = lambda: raw_session.run(None, {input_name: model_input})
    stats = paired_latency(calls, iters, warmup, f"benchmark {privatizer.backend_name}")
    complexity = manifest.get("complexity", {})
    row = {"backend": privatizer.backend_name, "backend_why": privatizer.backend_why,
           "precision": manifest["artifacts"][privatizer.backend_name].get("precision", "fp32"),
           "params": complexity.get("params"), "flops_torch": complexity.get("flops_torch"),
           "flops_onnx": complexity.get("flops_onnx"), "output_mode": privatizer.output_mode}
    # bandwidth: what leaves the device per frame in each output mode (PASS: index or sample)
    row.update({f"bytes_per_frame_{mode}": size for mode, size in privatizer.bytes_per_frame().items()})
    for name, values in stats.items():
        row.update({f"{name}_{key}": values[key] for key in ("p50_ms", "p95_ms", "p99_ms", "fps")})
    row["fps"] = row["runtime_fps"]   # the headline: frames per second through the full runtime call
    row["runtime_samples_ms"] = stats["runtime"]["samples_ms"]   # the plot's latency distribution
    # the table's overhead: the full call over the bare backend (a raw onnxruntime session where there
    # is one, else the backend adapter's own run): what validation and unit mapping cost per frame
    bare = stats.get("raw_onnxruntime", stats["model"])
    row["overhead_p50"] = stats["runtime"]["p50_ms"] / bare["p50_ms"] - 1.0
    row.update(artefact_facts(manifest, privatizer.backend_name))
    if "raw_onnxruntime" in stats:
        row["overhead_ratio_p50"] = stats["runtime"]["p50_ms"] / stats["raw_onnxruntime"]["p50_ms"]
        row["overhead_ratio_mean"] = stats["runtime"]["mean_ms"] / stats["raw_onnxruntime"]["mean_ms"]
    if row["flops_torch"]:
        row["achieved_gflops"] = row["flops_torch"] / (stats["model"]["mean_ms"] * 1e6)
    return row


PRIVACY_KEYS = ("probing_acc_private", "probing_acc_useful")


def artefact_facts(manifest: dict, backend: str) -> dict:
    """What the summary table needs from the manifest: format, status, size, recorded privacy."""
    artifact = manifest["artifacts"][backend]
    files = manifest.get("files", {})
    size = sum(files.get(graph["file"], {}).get("size", 0) for graph in artifact.get("graphs", {}).values())
    status, reason = validation_status(manifest.get("validation"), backend)
    metrics = manifest.get("metrics", {}) or {}
    return {"format": artifact.get("format"), "status": status, "reason": reason, "size_bytes": size,
            **{key: metrics.get(key) for key in PRIVACY_KEYS}, "privacy_source": "manifest"}


def validation_status(records, backend: str) -> "tuple[str, str | None]":
    """validated: every check of this backend passed; exported: none ran here (or none recorded);
    failed: one did not pass, with its message."""
    mine = [record for record in records or [] if record.get("backend") == backend]
    failed = [record for record in mine if record.get("status") == "failed"]
    if failed:
        return "failed", failed[0].get("message", "validation failed")
    checked = [record for record in mine if record.get("status") == "passed"]
    if checked and all(record.get("status") in ("passed", "measured") for record in mine):
        return "validated", None
    skipped = [record.get("reason") for record in mine if record.get("status") == "skipped"]
    return "exported", (skipped[0] if skipped else "no validation recorded in the manifest")


def _raw_onnxruntime_session(privatizer: Privatizer):
    """A bare InferenceSession on the bundle's ONNX file, configured exactly like the adapter."""
    bundle = privatizer.pipeline.bundle
    if "onnxruntime" not in bundle.manifest["artifacts"] or not library_available("onnxruntime"):
        return None
    from sensorveil.runtime.backends.onnxruntime_backend import make_session
    first_graph = bundle.graph_names("onnxruntime")[0]   # the graph run_model times
    return make_session(bundle.path(bundle.graph_artifact("onnxruntime", first_graph)["file"]))


def onnx_graph_complexity(bundle, bundle_dir: Path, manifest: dict) -> dict:
    """FLOPs and parameters counted on the bundle's ONNX graphs (summed), where the onnx package is
    installed. A board's runtime-only install has none (scripts/device_benchmark.sh runs there), and
    then the manifest's export-time counts stand alone."""
    if "onnxruntime" not in manifest["artifacts"]:
        return {}
    try:
        from sensorveil.costs.onnx_counts import onnx_flops, onnx_params
    except ImportError:
        return {}
    files = [bundle_dir / bundle.graph_artifact("onnxruntime", name)["file"]
             for name in bundle.graph_names("onnxruntime")]
    counted = [onnx_flops(path) for path in files]
    return {"flops_onnx_graph": sum(c["total"] for c in counted),
            "elementwise_ops_onnx": sum(c["elementwise"] for c in counted),
            "params_onnx_graph": sum(onnx_params(path) for path in files)}


def benchmark_bundle(bundle_dir, backend: str = "all", iters: int = 500, warmup: int = 50,
                     source: "str | None" = None, stream_frames: int = 300) -> dict:
    """Every figure `sensorveil benchmark` prints, as one dict with a `rows` list; with a
    ``source``, each row also gets end-to-end stream figures (stream_bench.py)."""
    bundle_dir = Path(bundle_dir)
    bundle = open_bundle(bundle_dir)
    manifest = bundle.manifest
    # fail early, with the runtime's own message, when no requested backend can run here;
    # checking needs no session, so the model is not loaded once more just to read the manifest
    resolve_backend(bundle, "auto" if backend == "all" else backend)
    rows, skipped = [], []
    for name in backends_to_measure(manifest, backend):
        try:
            rows.append(benchmark_backend(bundle_dir, name, iters, warmup))
        except BackendUnavailableError as error:   # e.g. an Edge TPU model not compiled yet: say so, go on
            skipped.append({"backend": name, "reason": str(error)})
    if not rows:
        raise BackendUnavailableError("no backend of this bundle could run here: "
                                      + "; ".join(f"{s['backend']}: {s['reason']}" for s in skipped))
    graph = onnx_graph_complexity(bundle, bundle_dir, manifest)
    peak = matmul_peak_gflops()
    for row in rows:
        if row.get("achieved_gflops"):
            row["fraction_of_matmul_peak"] = row["achieved_gflops"] / peak
    task = {key: manifest["mechanism"].get(key) for key in ("useful", "private")}
    result = {"bundle": str(bundle_dir), "mechanism": manifest["mechanism"].get("name"), "task": task,
              "input": {"shape": manifest["input"]["sample_shape"], "dtype": manifest["input"]["dtype"]},
              "batch": 1, "iters": iters, "cpu": cpu_description(), "matmul_peak_gflops": peak,
              **graph, "metrics_at_export": manifest.get("metrics", {}), "rows": rows, "skipped": skipped,
              "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return add_stream_and_estimates(result, bundle_dir, source, stream_frames)
