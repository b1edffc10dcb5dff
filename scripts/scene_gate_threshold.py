"""The quiet scene's change gate (sensorveil/runtime/camera/scene.py SCENE_CHANGE), measured on a clip.

Prints two distributions of a block's mean absolute difference (the largest colour channel), the figures of
docs/decisions/0006-scene-change-gate.md:
  quiet:  camera blocks the scene follows (shown and quiet for the horizon), each frame against the scene
          before its update, with the gate off: the floor of noise and light a block must pass;
  person: 8x8 blocks wholly inside a person box of the leak meter's offline detector (the clip's median as
          the empty scene), each frame against the colour median: what a person adds to a stale block.
and, per candidate threshold, the share of quiet blocks it would call changed and of person blocks it would
let the scene follow.

    python scripts/scene_gate_threshold.py ../shared/media/walkway.avi
"""
import argparse

import numpy as np

from sensorveil.benchmarks.reference_people import MEDIAN_EVERY, offline_boxes, to_grey
from sensorveil.runtime.camera import PersonCrops
from sensorveil.runtime.camera.scene import SCENE_BLOCK, block_sums

QUIET_PERCENTILES = (50, 90, 99, 99.9, 99.99, 100)
PERSON_PERCENTILES = (0, 0.1, 1, 5, 10, 50)
THRESHOLDS = (3, 4, 5, 6, 8, 10)


def read_frames(clip: str) -> list:
    import cv2

    capture, frames = cv2.VideoCapture(clip), []
    ok, frame = capture.read()
    while ok:
        frames.append(frame)
        ok, frame = capture.read()
    if not frames:
        raise SystemExit(f"no frames in {clip}: expected a still camera clip OpenCV can read")
    return frames


def person_blocks(frame, empty_grey, empty_colour):
    """Each block wholly inside an offline person box: its difference from the colour median."""
    inside = np.zeros(frame.shape[:2], np.int32)
    for x, y, w, h in offline_boxes(frame, empty_grey):
        inside[y:y + h, x:x + w] = 1
    full = block_sums(inside, SCENE_BLOCK) == SCENE_BLOCK * SCENE_BLOCK
    diff = np.abs(frame.astype(np.int16) - empty_colour.astype(np.int16))
    return (block_sums(diff, SCENE_BLOCK).max(axis=2) / float(SCENE_BLOCK * SCENE_BLOCK))[full]


def measure(frames):
    sampled = frames[::MEDIAN_EVERY]
    empty_colour = np.median(np.stack(sampled), axis=0).astype(np.uint8)
    empty_grey = np.median(np.stack([to_grey(f) for f in sampled]), axis=0)
    crops, quiet, person = PersonCrops(paste="cut-out"), [], []
    for frame in frames:
        scene = crops.scene
        if scene is not None:
            scene.change = np.inf      # gate off: what the scene would follow, before this frame's update
            quiet.append(scene.difference(frame)[scene.shown & (scene.quiet >= scene.horizon)])
        crops.prepare(frame)
        person.append(person_blocks(frame, empty_grey, empty_colour))
    return np.concatenate(quiet), np.concatenate(person)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("clip")
    quiet, person = measure(read_frames(parser.parse_args().clip))
    print(f"quiet blocks ({len(quiet):,} block-frames):",
          ", ".join(f"{p}%: {np.percentile(quiet, p):.1f}" for p in QUIET_PERCENTILES))
    print(f"person blocks ({len(person):,} block-frames):",
          ", ".join(f"{p}%: {np.percentile(person, p):.1f}" for p in PERSON_PERCENTILES))
    for threshold in THRESHOLDS:
        print(f"threshold {threshold}: quiet blocks called changed {(quiet > threshold).mean():.5f}, "
              f"person blocks followed {(person <= threshold).mean():.4f}")


if __name__ == "__main__":
    main()
