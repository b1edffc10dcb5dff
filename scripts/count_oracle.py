"""How well any cut-out release could be counted as raw: the camera goal's count with the substitutes replaced by
the people themselves, as the camera filmed them (docs/decisions/0020-pipeline-counter-is-the-bundle.md).

The count part asks the independent counter (the bundle's learned detector alone) to count the release as it
counts raw on a share of frames within 10 points of JPEG 90's. Decision 0020 argues that no substitution can: the
detector misses some raw people, and a release would have to repeat its misses person by person. This measures
that argument instead of stating it. Each clip is streamed through the bundle as `sensorveil run` releases it
(substitutes from seed 0), and counted with the camera audit's counters on its judged frames
(sensorveil.benchmarks.clip_audit.CountCheck), once for each thing pasted on the same released scene:

- the runtime's substitutes (the release itself);
- the same substitutes for only the people the independent counter finds in the raw frame (at IoU >= 0.3, one to
  one), the rest left out: a release that shows a person only where the counter would count one;
- each person the pipeline found, as the camera filmed their box (the raw pixels of the box, person and ground):
  no substitute can look more like the person than the person does, so what this loses is the places and the scene
  around them, not the substitutes;
- each person the independent counter finds in the raw frame, as the camera filmed their box: the people the
  counter counts in raw, at its own places; what this loses is the scene around them alone;
- the same boxes grown by a quarter of their size each way: the people in their own surroundings, so what is lost
  is the scene further off.

A case may name a picture of the empty place (as `sensorveil run --scene-still`), the scene then released.

The last three paste raw pixels: they are measurements here, never a release.

    python scripts/count_oracle.py --case walkway bundles/camera/pass-walkway ../shared/media/walkway.avi \\
        --case "walkway, a still" bundles/camera/pass-walkway ../shared/media/walkway.avi STILL.png \\
        --case crowd bundles/camera/pass-crowd CROWD.avi --out docs/count_oracle.md
"""
import argparse
import contextlib
import time
from pathlib import Path

import numpy as np

from sensorveil_lab.page_text import count_table, found_lines
from sensorveil_lab.provenance import page_header, portable, provenance, require_clean, write_page

DRAW_SEED = 0
PASTES = {
    "substitutes": "the runtime's substitutes (the release)",
    "substitutes_where_counted": "the runtime's substitutes, only where the independent counter finds someone in raw",
    "own_boxes": "each person the pipeline found, their box as filmed",
    "counter_boxes": "each person the independent counter finds in raw, their box as filmed",
    "counter_surroundings": "the same, their box grown by a quarter each way, as filmed",
}
# the share of a box's width and height the last paste adds each way: the runtime's own margin around a person it
# keeps out of the scene (scene.BUSY_MARGIN), so the person stands in their own surroundings, not cut at the box
SURROUNDINGS = 0.25


def boxes_as_filmed(scene, frame, boxes):
    """A copy of ``scene`` with each box (x, y, w, h) of ``frame`` pasted as the camera filmed it, clipped to the
    frame."""
    out = scene.copy()
    height, width = frame.shape[:2]
    for x, y, w, h in np.asarray(boxes, dtype=np.int64).reshape(-1, 4):
        x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + w, width), min(y + h, height)
        if x1 > x0 and y1 > y0:
            out[y0:y1, x0:x1] = frame[y0:y1, x0:x1]
    return out


def grown(boxes, share=SURROUNDINGS):
    """Each box (x, y, w, h) grown by ``share`` of its width and height each way."""
    boxes = np.asarray(boxes, dtype=np.int64).reshape(-1, 4)
    grow = np.ceil(share * boxes[:, 2:]).astype(np.int64)
    return np.concatenate([boxes[:, :2] - grow, boxes[:, 2:] + 2 * grow], axis=1)


