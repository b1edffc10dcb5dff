"""A picture of the empty place from a recording of it, for `sensorveil run/camera-audit --scene-still`: the
clip's colour median with the people a camera bundle's learned detector finds (on 2x2 tiles, as the camera
audit's references) left out, so a person who stands at one place for most of the clip is not taken for the
scene. Whatever the still shows is released: look at it before using it (a person the detector missed in every
sampled frame would be in it).

    python scripts/scene_still.py --bundle BUNDLE --clip CLIP --out still.png [--frames N]
"""
import argparse
import sys
from pathlib import Path

import numpy as np


def scene_still(bundle, clip, frames=None) -> np.ndarray:
    """The empty place as BGR uint8: the clip's median with the bundle's detected people left out."""
    from sensorveil.benchmarks.clip_audit import read_clip
    from sensorveil.benchmarks.reference_people import TiledPeople, empty_scene
    from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
    from sensorveil.runtime.stream import load_for_stream
    privatizer = load_for_stream(bundle)
    if DETECTOR_GRAPH not in privatizer.pipeline.graphs:
        raise SystemExit(f"{bundle}: carries no learned person detector; export it with one to leave people out")
    still = empty_scene(read_clip(clip, frames), TiledPeople(privatizer.pipeline.run_graph), colour=True)
    return np.clip(np.round(still), 0, 255).astype(np.uint8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a camera bundle with the learned person detector")
    parser.add_argument("--clip", required=True, help="a recording of the place from the deployed camera")
    parser.add_argument("--out", required=True, help="the picture to write (PNG)")
    parser.add_argument("--frames", type=int, default=None, help="only the clip's first N frames")
    args = parser.parse_args()
    import cv2
    if not cv2.imwrite(args.out, scene_still(Path(args.bundle), Path(args.clip), args.frames)):
        sys.exit(f"could not write {args.out}")
    print(f"wrote {args.out}: look at it before releasing it (a person missed in every sampled frame stays in it)")


if __name__ == "__main__":
    main()
