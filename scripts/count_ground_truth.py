"""The camera release's people counted against an annotated clip's ground truth, as people counting is scored.

The camera audit's count part (sensorveil.benchmarks.clip_audit) asks whether each counter counts the release as it
counts the raw frame (issue 50's goal, beside JPEG 90's floor). A user who counts people wants the number of people
there are. Where a clip has ground truth (a MOTChallenge gt.txt of the same frames), this page scores every counter's
count on the raw frames, on JPEG 90 and on the release against the annotated people on each judged frame: the share
of frames whose count is exact and the mean number of people a frame's count is off (moving-block bootstrap
intervals, clip_audit.block_interval). The release is the bundle's, streamed as `sensorveil run` streams it, with the
audit's replayable draws; the goal's own figures are printed beside, unchanged. The page
docs/count_ground_truth.md:

    python scripts/count_ground_truth.py --bundle BUNDLE --clip ../shared/media/walkway.avi --gt GT.txt \\
        --gt-size 768x576 --source TEXT [--scene-still IMAGE --still-note TEXT] --out docs/count_ground_truth.md

(GT.txt: MOTChallenge 2015's PETS09-S2L1/gt/gt.txt, the sequence walkway.avi's frames are, kept out of this
repository; scripts/identity_ground_truth.py reads the same file.)
"""
import argparse
import sys
from pathlib import Path

from sensorveil.benchmarks.ground_truth import true_counts
from sensorveil.cli.common import scene_still_from  # --scene-still read as `sensorveil run` reads it
from sensorveil_lab.provenance import page_header, portable, provenance, require_clean, write_page

VIDEOS = (("raw", "raw frames"), ("floor", "raw as JPEG 90"), ("released", "release"))


def figure(count: dict, video: str, kind: str, percent: bool) -> str:
    value, (low, high) = count[f"{video}_{kind}_reference"], count[f"{video}_{kind}_reference_interval"]
    if percent:
        return f"{value:.1%} [{low:.1%}, {high:.1%}]"
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def counter_rows(name: str, count: dict) -> list:
    rows = []
    for video, label in VIDEOS:
        people = count[f"{video}_people"]
        rows.append(f"| {name} | {label} | {figure(count, video, 'same_as', True)} | "
                    f"{figure(count, video, 'error_vs', False)} | {people:,} |")
    return rows


def nearer_text(name: str, count: dict) -> str:
    """Which of raw and release a counter counts nearer the ground truth, by whole intervals or not at all."""
    from sensorveil.benchmarks.camera_goal import nearer  # the audit's own reading, in the page's words
    verdict = {"release nearer": "nearer the ground truth than its count of the raw frames (intervals apart)",
               "release further": "further from the ground truth than its count of the raw frames (intervals apart)",
               "as near": "as near the ground truth as its count of the raw frames (the intervals overlap)"}[
        nearer(count)]
    return (f"- {name}: its count of the release is {verdict}; the goal's agreement with raw: "
            f"{count['same_count']:.1%} against JPEG 90's {count['floor_same_count']:.1%} "
            f"({'holds' if count['holds'] else 'fails'}).")


def scene_text(note) -> str:
    return "on the neutral scene, a grey grain (no scene still)" if not note else f"on the scene still ({note})"


def page(result: dict, record: dict) -> str:
    counts = result["count"]
    first = next(iter(counts.values()))
    lines = ["# The camera release's people count against the clip's ground truth", "", page_header(record), "",
             f"Clip `{Path(result['clip']).name}`; ground truth: {result['source']}. Bundle "
             f"`{Path(result['bundle']).name}`, released {scene_text(result['scene_still_note'])}; draws from the "
             f"runtime's replayable seed {result['draw_seed']}.", "",
             f"{first['reference_frames']} judged frames (every other frame after the warm-up), "
             f"{first['reference_people']:,} annotated people on them (a person counts where their box's centre is in "
             "the frame). Intervals: 95%, bootstrap over runs of 10 judged frames.", "",
             "| counter | frames | count exact [95%] | people off a frame [95%] | people counted |",
             "|---|---|---|---|---|"]
    for name, count in counts.items():
        label = name + ("" if count["in_goal"] else " (beside the goal)")
        lines += counter_rows(label, count)
    lines += ["", "Counters: " + "; ".join(f"{name}: {count['counter']}" for name, count in counts.items()) + ".", ""]
    lines += [nearer_text(name, count) for name, count in counts.items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--clip", type=Path, required=True)
    parser.add_argument("--gt", type=Path, required=True, help="a MOTChallenge gt.txt of the clip's frames")
    parser.add_argument("--gt-size", required=True, help="the frame size the gt.txt's boxes are in, WxH")
    parser.add_argument("--source", required=True, help="where the ground truth came from and its licence")
    parser.add_argument("--seed", type=int, default=0, help="the substitutes' replayable draws")
    parser.add_argument("--scene-still", default=None, metavar="IMAGE", help="as `sensorveil run --scene-still`")
    parser.add_argument("--still-note", default=None, metavar="TEXT", help="how the still was made, who looked at it")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    if (args.scene_still is None) != (args.still_note is None):
        parser.error("--scene-still and --still-note go together: the page says how the still was made")
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    from sensorveil.benchmarks.clip_audit import audit_clip
    truth = true_counts(args.gt, args.clip, tuple(int(v) for v in args.gt_size.lower().split("x")))
    result = audit_clip(args.bundle, args.clip, log=lambda text: print(text, flush=True),
                        scene_still=scene_still_from(args), seed=args.seed, true_counts=truth)
    result.update(bundle=str(args.bundle), source=args.source, scene_still_note=args.still_note)
    result = portable(result, folders={
        str(args.clip.parent.resolve()): "CLIPS", str(args.bundle.parent.resolve()): "BUNDLES"})
    write_page(args.out, page(result, record), record, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
