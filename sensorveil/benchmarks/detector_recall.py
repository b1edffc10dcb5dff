"""How many of a clip's people each camera detector finds: motion alone, the learned graph alone, and the
pipeline's union (the graph every ``every`` frames), against reference boxes from offline detectors that
see more than the pipeline does (sensorveil.benchmarks.leak_meter: the clip's median as the empty scene,
plus the learned graph on overlapping tiles at a low score). A reference box is found when a detector's box
overlaps it by IoU 0.3 or more. Recall comes with a 95% Wilson interval over the reference boxes."""
import math

import numpy as np

from sensorveil.benchmarks.reference_people import TiledPeople, merge_boxes, offline_boxes

FOUND_IOU = 0.3


def wilson(hits: int, n: int, z: float = 1.96) -> list:
    """The 95% Wilson score interval of hits / n."""
    if n == 0:
        return [0.0, 1.0]
    p = hits / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return [(centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)]


def found(reference, boxes) -> int:
    from sensorveil.runtime.camera import iou
    if not len(reference) or not len(boxes):
        return 0
    return int((iou(reference, boxes).max(1) >= FOUND_IOU).sum())


def detectors(run_graph, every: int) -> dict:
    """The detectors compared, each fresh (each keeps its own background model)."""
    from sensorveil.runtime.camera import MotionPeopleDetector
    from sensorveil.runtime.camera.learned import LearnedPeopleDetector
    learned_alone = LearnedPeopleDetector(run_graph)
    return {"motion": MotionPeopleDetector().detect,
            "learned": lambda frame: (learned_alone.detect(frame), learned_alone.learned)[1],
            "pipeline": LearnedPeopleDetector(run_graph, every=every).detect}


def detector_recall(frames, run_graph, empty, every: int, sample_every: int = 10, start: int = 30,
                    truth=None, compared=None) -> dict:
    """Every detector sees every frame (their models learn as on the device); every ``sample_every``-th frame
    from ``start`` (past motion's warm-up) is scored, against ``truth`` (per-frame boxes of a made scene,
    sensorveil_lab.crowd_scene) where given, else against the offline detectors. ``compared``: other
    detectors by name (frame -> boxes) than ``detectors``' three."""
    tiles = TiledPeople(run_graph)
    compared = detectors(run_graph, every) if compared is None else compared
    hits, total, scored = {name: 0 for name in compared}, 0, 0
    for index, frame in enumerate(frames):
        boxes = {name: detect(frame) for name, detect in compared.items()}
        if index < start or (index - start) % sample_every:
            continue
        people = np.asarray(truth[index], np.int64).reshape(-1, 4) if truth is not None else \
            merge_boxes(offline_boxes(frame, empty), tiles(index, frame))
        total, scored = total + len(people), scored + 1
        for name in compared:
            hits[name] += found(people, boxes[name])
    return {"frames_scored": scored, "reference_boxes": total, "every": every,
            "reference": "the made scene's truth" if truth is not None else "offline detectors",
            "recall": {name: {"found": hits[name], "share": hits[name] / total if total else 0.0,
                              "interval": wilson(hits[name], total)} for name in compared}}
