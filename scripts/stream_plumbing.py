"""What the stream adds to the model on a real camera clip: walkway.avi through the
180x180 depth bundle, each way a stream can run, beside the model alone, in one run.

    python scripts/stream_plumbing.py                  # writes docs/stream_plumbing.{md,json}
    python scripts/stream_plumbing.py --render-only    # re-renders the page from the JSON

Ways a stream can run (``Stream`` and ``open_source`` as ``sensorveil run`` uses them):
* one frame at a time: read, pre-process, model, post-process, all in the caller's thread;
* decode ahead: ``Prefetching`` decodes the next frames in a thread (the stream before read-ahead);
* read ahead: decoding and pre-processing of the next frames in a thread (``ReadAhead``, the default;
  it reads ``Prefetching`` with ``read_direct()``, so each frame changes threads once).
Each at every model thread count. Beside each: the model alone (``model_alone_fps``: the same privatizer
and threads, back-to-back calls on the stream's last sample) and the clip's decoding alone (OpenCV,
one thread, nothing else running): a stream cannot outrun its decoder. Then many streams
(``sensorveil benchmark BUNDLE --streams 8``): the clip opened 1, 2, 4 and 8 times into one runtime,
batched. Rounds are interleaved so a busy spell of the machine spreads over every row; each figure is
the median over rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.multi_stream import benchmark_streams
from sensorveil.benchmarks.report import cpu_description, cpu_text
from sensorveil.benchmarks.stream_bench import benchmark_stream
from sensorveil.runtime.sources import DECODER_THREADS, open_source
from sensorveil.runtime.stream import stream_threads
from sensorveil_lab.depth_bundle import depth_bundle
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

REPO = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared"))
CLIP = SHARED / "media" / "walkway.avi"
WAYS = {   # name: (open_source's prefetch, Stream's prepare_ahead)
    "one frame at a time": (False, False),
    "decode ahead": (True, False),
    "read ahead (default)": (True, True),
}
WARMUP = 20
MANY_STREAMS = 8          # rows for 1, 2, 4 and 8 streams
MANY_STREAMS_ROUNDS = 75  # rounds per stream count: 8 streams x 75 rounds = 600 of the clip's 795 frames


def decode_fps(clip: Path) -> float:
    """Frames per second of decoding the clip alone, in this thread."""
    with open_source(str(clip), prefetch=False) as source:
        start, frames = time.perf_counter(), 0
        while source.read() is not None:
            frames += 1
    return frames / (time.perf_counter() - start)


def one_stream(bundle: Path, clip: Path, way: str, threads: int) -> dict:
    prefetch, prepare_ahead = WAYS[way]
    report = benchmark_stream(bundle, str(clip), frames=None, warmup=WARMUP, threads=threads, prefetch=prefetch,
                              prepare_ahead=prepare_ahead)
    stages = {stage: report["stages_ms"][stage]["p50"] for stage in ("capture", "preprocess", "inference")}
    return {"way": way, "threads": threads, "stream_fps": report["fps"], "frames": report["timed_frames"],
            "bad": report["bad"], "model_alone_fps": report["model_alone_fps"], "stage_ms_p50": stages}


def measure(bundle: Path, clip: Path, thread_counts: "list[int]", rounds: int) -> dict:
    samples, decodes, many = {}, [], []
    for round_index in range(rounds):
        decodes.append(decode_fps(clip))
        many.append(benchmark_streams(bundle, str(clip), MANY_STREAMS, rounds=MANY_STREAMS_ROUNDS, log=lambda _: None))
        for threads in thread_counts:
            for way in WAYS:
                row = one_stream(bundle, clip, way, threads)
                samples.setdefault((way, threads), []).append(row)
                print(f"round {round_index + 1}/{rounds}: {way}, {threads} thread(s): {row['stream_fps']:,.0f} FPS, "
                      f"model alone {row['model_alone_fps']:,.0f}", flush=True)
    rows = [median_row(runs) for runs in samples.values()]
    best_model = max(row["model_alone_fps"] for row in rows)
    for row in rows:
        row["vs_model_same_threads"] = row["stream_fps"] / row["model_alone_fps"]
        row["vs_best_model"] = row["stream_fps"] / best_model
    return {"rows": rows, "decode_fps": float(np.median(decodes)), "best_model_alone_fps": best_model,
            "many_streams": median_streams(many)}


def median_streams(runs: "list[dict]") -> dict:
    """The many-streams rows, each figure the median over rounds."""
    rows = []
    for at, first in enumerate(runs[0]["rows"]):
        row = {"streams": first["streams"], "rounds": first["rounds"]}
        for key in ("aggregate_fps", "per_stream_fps", "latency_p50_ms", "latency_p95_ms"):
            row[key] = float(np.median([run["rows"][at][key] for run in runs]))
        row["keeps_sensor_rate"] = row["per_stream_fps"] >= runs[0]["sensor_fps"]
        rows.append(row)
    keep = ("backend", "model_threads", "read_ahead", "sensor_fps")
    return {**{key: runs[0].get(key) for key in keep}, "rows": rows}


def median_row(runs: "list[dict]") -> dict:
    row = {key: runs[0][key] for key in ("way", "threads", "frames")}
    row["bad"] = max(run["bad"] for run in runs)
    row["stream_fps"] = float(np.median([run["stream_fps"] for run in runs]))
    row["model_alone_fps"] = float(np.median([run["model_alone_fps"] for run in runs]))
    row["stage_ms_p50"] = {stage: float(np.median([run["stage_ms_p50"][stage] for run in runs]))
                           for stage in runs[0]["stage_ms_p50"]}
    row["rounds"] = len(runs)
    return row


def render(result: dict) -> str:
    lines = [
        "# What the stream adds to the model: walkway.avi through the depth bundle",
        "",
        page_header(recorded(result, host=cpu_text(result["cpu"]))),
        "",
        "`--render-only` re-renders this page from stream_plumbing.json. Median of "
        f"{result['rounds']} interleaved rounds; each stream is the whole clip ({result['rows'][0]['frames']} timed "
        f"frames after {WARMUP} warm-up) through `Stream` as `sensorveil run` runs it, no sink.",
        "",
        f"Decoding the clip alone (OpenCV, {result.get('decoder_threads', 'default')} decoder thread(s), as the "
        f"stream decodes it): **{result['decode_fps']:,.0f} FPS**. The model alone, "
        f"best thread count: **{result['best_model_alone_fps']:,.0f} calls/s** (the same privatizer, back-to-back "
        "calls on one sample).",
        "",
        "| how the stream runs | model threads | stream FPS | model alone, same threads | stream / model, same "
        "threads | stream / best model | capture p50 ms | preprocess p50 ms | inference p50 ms | "
        "caller's time in the model |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        stages = row["stage_ms_p50"]
        lines.append(
            f"| {row['way']} | {row['threads']} | {row['stream_fps']:,.0f} | {row['model_alone_fps']:,.0f} | "
            f"{row['vs_model_same_threads']:.2f}x | {row['vs_best_model']:.2f}x | {stages['capture']:.3f} | "
            f"{stages['preprocess']:.3f} | {stages['inference']:.3f} | "
            f"{row['stream_fps'] * stages['inference'] / 1e3:.0%} |"
        )
    lines += [
        "",
        "Reading the table: with reading ahead, capture and preprocess are timed in the reader thread and "
        "overlap the model; the stream's FPS is frames over wall time. Where the reader and the model share "
        "the cores, decoding costs the model its core time, which is why the stream stays below the best "
        "model-alone figure even when the reader keeps up. The last column is frames per second times the "
        "model's median time: the share of the caller's wall time spent inside the backend. Near 100%, the "
        "stream waits on nothing but the model, and what is left of the gap to the model alone is the model "
        "running slower beside the decoder on the same cores.",
        "",
    ]
    bound = cpu_bound(result)
    if bound:
        lines += [
            f"The most these cores allow: each frame costs {bound['core_ms']:.2f} core-ms (decoding "
            f"{bound['decode_ms']:.2f}, pre-processing {bound['preprocess_ms']:.2f}, the model on one thread "
            f"{bound['model_ms']:.2f}), so {bound['cores']} cores run at most **{bound['fps']:,.0f} FPS = "
            f"{bound['vs_best_model']:.2f}x the best model alone**, however the work is split between threads."
            + (
                " A stream at 0.9x the best model alone needs the decoding off these cores (a board's hardware "
                "decoder, a camera that delivers raw frames)."
                if bound["vs_best_model"] < 0.9
                else ""
            ),
            "",
        ]
    default = next(
        (
            row
            for row in result["rows"]
            if row["way"] == "read ahead (default)" and row["threads"] == result.get("default_threads")
        ),
        None,
    )
    if default:
        lines += [
            f"The default (read ahead, {default['threads']} model thread(s) beside the reader) runs at "
            f"**{default['vs_model_same_threads']:.2f}x the model alone on the same threads**: what the stream's "
            "plumbing costs beyond the cores the decoder takes.",
            "",
        ]
    return "\n".join(lines + many_streams_lines(result.get("many_streams")))


def many_streams_lines(many: "dict | None") -> "list[str]":
    if not many:
        return []
    lines = [
        "## Many streams into one runtime",
        "",
        f"The clip opened N times, as N cameras, into one {many['backend']} runtime ({many['model_threads']} model "
        "thread(s)): each round reads one frame from every stream, privatizes the N samples in one batched call "
        "and restores each, while the next round is read ahead (`sensorveil benchmark BUNDLE --streams 8 "
        "--source walkway.avi`). A frame's latency is its round's work, from the first read to the last restore.",
        "",
        f"| streams | aggregate FPS | per stream FPS | p50 ms | p95 ms | >= {many['sensor_fps']:.0f} FPS each |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {row['streams']} | {row['aggregate_fps']:,.0f} | {row['per_stream_fps']:,.0f} | "
        f"{row['latency_p50_ms']:.2f} | {row['latency_p95_ms']:.2f} | "
        f"{'yes' if row['keeps_sensor_rate'] else 'no'} |"
        for row in many["rows"]
    ]
    return lines + [""]


def cpu_bound(result: dict) -> "dict | None":
    """Frames per second if every core were busy all the time on decoding, pre-processing and the model on
    one thread (its most efficient use of a core), from this run's own figures: no split of the work
    between threads can do better."""
    one_thread = [row for row in result["rows"] if row["threads"] == 1]
    cores = result.get("cpu", {}).get("logical_cores")
    if not one_thread or not cores:
        return None
    model_ms = 1e3 / max(row["model_alone_fps"] for row in one_thread)
    preprocess_ms = min(row["stage_ms_p50"]["preprocess"] for row in one_thread)
    decode_ms = 1e3 / result["decode_fps"]
    core_ms = decode_ms + preprocess_ms + model_ms
    fps = cores * 1e3 / core_ms
    return {
        "cores": cores,
        "decode_ms": decode_ms,
        "preprocess_ms": preprocess_ms,
        "model_ms": model_ms,
        "core_ms": core_ms,
        "fps": fps,
        "vs_best_model": fps / result["best_model_alone_fps"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", type=Path, default=CLIP)
    parser.add_argument(
        "--work", type=Path, default=REPO / "timing-bundles", help="where the depth bundle is built or reused"
    )
    parser.add_argument("--threads", default=None, help="comma-separated model thread counts (default 1..cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--allow-dirty", action="store_true", help="measure from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    if args.render_only:
        result = json.loads((args.out / "stream_plumbing.json").read_text())
    else:
        require_clean(args.allow_dirty)
        record = provenance([__file__] + list(sys.argv[1:] if argv is None else argv), args.allow_dirty)
        if not args.clip.is_file():
            parser.error(f"{args.clip}: not found; expected walkway.avi (set SENSORVEIL_SHARED or --clip)")
        threads = (
            [int(t) for t in args.threads.split(",")] if args.threads else list(range(1, (os.cpu_count() or 1) + 1))
        )
        result = measure(depth_bundle(args.work), args.clip, threads, args.rounds)
        result["default_threads"], result["decoder_threads"] = stream_threads(), DECODER_THREADS
        result.update(
            {
                "command": "python scripts/stream_plumbing.py" + (" " + " ".join(argv) if argv else ""),
                "cpu": cpu_description(),
                "platform": platform.platform(),
                "rounds": args.rounds,
                "timestamp": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "provenance": record,
            }
        )
        result = portable(result, shared=SHARED)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "stream_plumbing.json").write_text(json.dumps(result, indent=1))
    (args.out / "stream_plumbing.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
