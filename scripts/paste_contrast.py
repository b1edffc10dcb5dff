"""What the gap between a pasted substitute and the neutral grey scene does to the count and to the colours
(docs/decisions/0011-neutral-contrast.md).

A PASS bundle's cut-out release pastes each substitute on the quiet scene (sensorveil/runtime/camera/scene.py),
moved at least a gap of grey levels from the scene behind it (composite.stand_out), so a background-model
counter downstream still finds it. On the camera's blocks the gap is PERSON_CONTRAST (100); on blocks still
showing the flat neutral grey (128) it is the scene's ``neutral_contrast``, and at 100 a person there is at most
28 or at least 228 grey: black and white. This runs the whole pipeline over a clip once per neutral gap and
prints, for each of camera_results.py's counters (the pipeline's own, plain MOG2, KNN) run on the raw and the
released video, the share of frames where both count the same people and the mean released-minus-raw count;
and, of the substitutes' pixels pasted on the neutral grey, the share that is near black or near white (grey
below 32 or above 223) and their mean colourfulness (largest minus smallest of B, G, R). ``--sheet`` writes one
released frame per gap side by side.

    python scripts/paste_contrast.py --bundle bundles/camera/pass-walkway --clip ../shared/media/walkway.avi

The gap only moves the substitutes' grey levels (bank people, never the camera's): privacy is not in play.
Since decision 0029 the neutral scene is a fixed grain, not flat grey, and asks for no gap by default; this script
still compares the gaps on it. scripts/neutral_scene.py compares flat grey with the grain.
"""
import argparse
import functools
from pathlib import Path

import numpy as np

from sensorveil_lab.camera_pipeline import release_output
from sensorveil_lab.people_counters import COUNTERS, counters

ROOT = Path(__file__).resolve().parents[1]

GAPS = (100, 70, 50)
NEAR_BLACK, NEAR_WHITE = 32, 223


def run_gap(bundle: Path, clip: Path, gap: int, seed: int, sheet_frame: int) -> dict:
    """One seeded run of the pipeline with the neutral scene's gap ``gap``."""
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.camera import pipeline
    from sensorveil.runtime.camera.detect import to_gray
    from sensorveil.runtime.camera.scene import neutral_scene
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream
    original = pipeline.QuietScene
    pipeline.QuietScene = functools.partial(original, neutral_contrast=gap)
    try:
        privatizer = Privatizer.load(bundle, output=release_output(bundle), seed=seed)   # as `sensorveil run`
        stream = Stream(privatizer, open_source(str(clip), prefetch=False), prepare_ahead=False)
        pairs, diffs = counters(), {name: [] for name in COUNTERS}
        extreme, colour, pasted, sheet = 0, 0.0, 0, None
        for result in stream:
            for name, (on_raw, on_release) in pairs.items():
                diffs[name].append(len(on_release(result.output)) - len(on_raw(result.frame.data)))
            scene = stream.preprocessor.scene.image
            on_neutral = (result.output != scene).any(axis=-1) & (scene == neutral_scene(scene.shape)).all(axis=-1)
            pixels = result.output[on_neutral]
            grey = to_gray(pixels[None])[0]
            extreme += int(((grey < NEAR_BLACK) | (grey > NEAR_WHITE)).sum())
            colour += float((pixels.max(axis=1).astype(np.int16) - pixels.min(axis=1)).sum())
            pasted += len(pixels)
            if result.frame.index == sheet_frame:
                sheet = result.output.copy()
        return {"diffs": {name: np.asarray(d) for name, d in diffs.items()}, "pasted": pasted,
                "extreme": extreme / max(pasted, 1), "colour": colour / max(pasted, 1), "sheet": sheet}
    finally:
        pipeline.QuietScene = original


def write_sheet(path: Path, runs: dict) -> None:
    import cv2
    tiles = []
    for gap, run in runs.items():
        tile = run["sheet"].copy()
        cv2.putText(tile, f"neutral gap {gap}", (8, 24), cv2.FONT_HERSHEY_SIMPLEX, 0.7, (0, 255, 255), 2)
        tiles.append(tile)
    cv2.imwrite(str(path), np.concatenate(tiles, axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--clip", type=Path, required=True)
    parser.add_argument("--gaps", type=int, nargs="+", default=list(GAPS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sheet", type=Path, help="write one released frame per gap here (png)")
    parser.add_argument("--sheet-frame", type=int, default=597)
    args = parser.parse_args()
    print(f"{args.clip.name}, seed {args.seed}: each counter on the raw and the released video; the substitutes' "
          "pixels on the neutral grey\n")
    print("Each counter's cell: frames counted the same / mean released-minus-raw count.\n")
    print("| neutral gap | " + " | ".join(COUNTERS)
          + " | pixels pasted on grey | near black or white | colourfulness |")
    print("|---" * (4 + len(COUNTERS)) + "|")
    runs = {}
    for gap in args.gaps:
        run = runs[gap] = run_gap(args.bundle, args.clip, gap, args.seed, args.sheet_frame)
        cells = [f"{np.mean(d == 0):.1%} / {d.mean():+.2f}" for d in run["diffs"].values()]
        print(f"| {gap} | " + " | ".join(cells) + f" | {run['pasted']:,} | {run['extreme']:.1%} | "
              f"{run['colour']:.1f} |", flush=True)
    if args.sheet:
        write_sheet(args.sheet, runs)


if __name__ == "__main__":
    main()
