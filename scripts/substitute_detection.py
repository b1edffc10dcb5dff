"""Is every pasted substitute a person to an independent detector? Rendered walkers (the default bank,
sensorveil.sdk.datasets.rendered_people) pasted into real frames of a clip where its people were, and the
COCO SSDLite graph the camera bundles ship run on the pasted frame.

The places and sizes are the clip's own: on every ``--every``-th frame after ``--start`` each person box the
learned detector finds is a place (``--places motion``: the camera pipeline's motion detector's boxes). Each
place's window is cleared to the motion detector's empty scene and a substitute is scaled to the box's height at
its own proportions, as the runtime pastes a cut-out on a picture of the place (composite.paste_people with
scene.CAMERA_CONTRAST: its own colours, thickened by a pixel). The graph runs on the
whole pasted frame at the bundle's threshold (learned.DEFAULT_SCORE: the audit's learned people counter) and on
2x2 overlapping tiles (the tiles of the audit's offline reference people); a pasted person is found when a person box
overlaps theirs by IoU 0.5 or holds most of it (learned.COVERED), each graph box counted for one pasted person
at most.

The reference: the clip's real people pasted the same way, each cut out of its own crop with the camera
dataset's foreground mask (the motion detector's, cleaned as the bank's cut-outs are: composite.clean_cut_out)
and scaled back to its own box. The figures of docs/substitute_detection.md:

    python scripts/substitute_detection.py --clip ../shared/media/walkway.avi --out docs/substitute_detection.md
"""
import argparse
import json
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.detector_recall import wilson
from sensorveil.sdk.datasets.bank_screen import HEIGHT_RATIO, MATCH_IOU, matched, paste
from sensorveil_lab.provenance import page_header, provenance, require_clean

ROOT = Path(__file__).resolve().parents[1]

TRAIN_FRACTION = 0.6      # the walkway loader's default: its screen and PASS see the first 60% of the frames
PLACES = {"learned": "the learned detector's person boxes on the raw frame, where a learned bundle pastes",
          "motion": "the motion detector's boxes"}
KINDS = ("walkers", "real")
HEIGHT_BINS = (0, 60, 90, 1000)      # box heights (frame pixels) the page splits the figures by


def clip_places(clip, every=5, start=40, frames=None, find=None):
    """[(frame, background, boxes, real colour cut-outs)] of the clip's sampled frames with people: the boxes
    (``find(frame)``'s, the motion detector's without one), the motion detector's empty scene, and each box's
    person cut out of its crop by the foreground mask."""
    from sensorveil.runtime.camera import (
        CROP_SHAPE,
        MotionPeopleDetector,
        clean_cut_out,
        crop_people,
        crop_windows,
        opencv,
        to_gray,
    )
    cv2 = opencv()
    capture, detector, places, index = cv2.VideoCapture(str(clip)), MotionPeopleDetector(), [], 0
    try:
        while frames is None or index < frames:
            ok, frame = capture.read()
            if not ok:
                break
            boxes = detector.detect(frame)
            if find is not None:
                boxes = np.asarray(find(frame), np.int64).reshape(-1, 4)
            if index >= start and index % every == 0 and len(boxes):
                windows = crop_windows(boxes, frame.shape, CROP_SHAPE)
                colour = crop_people(frame, windows, CROP_SHAPE, colour=True)
                mask = crop_people(detector.foreground, windows, CROP_SHAPE) > 127
                grey = np.stack([to_gray(c) for c in colour])
                cut_outs = [clean_cut_out(np.where(m, np.maximum(g, 1), 0)) > 0 for m, g in zip(mask, grey)]
                real = np.stack([np.where(m[..., None], np.maximum(c, 1), 0) for m, c in zip(cut_outs, colour)])
                background = np.asarray(detector.background()).copy()
                places.append((frame, background, boxes, real.astype(np.uint8)))
            index += 1
    finally:
        capture.release()
    if not places:
        raise SystemExit(f"no people found in {clip}; expected a still camera clip of people walking")
    return places


def walker_bank(walkers, phases, seed):
    """Colour cut-outs of rendered walkers, as the default bank holds them."""
    from sensorveil.runtime.camera import CROP_SHAPE
    from sensorveil.sdk.datasets.rendered_people import render_walkers
    return render_walkers(walkers, phases, CROP_SHAPE, seed=seed)["colour"]


