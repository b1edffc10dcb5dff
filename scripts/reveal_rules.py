"""What the quiet scene's reveal rules do to a people counter downstream (docs/decisions/0010-scene-reveals.md).

A block of the quiet scene (sensorveil/runtime/camera/scene.py) that starts showing the camera replaces the
neutral grey at once, and a background-model counter reads that change as something new. This runs a PASS
bundle's whole pipeline over a clip under four reveal rules: each block as soon as it is quiet (the rule
before decision 0010), only regions no counter takes for a person (wider than tall, or taller than the
tallest person), all blocks together once every horizon, and both (the rule now). For each it prints, for
the pipeline's own counter (camera_results.py's "pipeline": MOG2 + tracker) run on the raw and on the
released video: the share of frames where both count the same people, the mean released-minus-raw count
and its mean absolute value, how many of the counter's finds outside every privatized window lie over a
block revealed in the 30 frames before, and the share of the scene's blocks that show the camera at the end.
``--seeds`` seeded runs (each draws other substitutes) are pooled.

    python scripts/reveal_rules.py --bundle bundles/camera/pass-walkway --clip ../shared/media/walkway.avi

Every rule only holds camera pixels back (a block is revealed only once quiet for the horizon), so none can
show more of a person; the leak meter in scripts/camera_results.py checks the rule the pipeline runs.
"""
import argparse
import functools
from pathlib import Path

import numpy as np

from sensorveil_lab.camera_pipeline import outside_windows
from sensorveil_lab.people_counters import counter
from sensorveil_lab.scene_reveals import RevealClock

ROOT = Path(__file__).resolve().parents[1]

# name -> (reveal_every, tallest): reveal_every 1 reveals on every update; tallest 0 makes every region one
# that is "taller than a person", so the shape rule lets all through
RULES = {
    "each block once quiet (before)": (1, 0),
    "unpersonlike regions only": (1, None),
    "together every horizon": (None, 0),
    "both (now)": (None, None),
}


def run_rule(bundle: Path, clip: Path, rule: tuple, seed: int) -> dict:
    """One seeded run of the pipeline with the quiet scene built under ``rule``."""
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.camera import pipeline, scene
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream
    every, tallest = rule
    options = {"reveal_every": every, "tallest": scene.TALLEST_PERSON if tallest is None else tallest}
    original = pipeline.QuietScene
    pipeline.QuietScene = functools.partial(original, **options)
    try:
        stream = Stream(Privatizer.load(bundle, output="sample", seed=seed), open_source(str(clip), prefetch=False))
        on_raw, on_release, clock = counter("pipeline"), counter("pipeline"), RevealClock()
        diffs, over = [], 0
        for result in stream:
            clock.note(stream.preprocessor.scene, result.frame.index)
            found = on_release(result.output)
            diffs.append(len(found) - len(on_raw(result.frame.data)))
            outside = outside_windows(found, stream.preprocessor.last_windows, result.output.shape[:2])
            over += clock.over_recent(outside, result.frame.index) or 0
        return {"diffs": diffs, "over_reveals": over, "shown": float(stream.preprocessor.scene.shown.mean())}
    finally:
        pipeline.QuietScene = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--clip", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.clip.name}, the pipeline's own counter on the raw and the released video, {args.seeds} seed(s)\n")
    print("| reveal rule | same count | mean diff | mean abs diff | finds over a recent reveal | scene shown |")
    print("|---|---|---|---|---|---|")
    for name, rule in RULES.items():
        runs = [run_rule(args.bundle, args.clip, rule, seed) for seed in range(args.seeds)]
        diffs = np.concatenate([run["diffs"] for run in runs])
        print(f"| {name} | {np.mean(diffs == 0):.1%} | {diffs.mean():+.2f} | {np.abs(diffs).mean():.2f} | "
              f"{sum(run['over_reveals'] for run in runs):,} | {np.mean([run['shown'] for run in runs]):.0%} |",
              flush=True)


if __name__ == "__main__":
    main()
