"""What OpenCV's thread pool costs the camera pipeline: each bundle streamed as `sensorveil benchmark` streams it,
with the pipeline's OpenCV ops on the calling thread (as the runtime ships, PersonCrops.opencv_threads 1) and on
OpenCV's own pool (None: the library's default), taking turns round by round so both see the same machine.

CPU ms a frame is every thread of the process (time.process_time), so a pool whose threads wait actively for
work shows up there even where it adds no frames a second. docs/decisions/0032-opencv-on-the-calling-thread.md

    python scripts/opencv_threads.py --bundle BUNDLES/recall BUNDLES/fast --clip ../shared/media/walkway.avi \\
        --out docs/opencv_threads.md
"""
import argparse
import statistics
import sys
from pathlib import Path

from sensorveil.runtime.camera.pipeline import OPENCV_THREADS
from sensorveil_lab.provenance import page_header, portable, provenance, require_clean, write_page

# the shipped setting read from the runtime, so the page's "as shipped" row is what the runtime does
SETTINGS = {"calling thread (as shipped)": OPENCV_THREADS, "OpenCV's own pool": None}


def rounds(bundles: list, clip: Path, frames: int, count: int) -> dict:
    """{bundle: {setting: {"cpu_ms": [...], "fps": [...]}}}, the settings taking turns within each round."""
    from sensorveil.benchmarks.stream_bench import benchmark_stream
    from sensorveil.runtime.camera import pipeline

    shipped = pipeline.PersonCrops.opencv_threads
    figures = {str(bundle): {name: {"cpu_ms": [], "fps": []} for name in SETTINGS} for bundle in bundles}
    try:
        for round_ in range(count):
            for bundle in bundles:
                for name, threads in SETTINGS.items():
                    pipeline.PersonCrops.opencv_threads = threads
                    report = benchmark_stream(str(bundle), str(clip), backend="onnxruntime", frames=frames)
                    row = figures[str(bundle)][name]
                    row["cpu_ms"].append(report["cpu_ms_per_frame"])
                    row["fps"].append(report["fps"])
                    print(f"round {round_ + 1}: {bundle.name}, {name}: {row['cpu_ms'][-1]:.2f} CPU ms a frame, "
                          f"{row['fps'][-1]:.1f} FPS", flush=True)
    finally:
        pipeline.PersonCrops.opencv_threads = shipped
    return figures


def spread(values: list, digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def page(result: dict, record: dict) -> str:
    lines = ["# What OpenCV's thread pool costs the camera pipeline", "", page_header(record), "",
             f"Clip `{Path(result['clip']).name}`, {result['frames']} frames a round after the warm-up, as "
             "`sensorveil benchmark` streams them (onnxruntime, the stream's shared CPU policy). CPU ms a frame: "
             "every thread of the process. Median (lowest-highest) of "
             f"{result['rounds']} rounds; in each round the two settings run one after the other.", "",
             "| bundle | OpenCV ops on | CPU ms a frame | FPS | CPU against the pool |", "|---|---|---|---|---|"]
    for bundle, settings in result["figures"].items():
        pool = statistics.median(settings["OpenCV's own pool"]["cpu_ms"])
        for name, row in settings.items():
            share = statistics.median(row["cpu_ms"]) / pool - 1
            lines.append(f"| `{bundle}` | {name} | {spread(row['cpu_ms'])} | {spread(row['fps'], 1)} | "
                         f"{share:+.1%} |")
    lines += ["", "The calling thread is what the runtime ships (sensorveil.runtime.camera.pipeline.OPENCV_THREADS): "
              "the pipeline sets OpenCV to one thread while it prepares or restores a frame and puts the caller's "
              "setting back after each call.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, nargs="+", required=True, help="camera bundles to stream")
    parser.add_argument("--clip", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=500, help="frames a round, after the warm-up")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    figures = rounds(args.bundle, args.clip, args.frames, args.rounds)
    folders = {str(args.bundle[0].parent.resolve()): "BUNDLES"}
    figures = {portable(bundle, folders=folders): rows for bundle, rows in figures.items()}   # keys too
    result = portable({"clip": str(args.clip), "frames": args.frames, "rounds": args.rounds, "figures": figures},
                      folders=folders)
    write_page(args.out, page(result, record), record, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