def measure(find, places, bank, seed=0, screened=None):
    """Per kind, per pasted person (the runtime's paste, "released"): its box height and whether ``find(frame)``
    (boxes) found it. Walkers are drawn from ``bank`` at random for each place (and from ``screened``, the
    walkers the bank screen keeps, where given)."""
    from sensorveil.runtime.camera import person_shaped
    rng = np.random.default_rng([seed, 50])
    kinds = KINDS + (("walkers, screened",) if screened is not None else ())
    out = {"released": {k: {"height": [], "found": []} for k in kinds}}
    for frame, background, boxes, real in places:
        walkers = bank[rng.integers(len(bank), size=len(boxes))]
        pastes = [("walkers", walkers), ("real", real)]
        if screened is not None:
            pastes.append(("walkers, screened", screened[rng.integers(len(screened), size=len(boxes))]))
        for kind, cut_outs in pastes:
            pasted = paste(frame, background, cut_outs, boxes)
            record = out["released"][kind]
            record["height"] += boxes[:, 3].tolist()
            record["found"] += matched(boxes, find(pasted)).tolist()
            record.setdefault("shaped", []).extend(person_shaped(c) for c in cut_outs)
    return out


def summary(records):
    """Found of pasted, share and its 95% interval, overall and per box height bin."""
    def counted(found):
        hits, n = int(np.sum(found)), len(found)
        return {"found": hits, "pasted": n, "share": hits / max(n, 1), "interval": wilson(hits, n)}
    result = {}
    for paste_kind, kinds in records.items():
        result[paste_kind] = {}
        for kind, record in kinds.items():
            height, found = np.asarray(record["height"]), np.asarray(record["found"], bool)
            bins = {f"{lo}-{hi}": counted(found[(height >= lo) & (height < hi)])
                    for lo, hi in zip(HEIGHT_BINS[:-1], HEIGHT_BINS[1:])}
            result[paste_kind][kind] = {**counted(found), "by_height": bins}
            if kind == "real":      # walkers at the places where the real person pasted there was found
                walkers = np.asarray(kinds["walkers"]["found"], bool)
                result[paste_kind]["walkers where real found"] = counted(walkers[found])
            if kind == "real":      # the real people a bank could hold: one person each (composite.person_shaped)
                shaped = np.asarray(record["shaped"], bool)
                result[paste_kind]["real, person-shaped"] = {
                    **counted(found[shaped]), "by_height": {f"{lo}-{hi}": counted(
                        found[shaped & (height >= lo) & (height < hi)]) for lo, hi in zip(HEIGHT_BINS[:-1],
                                                                                           HEIGHT_BINS[1:])}}
    return result


def graph_runner():
    """run_graph(graph, batch) of the bundles' COCO SSDLite graph (onnxruntime), as a bundle's pipeline runs it."""
    from sensorveil.export.person_detector import detector_onnx
    from sensorveil.sdk.datasets.bank_screen import graph_runner as onnx_runner
    return onnx_runner(detector_onnx())


def graph_finder(run_graph=None):
    """find(frame) -> person boxes of the graph on the frame at the bundle's threshold: the people counter the
    camera audit runs on a release (its learned counter)."""
    from sensorveil.runtime.camera import learned
    return learned.LearnedPeopleDetector(run_graph or graph_runner(), score=learned.DEFAULT_SCORE).find


def tiled_finder(run_graph=None):
    """find(frame) -> person boxes of the graph on 2x2 overlapping tiles at the reference score: the tiles of
    the camera audit's offline reference people (benchmarks.reference_people.TiledPeople, which looks at the
    whole frame too), small people seen at twice the resolution."""
    from sensorveil.benchmarks.reference_people import TiledPeople
    tiles = TiledPeople(run_graph or graph_runner(), grids=(2,))
    return lambda frame: tiles(0, frame)


def cell(entry):
    lo, hi = entry["interval"]
    return f"{entry['found']:,} of {entry['pasted']:,}, {100 * entry['share']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def page(result, record):
    from sensorveil.runtime.camera.learned import DEFAULT_SCORE
    lines = ["# Are pasted substitutes people to an independent detector?", "", page_header(record), "",
             f"Clip `{Path(result['clip']).name}`: every {result['every']}th frame from frame {result['start']} with "
             f"people, {result['places']:,} places ({PLACES[result['places_by']]}). Substitutes: {result['walkers']} "
             f"rendered walkers x {result['phases']} phases x 2 directions (seed {result['seed']}), one drawn at "
             "random for each place; reference: the clip's real people, cut out of their own crops by the "
             "motion detector's foreground mask and pasted back at their own boxes the same way. Detectors: the "
             "bundles' COCO SSDLite-MobileNetV2 graph (ONNX) on the whole frame at the bundle's threshold "
             f"(score >= {DEFAULT_SCORE}: the learned people counter the camera audit runs on a release), and on "
             "2x2 overlapping tiles at the reference score (the tiles of the audit's offline reference people); "
             "found: a person "
             f"box at IoU >= {MATCH_IOU} with the pasted box, or one mostly inside the other at a height within "
             f"x{HEIGHT_RATIO}. Share found [95% Wilson interval].", "",
             "| detector, paste | kind | found | " + " | ".join(f"box height {b} px" for b in result["bins"]) + " |",
             "|---|---|---|" + "---|" * len(result["bins"])]
    for paste_kind, kinds in result["found"].items():
        for kind, entry in kinds.items():
            heights = entry.get("by_height")
            lines.append(f"| {paste_kind} | {kind} | {cell(entry)} | "
                         + " | ".join(cell(heights[b]) if heights else "" for b in result["bins"]) + " |")
    lines += ["", "released: the runtime's paste on a picture of the place (composite.paste_people with "
              "scene.CAMERA_CONTRAST: the window cleared to the scene, the person scaled to the box's height at their "
              "own proportions, in their own colours, thickened by a pixel). walkers where real found: the walkers "
              "pasted at the places where the real person pasted the same way was found (the detector's limits at "
              "this clip's sizes taken out).", ""]
    screen = result.get("screen")
    if screen:
        lines += [f"walkers, screened: the bank screen a camera bundle's training runs (sdk/datasets/bank_screen.py) "
                  f"kept {screen['kept']} of {screen['candidates']} walkers, those the detector found at >= "
                  f"{screen['share']:.0%} of {screen['places']:,} places on frames before {screen['frames_until']}; "
                  "every place above is after those frames, so the screen never saw them.", ""]
    return "\n".join(lines)


