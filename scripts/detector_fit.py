"""The person detector fitted to each camera, as a page: every threshold and tile-row setting the export tries on a
clip's training part (sensorveil.export.person_detector.camera_fit), what each finds of the reference people and
how many boxes it puts on no one, and the setting the export keeps. A clip fetched for testing is never
committed; the page says where it came from.

    python scripts/detector_fit.py --clip ../shared/media/walkway.avi --name walkway --source "..." \\
        --gt GT.txt --gt-size 768x576 [--clip CLIP --name NAME --source TEXT --gt - ...] --out docs/detector_fit.md

``--gt`` (one per clip, ``-`` for none): a MOTChallenge gt.txt of the clip's frames at ``--gt-size``; every setting
and the fit's own reference people are then scored against the annotated people on the clip's test part
(sensorveil_lab.detector_truth), which the fit never saw.
"""
import argparse
import sys
from pathlib import Path

from sensorveil_lab.provenance import page_header, portable, provenance, require_clean, write_page


def log(line):
    print(line, file=sys.stderr, flush=True)


def fit(clip: Path, gt: str, gt_size: tuple) -> tuple:
    """(the export's camera fields for ``clip``, their check against ``gt`` or None)."""
    from sensorveil.export.person_detector.camera_fit import fit_camera
    from sensorveil.export.person_detector.convert import detector_onnx
    from sensorveil_lab.detector_truth import truth_recall
    fields = fit_camera(str(clip), detector_onnx(log), log)
    if gt == "-" or fields["detector_fit"]["chosen"] != "fitted":
        return fields, None
    return fields, truth_recall(clip, Path(gt), gt_size, fields["detector_fit"]["candidates"], detector_onnx(log),
                                fields["detector_tallest"], log)


def clip_size(clip: Path) -> str:
    import cv2
    capture = cv2.VideoCapture(str(clip))
    size = f"{int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))}x{int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))}, " \
           f"{int(capture.get(cv2.CAP_PROP_FRAME_COUNT))} frames"
    capture.release()
    return size


def clip_section(name: str, source: str, size: str, fields: dict, truth=None) -> list:
    record = fields["detector_fit"]
    lines = [f"## {name}", "", f"`{name}` ({size}): {source}.", ""]
    if record["chosen"] != "fitted":
        return lines + [f"Not fitted: {record['why']}.", ""]
    lines += [f"{record['judged_frames']} judged frames of {record['frames']}, {record['reference_people']:,} "
              f"reference people. Each cell: the reference people covered, boxes on no one per person"
              f"{'; the annotated people covered on the test part' if truth else ''}.", "",
              "| threshold | " + " | ".join(f"{rows} tile row{'s' if rows > 1 else ''} ({runs} graph runs)"
                                          for rows, runs in tile_runs(record)) + " |",
              "|---|" + "---|" * len(tile_runs(record))]
    chosen = (fields["detector_score"], fields["detector_tile_rows"])
    for score in sorted({c["score"] for c in record["candidates"]}, reverse=True):
        cells = []
        for rows, _ in tile_runs(record):
            c = next(c for c in record["candidates"] if (c["score"], c["tile_rows"]) == (score, rows))
            cell = f"{c['recall']:.1%}, {c['extra_boxes_per_person']:.2f}" + truth_cell(truth, score, rows)
            cells.append(f"**{cell} (kept)**" if (score, rows) == chosen else cell)
        lines.append(f"| {score} | " + " | ".join(cells) + " |")
    verdict = "meets" if record["target_reached"] else "**no setting meets**"
    lines += ["", f"Kept: threshold {chosen[0]}, {chosen[1]} tile row{'s' if chosen[1] > 1 else ''}, boxes below the "
              f"first threshold at most {fields.get('detector_tallest', 1.0):.0%} of the frame tall; {verdict} the "
              f"target ({record['recall_target']:.0%} of the reference people with at most "
              f"{record['extra_boxes_limit']} boxes on no one per person)" +
              ("." if record["target_reached"] else ", so the setting finding the most people is kept."), ""]
    if truth is not None:
        lines += [f"Against the annotated people (the last cell figure, on the test part: {truth['frames']} frames "
                  f"after the fit's, {truth['people']:,} people): the fit's reference itself covers "
                  f"{truth['reference']:.1%} of them.", ""]
    return lines


def truth_cell(truth, score: float, rows: int) -> str:
    """'; x% of the annotated' where the clip has a ground truth."""
    if truth is None:
        return ""
    hit = next(c for c in truth["candidates"] if (c["score"], c["tile_rows"]) == (score, rows))
    return f"; {hit['recall']:.1%} of annotated"


def tile_runs(record: dict) -> list:
    return sorted({(c["tile_rows"], c["graph_runs_per_frame"]) for c in record["candidates"]})


def page(results: list, record: dict) -> str:
    lines = ["# The person detector fitted to each camera", "", page_header(record), "",
             "What the export (`sensorveil export`, and so `sensorveil quickstart --camera`) tries on each clip's "
             "training part before it writes the camera entry, and what it keeps: "
             "sensorveil/export/person_detector/camera_fit.py and docs/decisions/0024-detector-fit.md. The "
             "reference people are the clip audit's (difference from the training part's empty scene, plus the "
             "same graph on overlapping tiles at a low score), so a person neither finds is in no column: the "
             "figures are upper bounds on what a camera's people are found. What the fitted bundle then finds on "
             "the whole clip, and whether it shows anyone: the clip's camera-audit page.", ""]
    for result in results:
        lines += clip_section(result["name"], result["source"], result["size"], result["fields"], result["truth"])
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", type=Path, action="append", required=True)
    parser.add_argument("--name", action="append", required=True, help="one per --clip")
    parser.add_argument("--source", action="append", required=True, help="one per --clip: where it came from, its "
                                                                          "licence")
    parser.add_argument("--gt", action="append", default=None, help="one per --clip: a MOTChallenge gt.txt of its "
                                                                    "frames, or - for none")
    parser.add_argument("--gt-size", default="768x576", help="the frame size the gt.txt's boxes are in")
    parser.add_argument("--out", type=Path, required=True, help="the page (.md; .json beside it)")
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    gts = args.gt or ["-"] * len(args.clip)
    if not len(args.clip) == len(args.name) == len(args.source) == len(gts):
        parser.error("give one --name, one --source and (where any clip has one) one --gt for each --clip")
    gt_size = tuple(int(v) for v in args.gt_size.split("x"))
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    results = []
    for clip, name, source, gt in zip(args.clip, args.name, args.source, gts):
        fields, truth = fit(clip, gt, gt_size)
        results.append({"name": name, "source": source, "clip": str(clip), "size": clip_size(clip), "fields": fields,
                        "truth": truth})
    folders = {str(clip.parent.resolve()): "CLIPS" for clip in args.clip if "shared" not in str(clip)}
    results = portable(results, folders=folders)
    write_page(args.out, page(results, record), record, {"clips": results}, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
