"""The depth models against this CPU's roofline: which backend settings get closest.

    python scripts/roofline.py                      # builds the bundles under timing-bundles/, writes docs/roofline.*
    python scripts/roofline.py --threads 1,2,4      # on a 4-core board: the bundles' folder given with --work

Measured, in one run and on one machine: numpy's fp32 matmul peak at each thread count (the ceiling
the models are held against), then for each model (the 180x180 PR-GAN generator; PASS's embedding with
its similarity head over the bank) every setting a user can choose on the CPU:
* onnxruntime: graph optimization level (disabled, basic, extended, all) x intra-op threads; the
  optimized model saved once and loaded with optimizations off (what the board would ship); the int8
  (QDQ) bundle, exported with --skip-int8-privacy-check: these runs are trained just enough to export, so
  their privacy means nothing, and the audit of a 180x180 depth model (fp32 and int8, 3 seeds) took over an
  hour on 2 cores. A deployed int8 bundle is exported with the audit (docs/results.md);
* onnxruntime THROUGHPUT: one single-threaded session per core, each on its own frames at once (several
  streams, or one stream pipelined), frames per second over wall time;
* OpenVINO (CPU plugin): the LATENCY hint per thread count, and the THROUGHPUT hint with as many
  asynchronous requests as it asks for (frames per second from many requests in flight, so its
  "latency" is wall time per frame, not one frame's).
Each row: p50 latency at batch 1, FPS, achieved GFLOP/s (the graph's multiply-accumulate FLOPs counted
on the ONNX graph / mean latency) and that as a share of the matmul peak at the same thread count.
NHWC: onnxruntime's CPU provider lays convolutions out itself (its NCHWc transformer at level "all",
the NHWC transformer for the int8 graph), so "all" against "extended" is the layout comparison here.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.bench import sensor_sample
from sensorveil.benchmarks.latency import matmul_peak_gflops, measure_latency
from sensorveil.benchmarks.report import cpu_description, cpu_text
from sensorveil.costs.onnx_counts import onnx_flops
from sensorveil.runtime import Privatizer, open_bundle
from sensorveil_lab.depth_bundle import depth_bundle
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared"))

OPT_LEVELS = ("disabled", "basic", "extended", "all")
PEAK_GOAL = 0.6   # the depth model at 60% or more of the matmul peak


def sensorveil_cli(*argv: str) -> None:
    subprocess.run([sys.executable, "-m", "sensorveil", *argv], check=True, cwd=REPO,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def build_bundles(work: Path) -> dict:
    """{model name: {precision or format: bundle dir}}; reused when already there. The runs are
    trained just enough to export (architecture and input size are what timing depends on); an export
    that fails is recorded with its reason instead of a bundle."""
    bundles = {"prgan-depth generator": {"fp32": depth_bundle(work)}, "pass-depth embedding + head": {}}
    pass_run = work / "pass-depth-run"
    if not (pass_run / "run.json").is_file():
        sensorveil_cli("train", "pass", "--dataset", "synthetic-depth", "--epochs", "1", "--attacker-epochs", "1",
                       "--out", str(pass_run))
    runs = {"prgan-depth generator": work / "prgan-depth-run", "pass-depth embedding + head": pass_run}
    for model, run in runs.items():
        for name, argv in (
            ("fp32", ["--format", "onnx"]),
            ("int8", ["--format", "onnx", "--precision", "int8", "--skip-int8-privacy-check"]),
            ("openvino", ["--format", "openvino"]),
        ):
            out = work / f"{run.name[:-4]}-{name}"
            if name not in bundles[model] and not (out / "manifest.json").is_file():
                try:
                    sensorveil_cli("export", str(run), *argv, "--out", str(out))
                except subprocess.CalledProcessError as error:
                    bundles[model][name] = {"refused": error.stderr.decode(errors="replace").strip()[-400:]}
                    continue
            bundles[model].setdefault(name, out)
    return bundles


def peaks(thread_counts: list) -> dict:
    """numpy's fp32 matmul GFLOP/s at each thread count (threadpoolctl limits the BLAS pool)."""
    from threadpoolctl import threadpool_limits

    result = {}
    for threads in thread_counts:
        with threadpool_limits(limits=threads, user_api="blas"):
            result[threads] = matmul_peak_gflops()
    return result


def model_file(bundle_dir: Path, backend: str) -> Path:
    bundle = open_bundle(bundle_dir)
    return bundle.path(bundle.graph_artifact(backend, bundle.graph_names(backend)[0])["file"])


