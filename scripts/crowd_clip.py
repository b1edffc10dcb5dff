"""Write the crowded test scene built from walkway.avi's own people (lab/sensorveil_lab/crowd_scene.py):

    PYTHONPATH=. python scripts/crowd_clip.py --out ~/clips/crowd-walkway.avi

The clip and its truth (OUT.json: each frame's person boxes, the standing group) are derived from
../shared/media/walkway.avi (OpenCV's vtest.avi, OpenCV's licence): keep them out of the repository.
"""
import argparse
import os
from pathlib import Path

from sensorveil_lab.crowd_scene import LAYERS, STANDING, write_crowd

ROOT = Path(__file__).resolve().parents[1]

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(SHARED / "media" / "walkway.avi"))
    parser.add_argument("--out", required=True, help="the crowd clip to write (.avi); its truth goes to OUT.json")
    parser.add_argument("--layers", type=int, default=LAYERS, help="time-shifted copies of the clip's people")
    parser.add_argument("--standing", type=int, default=STANDING, help="people who stand for the whole clip")
    args = parser.parse_args(argv)
    if not Path(args.source).is_file():
        parser.error(f"source clip not found: {args.source} (set --source or SENSORVEIL_SHARED)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    record = write_crowd(args.source, args.out, args.layers, args.standing)
    print(f"wrote {args.out}: {record['frames']} frames, {record['people_per_frame_mean']:.1f} people a frame "
          f"(of them {len(record['standing'])} standing); truth in {args.out}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
