"""sensorveil scene-still BUNDLE --clip CLIP --out IMAGE: a picture of the empty place for `--scene-still`, made
from a recording of it with the bundle's learned detector leaving its people out. Whatever the picture shows is
released, so the verb says to look at it before using it."""
import sys
from pathlib import Path

from sensorveil.cli.common import positive_int


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_scene_still(args) -> int:
    import cv2

    from sensorveil.benchmarks.scene_still import scene_still
    log("scene still: the median of {} with the people {} finds left out".format(args.clip, args.bundle))
    still = scene_still(args.bundle, args.clip, frames=args.frames, log=log)
    if not cv2.imwrite(str(args.out), still):
        raise OSError("could not write {} (expected a path ending .png or .jpg in a folder that exists)".format(
            args.out))
    print("wrote {} ({}x{}): look at it before releasing it; a person the detector missed in every sampled frame "
          "stays in it. Then: sensorveil run {} --source ... --scene-still {}".format(
              args.out, still.shape[1], still.shape[0], args.bundle, args.out))
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("scene-still", help="a picture of the empty place for --scene-still, from a recording, "
                                             "with the bundle's people detector leaving people out")
    p.add_argument("bundle", help="a camera BUNDLE exported with the learned person detector")
    p.add_argument("--clip", type=Path, required=True, help="a recording of the place from the deployed camera")
    p.add_argument("--out", type=Path, required=True, help="the picture to write (PNG or JPEG)")
    p.add_argument("--frames", type=positive_int, default=None, help="only the clip's first N frames")
    p.set_defaults(func=cmd_scene_still)