def timed(run, x: np.ndarray, iters: int) -> dict:
    stats = measure_latency(run, x, warmup=max(20, iters // 10), iters=iters)
    return {"p50_ms": stats["p50_ms"], "mean_ms": stats["mean_ms"], "fps": stats["fps"]}


def ort_session(path: Path, level: str, threads: int, save_to: Path | None = None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel,
        f"ORT_{'ENABLE_' if level != 'disabled' else ''}{level.upper() if level != 'disabled' else 'DISABLE_ALL'}",
    )
    options.intra_op_num_threads = threads
    if save_to is not None:
        options.optimized_model_filepath = str(save_to)
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def onnxruntime_rows(path: Path, precision: str, x: np.ndarray, thread_counts: list, iters: int) -> list:
    rows = []
    levels = OPT_LEVELS if precision == "fp32" else ("all",)
    for threads in thread_counts:
        for level in levels:
            session = ort_session(path, level, threads)
            name = session.get_inputs()[0].name
            rows.append(
                {
                    "backend": "onnxruntime",
                    "precision": precision,
                    "setting": f"level {level}",
                    "threads": threads,
                    **timed(lambda b: session.run(None, {name: b}), x, iters),
                }
            )
        if precision == "fp32":
            rows.append(saved_optimized_row(path, x, threads, iters))
    sessions = max(thread_counts)
    if sessions > 1:
        rows.append(concurrent_sessions_row(path, precision, x, sessions, iters))
    return rows


def concurrent_sessions_row(path: Path, precision: str, x: np.ndarray, sessions: int, iters: int) -> dict:
    """One single-threaded session per core, each running its own frames at the same time (a board
    serving several streams, or pipelining one): onnxruntime's counterpart of OpenVINO's THROUGHPUT
    hint. A 180x180 frame is too little work to split across cores without them waiting on each other
    (the rows at 2 threads fall well short of twice 1 thread); whole frames side by side keep every core busy.
    onnxruntime releases the GIL inside run(), so Python threads run the sessions in parallel."""
    import threading

    runners = []
    for _ in range(sessions):
        session = ort_session(path, "all", 1)
        name = session.get_inputs()[0].name
        runners.append(lambda b, session=session, name=name: session.run(None, {name: b}))
    each = max(1, iters // sessions)
    for run in runners:  # warm-up, one session at a time
        for _ in range(max(20, each // 10)):
            run(x)
    threads = [threading.Thread(target=lambda run=run: [run(x) for _ in range(each)]) for run in runners]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    per_frame_ms = (time.perf_counter() - started) * 1e3 / (each * sessions)
    return {
        "backend": "onnxruntime",
        "precision": precision,
        "setting": f"THROUGHPUT: {sessions} sessions x 1 thread",
        "threads": sessions,
        "p50_ms": None,
        "mean_ms": per_frame_ms,
        "fps": 1e3 / per_frame_ms,
    }


def saved_optimized_row(path: Path, x: np.ndarray, threads: int, iters: int) -> dict:
    """The graph optimized once at level all and saved; the board loads it with optimizations off."""
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "optimized.onnx"
        ort_session(path, "all", threads, save_to=saved)
        started = time.perf_counter()
        session = ort_session(saved, "disabled", threads)
        load_ms = (time.perf_counter() - started) * 1e3
        name = session.get_inputs()[0].name
        started = time.perf_counter()
        ort_session(path, "all", threads)
        load_all_ms = (time.perf_counter() - started) * 1e3
        return {
            "backend": "onnxruntime",
            "precision": "fp32",
            "setting": "saved optimized (level all, loaded off)",
            "threads": threads,
            "load_ms": load_ms,
            "load_ms_optimizing": load_all_ms,
            **timed(lambda b: session.run(None, {name: b}), x, iters),
        }


def openvino_rows(xml: Path, x: np.ndarray, thread_counts: list, iters: int) -> list:
    try:
        from openvino import Core
    except ImportError:
        from openvino.runtime import Core
    core, rows = Core(), []
    model = core.read_model(str(xml))
    for threads in thread_counts:
        compiled = core.compile_model(
            model,
            "CPU",
            {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"},
        )
        request = compiled.create_infer_request()
        rows.append(
            {
                "backend": "openvino",
                "precision": "fp32",
                "setting": "hint LATENCY",
                "threads": threads,
                **timed(lambda b: request.infer({0: b}), x, iters),
            }
        )
    rows.append(openvino_throughput_row(core, model, x, iters))
    return rows


def openvino_throughput_row(core, model, x: np.ndarray, iters: int) -> dict:
    """Frames per second with the THROUGHPUT hint's own number of requests in flight: what a board
    serving several streams (or pipelining frames) gets; per-frame latency is longer, not measured here."""
    try:
        from openvino import AsyncInferQueue
    except ImportError:  # OpenVINO 2022.3 (the NCS2's release) keeps it in openvino.runtime
        from openvino.runtime import AsyncInferQueue
    compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_PRECISION_HINT": "f32"})
    requests = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    queue = AsyncInferQueue(compiled, requests)
    for _ in range(requests * 4):
        queue.start_async({0: x})
    queue.wait_all()
    started = time.perf_counter()
    for _ in range(iters):
        queue.start_async({0: x})
    queue.wait_all()
    per_frame_ms = (time.perf_counter() - started) * 1e3 / iters
    return {
        "backend": "openvino",
        "precision": "fp32",
        "setting": f"hint THROUGHPUT, {requests} requests",
        "threads": os.cpu_count(),
        "p50_ms": None,
        "mean_ms": per_frame_ms,
        "fps": 1e3 / per_frame_ms,
    }


def graph_input(bundle_dir: Path) -> np.ndarray:
    """One sensor frame as the bundle's first graph takes it: model units, or the sensor's dtype where
    the exporter put the units in the graph (int8 bundles keep model units)."""
    privatizer = Privatizer.load(bundle_dir)
    return privatizer.pipeline.graph_input(sensor_sample(privatizer)[None])


def measure_model(model: str, bundles: dict, thread_counts: list, iters: int, peak: dict) -> dict:
    fp32_path = model_file(bundles["fp32"], "onnxruntime")
    flops = onnx_flops(fp32_path)["total"]
    x = graph_input(bundles["fp32"])
    shape = list(x.shape)
    rows = onnxruntime_rows(fp32_path, "fp32", x, thread_counts, iters)
    notes = {}
    for name in ("int8", "openvino"):
        entry = bundles.get(name)
        if isinstance(entry, dict) or entry is None:
            notes[name] = (entry or {}).get("refused", "not built")
        elif name == "int8":
            rows += onnxruntime_rows(model_file(entry, "onnxruntime"), "int8", graph_input(entry), thread_counts, iters)
        else:
            rows += openvino_rows(model_file(entry, "openvino"), graph_input(entry), thread_counts, iters)
    for row in rows:
        row["gflops"] = flops / (row["mean_ms"] * 1e6)
        ceiling = peak.get(row["threads"]) or max(peak.values())
        row["share_of_peak"] = row["gflops"] / ceiling
    return {"model": model, "flops": flops, "input_shape": shape, "rows": rows, "notes": notes}


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def findings(result: dict) -> "list[str]":
    """What the rows say, computed: the optimization level's gain and int8 against fp32, per model."""
    lines = []
    for model in result["models"]:
        rows = {(r["backend"], r["precision"], r["setting"], r["threads"]): r for r in model["rows"]}
        top = max(r["threads"] for r in model["rows"] if r["backend"] == "onnxruntime")
        best, extended = (
            rows.get(("onnxruntime", "fp32", "level all", top)),
            rows.get(("onnxruntime", "fp32", "level extended", top)),
        )
        int8 = rows.get(("onnxruntime", "int8", "level all", top))
        throughput = rows.get(("onnxruntime", "fp32", f"THROUGHPUT: {top} sessions x 1 thread", top))
        if best and throughput:
            lines.append(
                f"- {model['model']}: {top} single-threaded sessions side by side reach "
                f"{throughput['share_of_peak']:.0%} of the {top}-thread peak ({throughput['fps']:,.0f} FPS), "
                f"one session on {top} threads {best['share_of_peak']:.0%} ({best['fps']:,.0f} FPS, batch 1)"
            )
        if best and extended:
            lines.append(
                f"- {model['model']}: level all is {best['fps'] / extended['fps']:.2f}x level extended at "
                f"{top} threads "
                "(its NCHWc convolution layout)"
                + (f"; int8 QDQ runs at {int8['fps'] / best['fps']:.2f}x fp32" if int8 else "")
            )
    return lines


def render(result: dict) -> str:
    peak_text = ", ".join(
        f"{t} thread{'s' if t > 1 else ''}: {g:.1f} GFLOP/s" for t, g in result["peak_gflops"].items()
    )
    lines = [
        "# The depth models against this CPU's roofline",
        "",
        page_header(recorded(result, host=cpu_text(result["cpu"]))),
        "",
        f"numpy fp32 matmul peak, measured in the same run: {peak_text}. Share of peak compares a row with "
        "the peak at its own thread count (the THROUGHPUT row with the largest). "
        "`python scripts/roofline.py --render-only` re-renders this page from roofline.json.",
        "",
        "The models are timing runs, trained just enough to export: this script exports their int8 bundles "
        "without the export's privacy audit, which only a trained run makes meaningful (a bundle already in "
        "the work folder is reused).",
        "",
    ]
    for model in result["models"]:
        best = max(model["rows"], key=lambda r: r["fps"])
        lines += [
            f"## {model['model']}: {model['flops'] / 1e6:.1f} MFLOP per frame, input {model['input_shape']}",
            "",
            "| backend | precision | setting | threads | p50 ms | FPS | GFLOP/s | share of peak |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['backend']} | {r['precision']} | {r['setting']} | {r['threads']} | {fmt(r['p50_ms'], '.3f')} | "
            f"{r['fps']:,.0f} | {r['gflops']:.1f} | {r['share_of_peak']:.0%} |"
            for r in model["rows"]
        ]
        lines += [
            "",
            f"Fastest: {best['backend']} {best['precision']}, {best['setting']}, {best['threads']} threads: "
            f"{best['fps']:,.0f} FPS, {best['share_of_peak']:.0%} of the matmul peak.",
        ]
        lines += [f"- {name}: not measured: {why}" for name, why in model["notes"].items()]
        lines.append("")
    lines += ["## Findings", ""] + findings(result) + [""]
    lines += ["![achieved share of the matmul peak](roofline.png)", ""]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(result["models"]), figsize=(6 * len(result["models"]), 5), squeeze=False)
    for ax, model in zip(axes[0], result["models"]):
        rows = model["rows"]
        labels = [f"{r['backend'][:4]} {r['precision']} {r['setting'][:18]} t{r['threads']}" for r in rows]
        ax.barh(range(len(rows)), [100 * r["share_of_peak"] for r in rows], color="tab:blue")
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(100 * PEAK_GOAL, color="tab:green", linestyle="--", label=f"goal: {PEAK_GOAL:.0%} of the peak")
        ax.legend(loc="lower right", fontsize=7)
        ax.set_xlabel("% of numpy fp32 matmul peak (same threads)")
        ax.set_title(model["model"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", type=Path, default=REPO / "timing-bundles", help="where the bundles are built or reused"
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated intra-op thread counts (default 1,2)")
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="folder for roofline.{md,json,png}")
    parser.add_argument("--render-only", action="store_true", help="re-render roofline.md and .png from roofline.json")
    parser.add_argument("--allow-dirty", action="store_true", help="measure from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    if args.render_only:
        result = json.loads((args.out / "roofline.json").read_text())
        result["peak_gflops"] = {int(threads): peak for threads, peak in result["peak_gflops"].items()}  # JSON keys
        plot(result, args.out / "roofline.png")
        (args.out / "roofline.md").write_text(render(result))
        return 0
    require_clean(args.allow_dirty)
    record = provenance([__file__] + list(sys.argv[1:] if argv is None else argv), args.allow_dirty)
    thread_counts = [int(t) for t in args.threads.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    bundles = build_bundles(args.work)
    peak = peaks(thread_counts)
    models = [measure_model(model, entry, thread_counts, args.iters, peak) for model, entry in bundles.items()]
    peak_after = peaks(thread_counts)  # the ceiling again at the end: a busy machine shows up as a drift
    result = {
        "command": "python scripts/roofline.py" + (" " + " ".join(argv) if argv else ""),
        "cpu": cpu_description(),
        "platform": platform.platform(),
        "os_cpu_count": os.cpu_count(),
        "peak_gflops": {t: max(peak[t], peak_after[t]) for t in thread_counts},
        "peak_drift": {t: peak_after[t] / peak[t] - 1 for t in thread_counts},
        "models": models,
        "timestamp": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "provenance": record,
    }
    result = portable(result, shared=SHARED)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "roofline.json").write_text(json.dumps(result, indent=1, default=str))
    plot(result, args.out / "roofline.png")
    (args.out / "roofline.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
