"""Soak run: synthetic depth through a depth bundle for a given time; is the runtime's memory flat?

    python scripts/soak.py [--bundle BUNDLE] [--minutes 60] [--interval-s 60] [--warmup-minutes 5]
                           [--bad-every 500] [--json soak.json]

Streams the endless synthetic-depth source (512x424 frames, the person patch of PR-GAN section 6.1)
through the bundle with the runtime's Stream, as fast as the CPU allows (more frames per hour than a
30 FPS sensor: a harder test), into a sink that takes every frame. Every ``--bad-every`` frames one
frame of NaN is fed instead, so the bad-frame path runs for the whole hour too.

Every interval it prints the process's resident memory (RSS, from /proc/self/statm), the frames so far
and the FPS. At the end: the RSS samples after the warm-up, their spread as a share of their mean, and
the least-squares slope in MB per hour. It exits 1 when the spread exceeds ``--tolerance`` (5%): the
goal is RSS flat within 5% after warm-up over one hour. CI runs a short version (see .ci/run).

Without --bundle, a one-epoch PR-GAN depth bundle is built first (scripts/depth_bundle.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from sensorveil_lab.depth_bundle import depth_bundle

PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_mb() -> float:
    """Resident memory now (not the peak, which never comes down)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_MB


class WithBadFrames:
    """A source wrapper that replaces every ``every``-th frame by NaN: the bad-frame path soaks too."""

    def __init__(self, inner, every: int):
        self.inner, self.every = inner, every
        self.uri, self.fps, self.live = inner.uri, inner.fps, getattr(inner, "live", True)

    def read(self):
        frame = self.inner.read()
        if frame is not None and self.every and frame.index % self.every == self.every - 1:
            frame = type(frame)(np.full(frame.data.shape, np.nan, np.float32), frame.timestamp, frame.index,
                                frame.modality)
        return frame


def spread_and_slope(samples: list[tuple[float, float]]) -> dict:
    """(seconds, MB) samples -> the spread (max - min) over the mean, and the slope in MB per hour."""
    seconds, mb = np.array(samples, dtype=np.float64).T
    slope = float(np.polyfit(seconds / 3600.0, mb, 1)[0]) if len(samples) > 1 else 0.0
    return {"samples": len(samples), "mean_mb": float(mb.mean()), "min_mb": float(mb.min()),
            "max_mb": float(mb.max()), "spread": float((mb.max() - mb.min()) / mb.mean()),
            "slope_mb_per_hour": slope}


def soak(bundle: Path, seconds: float, interval_s: float, warmup_s: float, bad_every: int, log=None) -> dict:
    log = log or (lambda line: print(line, flush=True))   # a log file sees each minute as it comes
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.sinks import open_sink
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream

    privatizer = Privatizer.load(bundle)
    delivered = [0]
    sink = open_sink(lambda output, frame: delivered.__setitem__(0, delivered[0] + 1))
    samples, started = [], time.monotonic()
    next_sample = started + interval_s
    with open_source("synthetic-depth") as source:
        stream = Stream(privatizer, WithBadFrames(source, bad_every), sink)
        log(f"{'minute':>7} {'frames':>10} {'bad':>6} {'FPS':>8} {'RSS MB':>8}")
        for _ in stream:
            now = time.monotonic()
            if now < next_sample:
                continue
            elapsed = now - started
            samples.append((elapsed, rss_mb()))
            counters = stream.counters
            log(f"{elapsed / 60:7.1f} {counters.frames_out:10,d} {counters.bad:6,d} "
                f"{counters.frames_out / elapsed:8.1f} {samples[-1][1]:8.1f}")
            next_sample += interval_s
            if elapsed >= seconds:
                break
    after = [(t, mb) for t, mb in samples if t >= warmup_s]
    report = stream.report()
    return {"bundle": str(bundle), "seconds": seconds, "warmup_s": warmup_s, "interval_s": interval_s,
            "frames_out": report["frames_out"], "bad": report["bad"], "delivered": delivered[0],
            "rss_samples": samples, "after_warmup": spread_and_slope(after) if after else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, default=None, help="a depth bundle (default: one built here)")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--interval-s", type=float, default=60.0, help="seconds between RSS samples")
    parser.add_argument("--warmup-minutes", type=float, default=5.0, help="left out of the flatness check")
    parser.add_argument("--bad-every", type=int, default=500, help="one NaN frame every N frames (0: none)")
    parser.add_argument("--tolerance", type=float, default=0.05, help="largest allowed RSS spread after warm-up")
    parser.add_argument("--work", type=Path, default=Path("soak-out"), help="where a built bundle goes")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    bundle = args.bundle or depth_bundle(args.work)
    result = soak(bundle, args.minutes * 60, args.interval_s, args.warmup_minutes * 60, args.bad_every)
    flat = result["after_warmup"]
    if flat is None:
        print("no RSS sample after the warm-up: run longer than --warmup-minutes", file=sys.stderr)
        return 2
    result["tolerance"], result["flat"] = args.tolerance, flat["spread"] <= args.tolerance
    print(f"after warm-up: RSS {flat['min_mb']:.1f}-{flat['max_mb']:.1f} MB over {flat['samples']} samples, "
          f"spread {100 * flat['spread']:.2f}% (goal <= {100 * args.tolerance:.0f}%), "
          f"slope {flat['slope_mb_per_hour']:+.2f} MB/hour; {result['frames_out']:,d} frames, {result['bad']:,d} bad "
          f"(counted and skipped), {result['delivered']:,d} delivered to the sink")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
