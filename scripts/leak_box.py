"""What the release holds inside one box the leak meter flagged: the meter's reading, where its judged pixels come
from, and a picture of raw beside released.

The leak meter (sensorveil/benchmarks/leak_meter.py) reads how much of a raw person's detail the release keeps,
fitted over the person's pixels. A flagged box is a finding to look at, not a verdict: this script runs the bundle
as `sensorveil run` does (``stream_privatizer``: colour release, seeded draws) up to ``--frame``, and
for the box prints the meter's share, the judged pixels, and for each of them whether the released value is the
neutral scene's (the grey grain of decision 0029), the quiet scene's (what the pipeline shows of the place), or
neither, with the raw and empty-scene values of those that are neither. ``--png`` writes raw | released around
the box, 4x. Used for the crowd page of docs/camera_speed.md (decision 0012):

    python scripts/leak_box.py --bundle bundles/camera-speed/pass-crowd/fast --clip CROWD --frame 529 \\
        --box 371 75 28 40 --png leak-529.png
"""
import argparse
from pathlib import Path

import numpy as np

from sensorveil.benchmarks import leak_meter as meter
from sensorveil.runtime.camera.scene import neutral_scene
from sensorveil_lab.camera_pipeline import stream_privatizer
from sensorveil_lab.clips import clip_empty_scene

ROOT = Path(__file__).resolve().parents[1]



def frame_of(bundle: Path, clip: Path, index: int, seed: int):
    """(raw frame, release, the pre-processor) at frame ``index`` of the bundle's stream."""
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream
    stream = Stream(stream_privatizer(bundle, seed), open_source(str(clip), prefetch=False))
    for result in stream:
        if result.frame.index == index:
            return result.frame.data, result.output, stream.preprocessor
    raise SystemExit(f"{clip} has no frame {index}")


def report(raw, released, crops, empty, box) -> list:
    raw_grey, released_grey = meter.to_grey(raw), meter.to_grey(released)
    pasted = meter.pasted_mask(raw.shape, crops.last_windows)
    rows, cols, person, _ = meter.person_pixels(raw_grey, empty, box, pasted)
    shown = released_grey[rows, cols][person]
    scene = getattr(crops, "scene", None)
    scene_grey = meter.to_grey(scene.image)[rows, cols][person] if scene is not None else np.full(shown.shape, -1.0)
    neutral = meter.to_grey(neutral_scene(raw.shape))[rows, cols][person]   # the start where no still is given
    grey = np.abs(shown - neutral) < 1
    from_scene = (np.abs(shown - scene_grey) < 1) & ~grey
    share = meter.person_share(raw_grey, released_grey, empty, box, pasted)
    lines = [f"meter's share {share:.3f} over {person.sum()} judged person pixels: {grey.sum()} the neutral scene's, "
             f"{from_scene.sum()} the quiet scene's, {(~grey & ~from_scene).sum()} neither"]
    ys, xs = np.nonzero(person)
    for k in np.flatnonzero(~grey):
        y, x = ys[k] + rows.start, xs[k] + cols.start
        lines.append(f"  pixel ({x}, {y}): raw {raw_grey[y, x]:.1f}, empty scene {empty[y, x]:.1f}, released "
                     f"{released_grey[y, x]:.1f}")
    return lines


def picture(raw, released, box, path: Path, pad: int = 20) -> None:
    import cv2
    x, y, w, h = box
    rows, cols = slice(max(y - pad, 0), y + h + pad), slice(max(x - pad, 0), x + w + pad)
    big = [cv2.resize(image[rows, cols], None, fx=4, fy=4, interpolation=cv2.INTER_NEAREST)
           for image in (raw, released)]
    cv2.imwrite(str(path), np.hstack(big))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--clip", required=True)
    parser.add_argument("--frame", type=int, required=True)
    parser.add_argument("--box", type=int, nargs=4, required=True, metavar=("X", "Y", "W", "H"))
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed (camera_speed.py and the pages use 0)")
    parser.add_argument("--png", help="write raw | released around the box here")
    args = parser.parse_args()
    raw, released, crops = frame_of(Path(args.bundle), Path(args.clip), args.frame, args.seed)
    print("\n".join(report(raw, released, crops, clip_empty_scene(Path(args.clip)), tuple(args.box))))
    if args.png:
        picture(raw, released, tuple(args.box), Path(args.png))


if __name__ == "__main__":
    main()
