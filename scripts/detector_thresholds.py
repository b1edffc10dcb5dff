"""How many of the fp32 person detector's people each quantized form finds, at fp32's threshold and at its own.

The int8 ONNX graph (``--precision int8`` ONNX bundles: the Pi's and the Jetson's CPU) and the int8 TFLite file
(the Coral's; the Edge TPU compiles that file) each ship with a threshold matched at export to the fp32 graph's
people on the run's calibration frames (sensorveil/export/person_detector/threshold.py). For each clip this prints,
per form: the threshold the export would write, and the share of fp32's people (at 0.3) its boxes cover by IoU
0.5 at 0.3 and at that threshold, with its box count, on the calibration frames (64 of the clip's first 60%, as
the exporter reads them) and on 32 frames of the clip's last 35%, which calibration never reads. The figures of
docs/decisions/0009-camera-speed-levers.md ("int8 detector"):

    python scripts/detector_thresholds.py ../shared/media/walkway.avi /work/clips/crowd-walkway.avi

(the crowded clip: ``python scripts/crowd_clip.py --out CLIP``). Needs the ``detector`` extra (README).
"""
import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

HELD_OUT = (0.65, 32)       # the clip's part after this share, and how many frames of it


def quantized_forms(frames: np.ndarray) -> dict:
    """name -> rows(frames) of each quantized detector an export on ``frames`` ships."""
    from sensorveil.export.person_detector import box_coder, encodings_cut
    from sensorveil.export.person_detector.onnx_int8 import detector_onnx_int8
    from sensorveil.export.person_detector.tflite import detector_tflite, tflite_runner
    from sensorveil.export.person_detector.threshold import detections
    quiet = lambda line: None  # noqa: E731
    onnx_int8 = detector_onnx_int8(frames, quiet)
    run = tflite_runner(detector_tflite(frames, quiet), box_coder(encodings_cut(quiet)[1]))
    return {"int8 ONNX (CPU boards)": lambda images: detections(onnx_int8, images),
            "int8 TFLite (Coral, Edge TPU)": lambda images: [run(image[None].astype(np.float32)) for image in images]}


def held_out(clip: Path) -> np.ndarray:
    import cv2

    from sensorveil.export.person_detector.frames import frames_at
    capture = cv2.VideoCapture(str(clip))
    total = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    capture.release()
    return frames_at(clip, np.linspace(int(total * HELD_OUT[0]), total - 1, HELD_OUT[1]).astype(int).tolist())


def share(people: list, rows: list, shape: tuple, score: float) -> str:
    from sensorveil.export.person_detector.threshold import coverage
    covered, boxes = coverage(people, rows, shape, score)
    total = sum(len(found) for found in people)
    return f"{covered / max(total, 1):.1%} ({covered} of {total}; {boxes} boxes)"


def clip_rows(clip: Path) -> list:
    """Markdown rows for one clip: each form on the calibration and the held-out frames."""
    from sensorveil.export.person_detector import CALIBRATION_FRAMES, DetectorUnavailable, clip_frames, detector_onnx
    from sensorveil.export.person_detector.threshold import detections, matched_threshold
    from sensorveil.runtime.camera.learned import DEFAULT_SCORE, people_boxes
    calibration = clip_frames(str(clip), CALIBRATION_FRAMES)
    parts = {"calibration": calibration, "held out": held_out(clip)}
    people = {part: [people_boxes(found, frames.shape[1:3], DEFAULT_SCORE)
                     for found in detections(detector_onnx(), frames)] for part, frames in parts.items()}
    lines = []
    for form, rows_of in quantized_forms(calibration).items():
        rows = {part: rows_of(frames) for part, frames in parts.items()}
        try:
            score = matched_threshold(detections(detector_onnx(), calibration), rows["calibration"],
                                      calibration.shape[1:3], form)
        except DetectorUnavailable as refused:
            lines.append(f"| {clip.name} | {form} | refused: {refused} | | | | |")
            continue
        cells = [share(people[part], rows[part], parts[part].shape[1:3], threshold)
                 for part in parts for threshold in (DEFAULT_SCORE, score)]
        lines.append(f"| {clip.name} | {form} | {score} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("clips", nargs="+", type=Path)
    args = parser.parse_args()
    print("| clip | quantized form | its threshold | calibration frames at 0.3 | calibration at its own | "
          "held-out frames at 0.3 | held out at its own |")
    print("|---|---|---|---|---|---|---|")
    for clip in args.clips:
        for line in clip_rows(clip):
            print(line, flush=True)


if __name__ == "__main__":
    main()