class PastedAsFilmed(object):
    """While the block runs, PersonCrops.restore pastes people as the camera filmed their boxes: the pipeline's own
    boxes (``find`` None), or the boxes ``find(raw frame)`` gives, each grown by ``grow`` of its size each way."""

    def __init__(self, find=None, grow=0.0):
        self.find, self.grow = find, grow
        self.kept = np.zeros((0, 4), dtype=np.int64)    # the people pasted in the latest frame (boxes before growing)

    def __enter__(self):
        from sensorveil.runtime.camera import pipeline
        from sensorveil.runtime.camera.detect import channels_like
        self.saved = pipeline.PersonCrops.restore
        owner = self

        def restore(crops, privatized, context):
            scene = channels_like(crops.scene_of(context), context.frame)
            owner.kept = context.boxes if owner.find is None else owner.find(context.frame)
            return boxes_as_filmed(scene, context.frame, grown(owner.kept, owner.grow))

        pipeline.PersonCrops.restore = restore
        return self

    def __exit__(self, *exc):
        from sensorveil.runtime.camera import pipeline
        pipeline.PersonCrops.restore = self.saved


class OnlyWhereCounted(object):
    """While the block runs, PersonCrops.restore pastes the substitutes of only the people ``find(raw frame)`` finds
    (matched_rows); the rest are left out, on the scene."""

    def __init__(self, find):
        self.find = find
        self.kept = np.zeros((0, 4), dtype=np.int64)    # the boxes pasted in the latest frame

    def __enter__(self):
        from sensorveil.runtime.camera import pipeline
        self.saved = restore = pipeline.PersonCrops.restore
        owner = self

        def only_where_counted(crops, privatized, context):
            keep = matched_rows(context.boxes, owner.find(context.frame))
            owner.kept = np.asarray(context.boxes)[keep]
            return restore(crops, privatized[keep], context._replace(
                boxes=context.boxes[keep], windows=context.windows[keep], directions=context.directions[keep],
                track_ids=context.track_ids[keep]))

        pipeline.PersonCrops.restore = only_where_counted
        return self

    def __exit__(self, *exc):
        from sensorveil.runtime.camera import pipeline
        pipeline.PersonCrops.restore = self.saved


def matched_rows(boxes, found):
    """bool per row of ``boxes``: whether a ``found`` box matches it at IoU >= FOUND_IOU, one to one, best overlap
    first (as clip_audit.people_at_their_place matches people at their place)."""
    from sensorveil.benchmarks.detector_recall import FOUND_IOU
    from sensorveil.runtime.camera import iou
    boxes, found = np.asarray(boxes, float).reshape(-1, 4), np.asarray(found, float).reshape(-1, 4)
    keep = np.zeros(len(boxes), dtype=bool)
    if not len(boxes) or not len(found):
        return keep
    overlap = iou(boxes, found)
    while overlap.max() >= FOUND_IOU:
        i, j = np.unravel_index(np.argmax(overlap), overlap.shape)
        overlap[i, :], overlap[:, j] = -1.0, -1.0
        keep[i] = True
    return keep


def pasted_boxes(stream, patch):
    """The boxes of the people pasted in this frame's release: those the patch kept, else the pipeline's."""
    return stream.preprocessor.last_boxes if patch is None else patch.kept


def independent(privatizer):
    """The audit's independent counter: the bundle's learned graph alone, at the settings the bundle runs it with."""
    from sensorveil.benchmarks.clip_audit import counter_factories
    return counter_factories(privatizer)["independent"][1]()


