"""The motion detector's scale beside the learned graph (sensorveil/runtime/camera/learned.py MOTION_SCALE).

Motion alone and the pipeline's union (the bundle's learned graph every ``--every`` frames + motion) at each
scale, on one clip: every detector sees every frame, every 10th frame after the warm-up is scored against
the reference people of sensorveil.benchmarks.detector_recall (a made scene's recorded people, else the
offline detectors), and each detector's CPU time per frame is read with time.process_time (read it as a
ratio: it moves with the machine's load). The figures of docs/decisions/0008-motion-half-size.md:

    python scripts/motion_scale.py --bundle bundles/camera/pass-walkway --clip ../shared/media/walkway.avi

``--carried`` adds each union with the graph's boxes carried on between its runs at the pace each person
kept between its last two runs (``CarriedPeopleDetector``, tried in decision 0009 and not taken). ``--int8``
adds the same unions run on the int8 ONNX detector an ``--precision int8`` bundle ships
(sensorveil.export.person_detector.onnx_int8, calibrated on the clip's first part as the exporter does), at the fp32
graph's threshold and at the one the export matches; the reference people stay the fp32 graph's, so both
precisions are scored against the same people.
"""
import argparse
import itertools
import time
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.detector_recall import detector_recall
from sensorveil.benchmarks.reference_people import empty_scene
from sensorveil_lab.clips import clip_frames, scene_truth

ROOT = Path(__file__).resolve().parents[1]

SCALES = (1.0, 0.5)


PACE_IOU = 0.3     # a box of a run and one of the run before are one person where only they overlap this much


def carried_detector():
    """LearnedPeopleDetector whose boxes between the graph's runs move on at each person's pace: the centre's
    move since the run before over the frames between, where exactly one box of that run overlaps it by
    PACE_IOU and it overlaps no other of its own run's boxes so much (else 0: the box stands, as in the
    runtime)."""
    from sensorveil.runtime.camera import iou
    from sensorveil.runtime.camera.learned import LearnedPeopleDetector, unite

    class CarriedPeopleDetector(LearnedPeopleDetector):
        before, pace = np.zeros((0, 4)), np.zeros((0, 2))

        def detect(self, frame):
            moving = self.motion.detect(frame)
            since = self.seen % self.every
            if since == 0:
                self.learned = self.find(frame)
                self.pace = self.paces(self.learned)
            self.seen += 1
            return unite(self.moved(since, frame.shape), moving)

        def paces(self, boxes):
            before, self.before = self.before, boxes
            pace = np.zeros((len(boxes), 2))
            overlap = iou(boxes, before) >= PACE_IOU
            for k, j in zip(*np.nonzero(overlap)):
                if overlap[k].sum() == 1 and overlap[:, j].sum() == 1:
                    pace[k] = (boxes[k, :2] + boxes[k, 2:] / 2.0 - before[j, :2] - before[j, 2:] / 2.0) / self.every
            return pace

        def moved(self, frames, shape):
            """The last run's boxes ``frames`` frames on, clipped to the frame (those carried out of it dropped)."""
            boxes = self.learned.astype(np.float64)
            boxes[:, :2] += np.rint(self.pace * frames)
            left, top = np.maximum(boxes[:, 0], 0), np.maximum(boxes[:, 1], 0)
            right = np.minimum(boxes[:, 0] + boxes[:, 2], shape[1])
            bottom = np.minimum(boxes[:, 1] + boxes[:, 3], shape[0])
            boxes = np.stack([left, top, right - left, bottom - top], 1)
            return boxes[(boxes[:, 2] >= 2) & (boxes[:, 3] >= 12)].astype(np.int64).reshape(-1, 4)

    return CarriedPeopleDetector


