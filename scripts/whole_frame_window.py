"""One run of the person graph on the whole frame, squeezed into its 300x300 input, against the square tiles the
runtime runs (sensorveil/runtime/camera/learned.py square_tiles: two runs a 4:3 frame), on a clip's training part.

Tried on 2026-12-07 for the camera goal's part 6 (speed): the whole frame halves the graph's cost, and on walkway
and the made crowd it covers about as many of the fit's reference people as the squares. It was not shipped: each
window finds people the other misses, the people only the squares find include the smallest, most distant ones,
and the made crowd's release, audited with the whole frame fitted, leaked such people where the squares' leaked
none (that stop's closing note has the audit's figures and commands). This prints, per threshold, the reference
people each window covers (with motion beside it, as camera_fit scores a setting) and those only one of them
covers, with the heights of the people only the squares find:

    python scripts/whole_frame_window.py --clip ../shared/media/walkway.avi
    python scripts/whole_frame_window.py --clip CROWD.avi       # scripts/crowd_clip.py's crowd

The graph is the cached SSDLite cut (`sensorveil export` converts it once; the detector extra).
"""
import argparse
from pathlib import Path

import numpy as np


def hits(reference, boxes) -> np.ndarray:
    """bool per reference person: a box covers them as the clip audit's recall counts it (covered_people)."""
    from sensorveil.benchmarks.clip_audit import FOUND_IOU
    from sensorveil.runtime.camera import iou
    from sensorveil.runtime.camera.learned import inside_pairs
    if not len(reference) or not len(boxes):
        return np.zeros(len(reference), bool)
    return ((iou(reference, boxes) >= FOUND_IOU) | inside_pairs(reference, boxes)).any(1)


def whole_frame_rows(frame, run) -> list:
    """camera_fit.graph_rows' form for one window: the whole frame resized to the graph's input."""
    import cv2

    from sensorveil.runtime.camera.learned import DETECTOR_INPUT
    shrunk = cv2.resize(np.ascontiguousarray(frame[..., :3]), DETECTOR_INPUT[::-1], interpolation=cv2.INTER_AREA)
    image = cv2.cvtColor(shrunk, cv2.COLOR_BGR2RGB)
    return [(np.array([0, 0, 0, 0]), frame.shape, False, np.asarray(run(None, image[None])))]


def compare(clip: Path) -> dict:
    """threshold -> {squares, whole, squares_only, whole_only, people, squares_only_heights}."""
    from sensorveil.benchmarks.clip_audit import OncePerFrame
    from sensorveil.benchmarks.reference_people import TiledPeople, empty_scene, merge_boxes, offline_boxes
    from sensorveil.export.person_detector import camera_fit as fit
    from sensorveil.export.person_detector.convert import detector_onnx
    from sensorveil.runtime.camera.learned import unite
    from sensorveil.sdk.datasets.bank_screen import graph_runner
    frames, stride = fit.training_frames(clip)
    run = graph_runner(detector_onnx())
    reference = OncePerFrame(TiledPeople(run))
    empty = empty_scene(frames, reference)
    judged = range(-(-fit.WARM_UP // stride), len(frames), max(fit.JUDGE_EVERY // stride, 1))
    people = {i: merge_boxes(offline_boxes(frames[i], empty), reference(i, frames[i])) for i in judged}
    tallest = fit.tallest_share(list(people.values()), frames[0].shape[0]) * frames[0].shape[0]
    moving = fit.motion_boxes(frames, set(judged))
    out = {score: {"squares": 0, "whole": 0, "squares_only": 0, "whole_only": 0, "people": 0,
                   "squares_only_heights": []} for score in fit.SCORES}
    for index in judged:
        windows = {"squares": fit.graph_rows(frames[index], 1, run), "whole": whole_frame_rows(frames[index], run)}
        for score, row in out.items():
            found = {name: hits(people[index], unite(fit.merged_boxes(rows, score, tallest), moving[index]))
                     for name, rows in windows.items()}
            row["people"] += len(people[index])
            row["squares"] += int(found["squares"].sum())
            row["whole"] += int(found["whole"].sum())
            only = found["squares"] & ~found["whole"]
            row["squares_only"] += int(only.sum())
            row["whole_only"] += int((found["whole"] & ~found["squares"]).sum())
            row["squares_only_heights"] += [int(h) for h in people[index][only][:, 3]]
    return out


def heights_text(heights: list) -> str:
    """The five shortest heights and the median: the small people a window loses, in a line that fits."""
    if not heights:
        return "-"
    return f"{sorted(heights)[:5]}, median {float(np.median(heights)):.0f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", type=Path, required=True)
    args = parser.parse_args(argv)
    print(f"{args.clip.name}, training part: reference people covered (with motion), by window")
    print("threshold | squares (2 runs) | whole frame (1 run) | squares only | whole only | "
          "squares only: 5 shortest, median height (px)")
    for score, row in compare(args.clip).items():
        share = lambda n: f"{100.0 * n / max(row['people'], 1):.1f}%"  # noqa: E731
        print(f"{score} | {share(row['squares'])} | {share(row['whole'])} | {row['squares_only']} | "
              f"{row['whole_only']} | {heights_text(row['squares_only_heights'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