def count_release(bundle: Path, clip: Path, paste: str, still=None) -> dict:
    """The goal's counts of one release with ``paste`` (PASTES), and how many pasted people the independent counter
    finds in it and in raw."""
    from sensorveil.benchmarks.clip_audit import STATELESS, CountCheck, counter_factories, judged, people_at_their_place
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream
    privatizer = load_for_stream(bundle, seed=DRAW_SEED, scene_still=still)
    counts = CountCheck(counter_factories(privatizer), stateless=STATELESS)
    on_raw, on_release = independent(privatizer), independent(privatizer)
    found = {"pasted": 0, "in_release": 0, "in_raw": 0}
    patch = {"substitutes": None, "substitutes_where_counted": OnlyWhereCounted(independent(privatizer)),
             "own_boxes": PastedAsFilmed(),
             "counter_boxes": PastedAsFilmed(independent(privatizer)),
             "counter_surroundings": PastedAsFilmed(independent(privatizer), SURROUNDINGS)}[paste]
    stream = Stream(privatizer, open_source(str(clip), reconnect=False, prefetch=False), prepare_ahead=False)
    with patch if patch is not None else contextlib.nullcontext():
        for result in stream:
            read = judged(result.frame.index)
            counts.add(result.frame.data, result.output, read, result.frame.index)
            if read:
                boxes = np.asarray(pasted_boxes(stream, patch), float).reshape(-1, 4)
                found["pasted"] += len(boxes)
                for key, frame in (("in_release", result.output), ("in_raw", result.frame.data)):
                    people = np.asarray((on_release if key == "in_release" else on_raw)(frame), float).reshape(-1, 4)
                    found[key] += people_at_their_place(boxes, people) if len(boxes) and len(people) else 0
    return {"count": counts.figures(), **found}


def measure(cases: list) -> dict:
    from sensorveil.runtime.camera.scene import read_scene_still
    out = {}
    for name, bundle, clip, *still in cases:
        out[name] = {"bundle": str(bundle), "clip": str(clip), "still": still[0] if still else None, "pastes": {}}
        picture = read_scene_still(still[0]) if still else None
        for paste in PASTES:
            start = time.monotonic()
            out[name]["pastes"][paste] = count_release(Path(bundle), Path(clip), paste, picture)
            print(f"{name}, {paste}: {time.monotonic() - start:.0f} s", flush=True)
    return out


def case_lines(name: str, case: dict) -> list:
    scene = f"scene still `{case['still']}`" if case.get("still") else "no scene still (the neutral grain)"
    rows = [(PASTES[paste], counter, count) for paste, figures in case["pastes"].items()
            for counter, count in figures["count"].items() if count["in_goal"]]
    found = [(PASTES[paste], figures["in_release"], figures["in_raw"], figures["pasted"])
             for paste, figures in case["pastes"].items()]
    lines = [f"## {name}", "", f"Bundle `{case['bundle']}`, clip `{case['clip']}`, {scene}.", ""]
    lines += count_table("pasted on the released scene", rows)
    lines += ["", "The pasted people the independent counter finds at their place (a box at IoU >= 0.3, one box for "
              "one person, as the camera audit matches them), on the judged frames:", ""]
    lines += found_lines(found)
    return lines + [""]


def page(result: dict, record: dict) -> str:
    lines = ["# How well any cut-out release could be counted as raw", "", page_header(record), "",
             "Each clip released as `sensorveil run` releases it (the scene and the people's places as the runtime "
             f"makes them, substitutes drawn from seed {DRAW_SEED}), once for each thing pasted on the same scene: "
             "the runtime's substitutes; the same for only the people the independent counter finds in the raw frame "
             "(the rest left out); each person the pipeline found, as the camera filmed their box; each person "
             "the independent counter finds in the raw frame, as the camera filmed their box, and the same box grown "
             f"by {SURROUNDINGS:g} of its size each way. The last three paste raw pixels: measurements, never a "
             "release. Counts are the camera "
             "audit's goal counters on its judged frames (docs/guides/camera.md, \"The camera goal, part by part\"; "
             "the counters beside the goal are left out here).", ""]
    for name, case in result["cases"].items():
        lines += case_lines(name, case)
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", action="append", required=True, metavar="NAME BUNDLE CLIP [STILL]",
                        help="a clip's name on the page, a cut-out camera bundle, the clip and, optionally, a picture "
                             "of the empty place released as the scene")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    if any(len(case) not in (3, 4) for case in args.case):
        parser.error("--case takes NAME BUNDLE CLIP [STILL]")
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    result = {"cases": measure(args.case)}
    folders = {str(Path(case[2]).parent.resolve()): "CLIPS" for case in args.case}
    result = portable(result, folders=folders)
    write_page(args.out, page(result, record), record, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
