"""What the neutral scene behind the substitutes does to the people count of a release without a scene still:
flat grey with decision 0011's gap against the fixed grain of decision 0029 (docs/decisions/0029-neutral-grain.md).

Where the camera has not been quiet for long (all of a busy scene, for long) a cut-out release pastes its
substitutes on the neutral scene. For each clip and each neutral scene this streams the bundle over the clip as
`sensorveil run` releases it (no scene still, substitutes drawn from seed 0) and counts the raw, released and
JPEG-90 frames with the camera goal's counters, exactly as the camera audit counts them
(sensorveil.benchmarks.clip_audit.CountCheck, on its judged frames). It also says how many of the pasted
substitutes the independent counter (the bundle's learned detector alone) finds on the release, and how many of
the same people it finds in the raw frame: a box found at IoU >= 0.3 of the pasted person's, one box for one
person (as the audit matches people at their place).

    python scripts/neutral_scene.py --case walkway runs/camera/pass-walkway ../shared/media/walkway.avi \\
        --case crowd runs/camera/pass-crowd CROWD.avi --out docs/neutral_scene.md
"""
import argparse
import functools
import time
from pathlib import Path

import numpy as np

from sensorveil_lab.page_text import count_table, found_lines
from sensorveil_lab.provenance import page_header, portable, provenance, require_clean, write_page

DRAW_SEED = 0
FLAT_GAP = 70       # decision 0011's gap on the flat grey, the runtime's until decision 0029


def flat_grey(shape):
    """The neutral scene before decision 0029: flat grey."""
    from sensorveil.runtime.camera.scene import NEUTRAL_GREY
    return np.full(shape, NEUTRAL_GREY, dtype=np.uint8)


NEUTRAL_SCENES = {
    "flat grey, gap 70 (before decision 0029)": (flat_grey, FLAT_GAP),
    "grain, no gap (decision 0029)": (None, None),
}


class Patched(object):
    """The runtime's neutral scene and its gap replaced while the block runs (None: the runtime's own)."""

    def __init__(self, scene_maker, gap):
        self.scene_maker, self.gap = scene_maker, gap

    def __enter__(self):
        from sensorveil.runtime.camera import pipeline, scene
        self.saved = scene.neutral_scene, pipeline.QuietScene
        if self.scene_maker is not None:
            scene.neutral_scene = self.scene_maker
        if self.gap is not None:
            pipeline.QuietScene = functools.partial(self.saved[1], neutral_contrast=self.gap)
        return self

    def __exit__(self, *exc):
        from sensorveil.runtime.camera import pipeline, scene
        scene.neutral_scene, pipeline.QuietScene = self.saved


def found_share(pasted, found) -> int:
    """How many of the ``pasted`` boxes have a ``found`` box at IoU >= 0.3 (FOUND_IOU), one to one as the camera audit
    matches people at their place (clip_audit.people_at_their_place): one box never finds two people."""
    from sensorveil.benchmarks.clip_audit import people_at_their_place
    if len(pasted) == 0 or len(found) == 0:
        return 0
    return people_at_their_place(np.asarray(pasted, float), np.asarray(found, float))


def count_release(bundle: Path, clip: Path) -> dict:
    """The goal's counts of one release, and the substitutes the independent counter finds in it and in raw."""
    from sensorveil.benchmarks.clip_audit import STATELESS, CountCheck, counter_factories, judged
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream
    privatizer = load_for_stream(bundle, seed=DRAW_SEED)
    factories = counter_factories(privatizer)
    counts = CountCheck(factories, stateless=STATELESS)
    on_raw, on_release = factories["independent"][1](), factories["independent"][1]()
    pasted = found_released = found_raw = 0
    stream = Stream(privatizer, open_source(str(clip), reconnect=False, prefetch=False))
    for result in stream:
        read = judged(result.frame.index)
        counts.add(result.frame.data, result.output, read, result.frame.index)
        if read:
            boxes = stream.preprocessor.last_boxes
            pasted += len(boxes)
            found_released += found_share(boxes, on_release(result.output))
            found_raw += found_share(boxes, on_raw(result.frame.data))
    return {"count": counts.figures(), "pasted": pasted, "found_released": found_released, "found_raw": found_raw}


def measure(cases: list) -> dict:
    out = {}
    for name, bundle, clip in cases:
        out[name] = {"bundle": str(bundle), "clip": str(clip), "scenes": {}}
        for scene, (maker, gap) in NEUTRAL_SCENES.items():
            start = time.monotonic()
            with Patched(maker, gap):
                out[name]["scenes"][scene] = count_release(Path(bundle), Path(clip))
            print(f"{name}, {scene}: {time.monotonic() - start:.0f} s", flush=True)
    return out


def case_lines(name: str, case: dict) -> list:
    rows = [(scene, counter + ("" if count["in_goal"] else " (beside the goal)"), count)
            for scene, figures in case["scenes"].items() for counter, count in figures["count"].items()]
    found = [(scene, figures["found_released"], figures["found_raw"], figures["pasted"])
             for scene, figures in case["scenes"].items()]
    lines = [f"## {name}", "", f"Bundle `{case['bundle']}`, clip `{case['clip']}`.", ""]
    lines += count_table("neutral scene", rows)
    lines += ["", "The substitutes the independent counter finds (a box at IoU >= 0.3 of the pasted person's, each box "
              "for one person at most, as the camera audit matches people at their place), on the judged frames:", ""]
    lines += found_lines(found)
    return lines + [""]


def page(result: dict, record: dict) -> str:
    lines = ["# The neutral scene behind the substitutes, and the people count", "", page_header(record), "",
             "Each clip released without a scene still, as `sensorveil run` releases it (substitutes drawn from the "
             f"runtime's replayable seed {DRAW_SEED}), once per neutral scene: flat grey with decision 0011's gap of "
             f"{FLAT_GAP} grey levels (the runtime before decision 0029) and the fixed grain the runtime now "
             "releases, with no gap. The counts are the camera audit's (the goal's counters on its judged frames; "
             "docs/guides/camera.md, \"The camera goal, part by part\"). A scene still replaces the neutral scene, "
             "so the camera-audit pages made with one do not change.", ""]
    for name, case in result["cases"].items():
        lines += case_lines(name, case)
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs=3, action="append", required=True, metavar=("NAME", "BUNDLE", "CLIP"),
                        help="a clip's name on the page, a cut-out camera bundle and the clip")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    result = {"cases": measure(args.case)}
    folders = {str(Path(clip).parent.resolve()): "CLIPS" for _, _, clip in args.case}
    result = portable(result, folders=folders)
    write_page(args.out, page(result, record), record, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