FINDERS = {"whole frame": graph_finder, "2x2 tiles": tiled_finder}


def screened_bank(clip, phases, seed):
    """(cut-outs of the walkers the product's bank screen keeps, the screen's record): the walkway loader's
    screen (sdk.datasets.bank_screen) on the clip's training part, the first TRAIN_FRACTION of its frames."""
    import cv2

    from sensorveil.export.person_detector import detector_onnx
    from sensorveil.runtime.camera import CROP_SHAPE
    from sensorveil.sdk.datasets.bank_screen import screen_walkers
    from sensorveil.sdk.datasets.rendered_people import render_walkers
    from sensorveil.sdk.datasets.walkway import SCREEN_CANDIDATES
    capture = cv2.VideoCapture(str(clip))
    until = int(round(TRAIN_FRACTION * capture.get(cv2.CAP_PROP_FRAME_COUNT)))
    capture.release()
    drawn = render_walkers(SCREEN_CANDIDATES, phases, CROP_SHAPE, seed=seed)
    kept, record = screen_walkers(clip, until, drawn["colour"], drawn["sequence"] // 2, detector_onnx(), seed)
    return drawn["colour"][np.isin(drawn["sequence"] // 2, kept)], record


def run(clip, every, start, frames, walkers, phases, seed, places_by="learned", screen=False):
    """Per detector and paste, the found figures. Places are the learned detector's person boxes (where a
    learned bundle pastes) or the motion detector's (``places_by``). ``screen``: the screened walkers too, and
    places from the test part only (after the frames the screen saw)."""
    run_graph = graph_runner()
    screened, record = screened_bank(clip, phases, seed) if screen else (None, None)
    if screen:
        start = max(start, record["frames_until"])
    places = clip_places(clip, every, start, frames, graph_finder(run_graph) if places_by == "learned" else None)
    bank, found = walker_bank(walkers, phases, seed), {}
    for name, finder in FINDERS.items():
        for paste_kind, kinds in summary(measure(finder(run_graph), places, bank, seed, screened)).items():
            found[f"{name}, {paste_kind}"] = kinds
    bins = [f"{lo}-{hi}" for lo, hi in zip(HEIGHT_BINS[:-1], HEIGHT_BINS[1:])]
    return {"clip": str(clip), "every": every, "start": start, "frames": frames, "walkers": walkers,
            "phases": phases, "seed": seed, "places_by": places_by, "bins": bins,
            "places": int(sum(len(p[2]) for p in places)), "found": found, "screen": record}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", required=True)
    parser.add_argument("--every", type=int, default=5, help="sample every Nth frame")
    parser.add_argument("--start", type=int, default=40, help="first sampled frame (the motion model's warm-up)")
    parser.add_argument("--frames", type=int, default=None, help="read at most this many frames")
    parser.add_argument("--walkers", type=int, default=48)
    parser.add_argument("--phases", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--places", choices=("learned", "motion"), default="learned",
                        help="where substitutes go: the learned detector's person boxes (a learned bundle's "
                             "places) or the motion detector's")
    parser.add_argument("--screen", action="store_true",
                        help="add the walkers the bank screen keeps (screened on the clip's first 60%%), and "
                             "measure on the places after those frames only")
    parser.add_argument("--out", help="write the page here (markdown; the figures go beside it as .json)")
    parser.add_argument("--allow-dirty", action="store_true")
    args = parser.parse_args()
    if args.out:
        require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    result = run(Path(args.clip), args.every, args.start, args.frames, args.walkers, args.phases, args.seed,
                 args.places, args.screen)
    result["clip"] = Path(args.clip).name
    text = page(result, record)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
        Path(args.out).with_suffix(".json").write_text(json.dumps({**result, "record": record}, indent=1) + "\n")


if __name__ == "__main__":
    main()