def compared(run_graph, everys, scales=SCALES, int8=None, carried=False) -> dict:
    """name -> detect(frame), each with its own background model: motion alone at each scale, and the union
    with the graph every k frames for each k of ``everys`` at each scale (and with ``int8``'s (run_graph,
    threshold) too; with ``carried`` also each union whose boxes are carried on between runs)."""
    from sensorveil.runtime.camera import MotionPeopleDetector
    from sensorveil.runtime.camera.learned import DEFAULT_SCORE, LearnedPeopleDetector
    detectors = {f"motion alone at {s}": MotionPeopleDetector(scale=s).detect for s in scales}
    graphs = {"": (run_graph, DEFAULT_SCORE)}
    if int8 is not None:            # at fp32's threshold too: what the matched one buys
        graphs[f"int8 at {DEFAULT_SCORE}, "] = (int8[0], DEFAULT_SCORE)
        graphs[f"int8 at {int8[1]}, "] = int8
    kinds = {"": LearnedPeopleDetector, "carried, ": carried_detector()} if carried else {"": LearnedPeopleDetector}
    for (precision, (graph, score)), (kind, detector) in itertools.product(graphs.items(), kinds.items()):
        for every in everys:
            for s in scales:
                union = detector(graph, score=score, every=every, motion=MotionPeopleDetector(scale=s))
                detectors[f"pipeline ({precision}{kind}graph every {every}) + motion at {s}"] = union.detect
    return detectors


def int8_run_graph(clip: Path):
    """(run_graph(graph, batch), threshold) of the int8 ONNX detector an int8 bundle exported on ``clip`` ships,
    at the threshold the export matches to the fp32 graph's people."""
    import numpy as np

    from sensorveil.export.person_detector import CALIBRATION_FRAMES, detector_onnx
    from sensorveil.export.person_detector import clip_frames as calibration_frames
    from sensorveil.export.person_detector.onnx_int8 import detector_onnx_int8, matched_score
    from sensorveil.runtime.backends.onnxruntime_backend import make_session
    frames = calibration_frames(str(clip), CALIBRATION_FRAMES)
    quantized = detector_onnx_int8(frames)
    session = make_session(quantized)
    name = session.get_inputs()[0].name
    return (lambda graph, batch: session.run(None, {name: np.asarray(batch, np.float32)})[0],
            matched_score(detector_onnx(), quantized, frames))


def timed(detect, spent: dict, name: str):
    """``detect`` that adds its CPU time to ``spent[name]``."""
    def run(frame):
        start = time.process_time()
        boxes = detect(frame)
        spent[name] += time.process_time() - start
        return boxes
    return run


def main() -> None:
    from sensorveil.runtime import Privatizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", required=True, help="a camera bundle with the learned detector")
    parser.add_argument("--clip", required=True)
    parser.add_argument("--every", type=int, nargs="+", default=[3],
                        help="the graph's frame steps to compare (3: the camera bundles' own)")
    parser.add_argument("--scales", type=float, nargs="+", default=list(SCALES), help="motion scales, 0.25 to 1")
    # a step that divides it puts every scored frame on a frame the graph ran on, which flatters that step:
    # pick one prime to every --every compared (7 for 3 and 5)
    parser.add_argument("--sample-every", type=int, default=10, help="score every N-th frame after the warm-up")
    parser.add_argument("--int8", action="store_true", help="also the unions on the int8 ONNX detector")
    parser.add_argument("--carried", action="store_true",
                        help="also each union with the graph's boxes carried on between runs at their people's pace")
    args = parser.parse_args()
    run_graph = Privatizer.load(Path(args.bundle)).pipeline.run_graph
    frames, (truth, _) = clip_frames(Path(args.clip)), scene_truth(Path(args.clip))
    detectors = compared(run_graph, args.every, args.scales, int8_run_graph(Path(args.clip)) if args.int8 else None,
                         args.carried)
    cpu = dict.fromkeys(detectors, 0.0)
    recall = detector_recall(frames, run_graph, empty_scene(frames), args.every[0], args.sample_every, truth=truth,
                             compared={name: timed(detect, cpu, name) for name, detect in detectors.items()})
    total = recall["reference_boxes"]
    print(f"{Path(args.clip).name}: {len(frames)} frames, {total} reference people on the scored frames")
    print("| detector | found | recall [95%] | CPU ms a frame |\n|---|---|---|---|")
    for name, row in recall["recall"].items():
        low, high = row["interval"]
        print(f"| {name} | {row['found']} of {total} | {row['share']:.1%} [{low:.1%}, {high:.1%}] | "
              f"{1e3 * cpu[name] / len(frames):.1f} |")


if __name__ == "__main__":
    main()
