"""What the stream adds to the model on a real camera clip (issue 11, part 3): walkway.avi through the
180x180 depth bundle, each way a stream can run, beside the model alone, in one run.

    python scripts/stream_plumbing.py                  # writes docs/stream_plumbing.{md,json}
    python scripts/stream_plumbing.py --render-only    # re-renders the page from the JSON

Ways a stream can run (``Stream`` and ``open_source`` as ``sensorveil run`` uses them):
* one frame at a time: read, pre-process, model, post-process, all in the caller's thread;
* decode ahead: ``Prefetching`` decodes the next frames in a thread (the stream before read-ahead);
* read ahead: decoding and pre-processing of the next frames in a thread (``ReadAhead``, the default:
  behind ``Prefetching``'s own decoding thread, so each frame changes threads twice);
* read ahead, one reader thread: the same without ``Prefetching``, decoding in the stream's reader.
Each at every model thread count. Beside each: the model alone (``model_alone_fps``: the same privatizer
and threads, back-to-back calls on the stream's last sample) and the clip's decoding alone (OpenCV,
one thread, nothing else running): a stream cannot outrun its decoder. Rounds are interleaved so a
busy spell of the machine spreads over every row; each figure is the median over rounds.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO))

from depth_bundle import depth_bundle  # noqa: E402

from sensorveil.benchmarks.report import cpu_description, cpu_text  # noqa: E402
from sensorveil.benchmarks.stream_bench import benchmark_stream  # noqa: E402
from sensorveil.runtime.sources import open_source  # noqa: E402

CLIP = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared")) / "media" / "walkway.avi"
WAYS = {   # name: (open_source's prefetch, Stream's prepare_ahead)
    "one frame at a time": (False, False),
    "decode ahead": (True, False),
    "read ahead (default)": (True, True),
    # the default's decoding hops threads twice (Prefetching's reader, then the stream's): this row reads
    # and pre-processes in the stream's one reader thread, to measure what the second hop costs
    "read ahead, one reader thread": (False, True),
}
WARMUP = 20


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
    samples, decodes = {}, []
    for round_index in range(rounds):
        decodes.append(decode_fps(clip))
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
    return {"rows": rows, "decode_fps": float(np.median(decodes)), "best_model_alone_fps": best_model}


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
        "# What the stream adds to the model: walkway.avi through the depth bundle", "",
        f"Generated by `{result['command']}` on {cpu_text(result['cpu'])} ({result['timestamp']}); do not edit by hand, "
        "`--render-only` re-renders it from stream_plumbing.json. Median of "
        f"{result['rounds']} interleaved rounds; each stream is the whole clip ({result['rows'][0]['frames']} timed "
        f"frames after {WARMUP} warm-up) through `Stream` as `sensorveil run` runs it, no sink.", "",
        f"Decoding the clip alone (OpenCV, one thread): **{result['decode_fps']:,.0f} FPS**. The model alone, "
        f"best thread count: **{result['best_model_alone_fps']:,.0f} calls/s** (the same privatizer, back-to-back "
        "calls on one sample).", "",
        "| how the stream runs | model threads | stream FPS | model alone, same threads | stream / model, same "
        "threads | stream / best model | capture p50 ms | preprocess p50 ms | inference p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["rows"]:
        stages = row["stage_ms_p50"]
        lines.append(f"| {row['way']} | {row['threads']} | {row['stream_fps']:,.0f} | {row['model_alone_fps']:,.0f} | "
                     f"{row['vs_model_same_threads']:.2f}x | {row['vs_best_model']:.2f}x | {stages['capture']:.3f} | "
                     f"{stages['preprocess']:.3f} | {stages['inference']:.3f} |")
    lines += ["", "Reading the table: with reading ahead, capture and preprocess are timed in the reader thread and "
              "overlap the model; the stream's FPS is frames over wall time. Where the reader and the model share "
              "the cores, decoding costs the model its core time, which is why the stream stays below the best "
              "model-alone figure even when the reader keeps up.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", type=Path, default=CLIP)
    parser.add_argument("--work", type=Path, default=REPO / "timing-bundles", help="where the depth bundle is built or reused")
    parser.add_argument("--threads", default=None, help="comma-separated model thread counts (default 1..cores)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    if args.render_only:
        result = json.loads((args.out / "stream_plumbing.json").read_text())
    else:
        if not args.clip.is_file():
            parser.error(f"{args.clip}: not found; expected walkway.avi (set SENSORVEIL_SHARED or --clip)")
        threads = [int(t) for t in args.threads.split(",")] if args.threads else list(range(1, (os.cpu_count() or 1) + 1))
        result = measure(depth_bundle(args.work), args.clip, threads, args.rounds)
        result.update({"command": "python scripts/stream_plumbing.py" + (" " + " ".join(argv) if argv else ""),
                       "cpu": cpu_description(), "platform": platform.platform(), "rounds": args.rounds,
                       "timestamp": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "stream_plumbing.json").write_text(json.dumps(result, indent=1))
    (args.out / "stream_plumbing.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
