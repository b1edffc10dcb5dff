"""The motion detector's scale beside the learned graph (sensorveil/runtime/camera/learned.py MOTION_SCALE).

Motion alone and the pipeline's union (the bundle's learned graph every ``--every`` frames + motion) at each
scale, on one clip: every detector sees every frame, every 10th frame after the warm-up is scored against
the reference people of sensorveil.benchmarks.detector_recall (a made scene's recorded people, else the
offline detectors), and each detector's CPU time per frame is read with time.process_time (read it as a
ratio: it moves with the machine's load). The figures of docs/decisions/0008-motion-half-size.md:

    python scripts/motion_scale.py --bundle bundles/camera/pass-walkway --clip ../shared/media/walkway.avi
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from camera_results import clip_frames, scene_truth  # noqa: E402

from sensorveil.benchmarks.detector_recall import found, wilson  # noqa: E402
from sensorveil.benchmarks.reference_people import TiledPeople, empty_scene, merge_boxes, offline_boxes  # noqa: E402

SCALES = (1.0, 0.5)
START, SAMPLE_EVERY = 30, 10     # as detector_recall scores: past motion's warm-up, every 10th frame


def compared(run_graph, every: int) -> dict:
    """name -> detect(frame), each with its own background model."""
    from sensorveil.runtime.camera import MotionPeopleDetector
    from sensorveil.runtime.camera.learned import LearnedPeopleDetector
    detectors = {f"motion alone at {s}": MotionPeopleDetector(scale=s).detect for s in SCALES}
    for s in SCALES:
        union = LearnedPeopleDetector(run_graph, every=every, motion=MotionPeopleDetector(scale=s))
        detectors[f"pipeline (graph every {every}) + motion at {s}"] = union.detect
    return detectors


def main() -> None:
    from sensorveil.runtime import Privatizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a camera bundle with the learned detector")
    parser.add_argument("--clip", required=True)
    parser.add_argument("--every", type=int, default=3, help="the graph's frame step (the camera bundles' own)")
    args = parser.parse_args()
    run_graph = Privatizer.load(Path(args.bundle)).run_graph
    frames, (truth, _) = clip_frames(Path(args.clip)), scene_truth(Path(args.clip))
    empty, tiles = empty_scene(frames), TiledPeople(run_graph)
    detectors = compared(run_graph, args.every)
    cpu, hits, total = dict.fromkeys(detectors, 0.0), dict.fromkeys(detectors, 0), 0
    for index, frame in enumerate(frames):
        boxes = {}
        for name, detect in detectors.items():
            start = time.process_time()
            boxes[name] = detect(frame)
            cpu[name] += time.process_time() - start
        if index < START or (index - START) % SAMPLE_EVERY:
            continue
        people = np.asarray(truth[index], np.int64).reshape(-1, 4) if truth is not None else \
            merge_boxes(offline_boxes(frame, empty), tiles(index, frame))
        total += len(people)
        for name in detectors:
            hits[name] += found(people, boxes[name])
    print(f"{Path(args.clip).name}: {len(frames)} frames, {total} reference people on the scored frames")
    print("| detector | found | recall [95%] | CPU ms a frame |\n|---|---|---|---|")
    for name in detectors:
        low, high = wilson(hits[name], total)
        print(f"| {name} | {hits[name]} of {total} | {hits[name] / total:.1%} [{low:.1%}, {high:.1%}] | "
              f"{1e3 * cpu[name] / len(frames):.1f} |")


if __name__ == "__main__":
    main()
