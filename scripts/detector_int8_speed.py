"""The camera bundle's person detector, fp32 against int8 ONNX, in onnxruntime on this CPU.

    python scripts/detector_int8_speed.py                       # walkway.avi from $SENSORVEIL_SHARED/media
    python scripts/detector_int8_speed.py --runs 100 --threads 1,2,4

Prints, for each intra-op thread count, the median milliseconds per frame of each graph over --runs runs
at batch 1, the two graphs interleaved run by run in one process (so a load that comes and goes on a shared
machine falls on both alike: read the ratio, not the absolute figures), then the people each graph finds
(learned.people_boxes at the default score, as the runtime counts them) on walkway frames 0..100 step 10.
The int8 graph is the one an int8 ONNX bundle ships: calibrated on the clip's frames as the exporter does
(sensorveil.export.person_detector.onnx_int8), quantized on first use and cached.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from sensorveil.export.person_detector import CALIBRATION_FRAMES, clip_frames, detector_onnx
from sensorveil.export.person_detector.frames import frames_at
from sensorveil.export.person_detector.onnx_int8 import detector_onnx_int8, people_counts
from sensorveil.runtime.backends.onnxruntime_backend import make_session

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def interleaved_ms(paths: dict, image: np.ndarray, threads: int, runs: int) -> dict:
    """Median ms per run of each graph, the graphs taking turns run by run after a warm-up of each."""
    sessions = {name: make_session(path, threads=threads) for name, path in paths.items()}
    for session in sessions.values():
        for _ in range(5):
            session.run(None, {"image": image})
    times = {name: [] for name in sessions}
    for _ in range(runs):
        for name, session in sessions.items():
            start = time.perf_counter()
            session.run(None, {"image": image})
            times[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clip", type=Path, default=SHARED / "media" / "walkway.avi")
    parser.add_argument("--runs", type=int, default=60, help="runs of each graph per thread count (median)")
    parser.add_argument("--threads", default="1,2", help="intra-op thread counts, comma-separated")
    args = parser.parse_args(argv)
    import onnxruntime as ort
    fp32 = detector_onnx()
    int8 = detector_onnx_int8(clip_frames(str(args.clip), CALIBRATION_FRAMES))
    print(f"onnxruntime {ort.__version__} on {platform.processor() or platform.machine()}, {os.cpu_count()} "
          f"cores; fp32 {fp32.stat().st_size / 1e6:.1f} MB, int8 {int8.stat().st_size / 1e6:.1f} MB ({int8.name})")
    indices = list(range(0, 101, 10))
    frames = frames_at(args.clip, indices)
    image = frames[-1][None].astype(np.float32)
    for threads in (int(value) for value in args.threads.split(",")):
        ms = interleaved_ms({"fp32": fp32, "int8": int8}, image, threads, args.runs)
        print(f"{threads} intra-op thread(s), median of {args.runs} interleaved runs: fp32 {ms['fp32']:.1f} ms, "
              f"int8 {ms['int8']:.1f} ms, int8/fp32 {ms['int8'] / ms['fp32']:.2f}")
    counts = {name: people_counts(path, frames) for name, path in (("fp32", fp32), ("int8", int8))}
    print(f"people per walkway frame {indices[0]}..{indices[-1]} step 10: fp32 {counts['fp32']} "
          f"(total {sum(counts['fp32'])}), int8 {counts['int8']} (total {sum(counts['int8'])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
