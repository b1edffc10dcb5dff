"""The camera goal of a bundle on a clip, as a page: `sensorveil camera-audit` (identity, leak meter, recall,
count) written to Markdown and JSON, with the clip's source and licence (a clip fetched for testing is never
committed; the page says where it came from).

    sensorveil quickstart --camera CLIP --out runs/NAME          # trains and exports the bundle on the clip
    python scripts/camera_audit_page.py --bundle runs/NAME/bundles/pass-SLUG --clip CLIP \\
        --source "where the clip came from, its licence" --out docs/camera_audit-NAME.md \\
        [--scene-still STILL --still-note "how it was made, and who looked at it"]   # released as `run` does
"""
import argparse
import sys
from pathlib import Path

from sensorveil.cli.common import scene_still_from  # --scene-still read as `sensorveil run` reads it
from sensorveil_lab.provenance import page_header, portable, provenance, require_clean, write_page

ROOT = Path(__file__).resolve().parents[1]


def audit(bundle: Path, clip: Path, epochs: int, scene_still=None, seed: int = 0) -> dict:
    from sensorveil.benchmarks.camera_goal import camera_goal
    from sensorveil.benchmarks.clip_audit import audit_clip
    from sensorveil.sdk.reid_audit import audit_bundle

    def log(line):
        print(line, file=sys.stderr, flush=True)
    try:
        identity = audit_bundle(bundle, epochs=epochs, seed=seed, log=log)
    except FileNotFoundError as error:
        identity = {"verdict": "not measured", "why": str(error)}
    clip_result = audit_clip(bundle, clip, log=log, scene_still=scene_still, seed=seed)
    return {"bundle": str(bundle), "clip": clip_result, "identity": identity,
            "goal": camera_goal(clip_result, identity)}


def page(result: dict, record: dict, source: str) -> str:
    from sensorveil.benchmarks.camera_goal import format_goal
    from sensorveil.sdk.reid_audit import format_identity
    clip, leak = result["clip"], result["clip"]["leak_meter"]
    lines = ["# The camera goal on a clip", "", page_header(record), "",
             f"Clip `{Path(clip['clip']).name}`, {clip['frames']} frames of {clip['frame_size'][0]}x"
             f"{clip['frame_size'][1]}: {source}. Bundle `{Path(result['bundle']).name}` "
             "(`sensorveil quickstart --camera` on this clip). What each part means: docs/guides/camera.md, "
             "\"The camera goal, part by part\".", "", draws_text(clip.get("draw_seed")), "",
             still_text(result.get("scene_still"), result.get("scene_still_note")), "", "```",
             format_goal(result["goal"]), *direction_lines(clip), "```", ""]
    if "chance" in result["identity"]:
        lines += ["```", format_identity(result["identity"]), "```", ""]
    lines += [f"Reference people for recall and the leak meter: {clip['recall']['reference']}.", ""]
    if leak["leaks"]:
        lines += ["Leaking boxes (frame, box x y w h, share of the person the release keeps):", ""]
        lines += [f"- frame {leak_box['frame']}: {leak_box['box']}, {leak_box['share']}" for leak_box in leak["leaks"]]
        lines.append("")
    if leak.get("held"):
        lines += ["Boxes read at the rule on values the release took before the person came, so not leaks "
                  "(docs/decisions/0033-held-since-empty.md; frame, box, share):", ""]
        lines += [f"- frame {held['frame']}: {held['box']}, {held['share']}" for held in leak["held"]]
        lines.append("")
    for name, count in clip["count"].items():
        lines.append(f"- {name} counter ({count['counter']}): {count['raw_people']:,} people counted in the raw "
                     f"frames read, {count['released_people']:,} in the release, {count['floor_people']:,} in "
                     f"JPEG 90{at_place_text(count)}{off_text(count)}.")
    return "\n".join(lines) + "\n"


def direction_lines(clip) -> list:
    """The direction a conditioned release delivers on the device (beside the goal), where the audit measured it."""
    from sensorveil.benchmarks.direction_check import format_direction
    return [format_direction(clip["direction"])] if "direction" in clip else []


def off_text(count) -> str:
    """Which way the release's count is off the raw count, where the audit recorded it."""
    if "released_more" not in count:
        return ""
    text = (f"; the release counts more people than the raw frame on {count['released_more']:.1%} of frames and "
            f"fewer on {count['released_fewer']:.1%}")
    if "reference_frames" in count:
        text += (f"; on the {count['reference_frames']} recall frames, the count equals the reference people's on "
                 f"{count['raw_same_as_reference']:.1%} of raw frames, {count['released_same_as_reference']:.1%} of "
                 f"released and {count['floor_same_as_reference']:.1%} of JPEG 90")
    return text


def draws_text(seed) -> str:
    """How the release's substitutes were drawn: a device draws from the OS; the audit replays a seeded draw."""
    if seed is None:
        return "Substitutes drawn from the OS, as a device draws them: a rerun differs by the draws."
    return (f"Substitutes drawn from the runtime's replayable seed {seed} (a device draws from the OS; the "
            "distribution is the same), so the command above gives these figures again; another `--seed` is "
            "another draw.")


def still_text(still, note=None) -> str:
    """Which scene the release shows where the camera has not been quiet long enough yet, and how its still was made,
    in the words of whoever wrote the page (nothing here can tell whether a picture holds nobody)."""
    if not still:
        return ("Released on the neutral scene, a grey grain made from a seed, where the camera has not been quiet "
                "long enough yet (no scene still given).")
    return (f"Released with the scene still `{still}` (`--scene-still`, as `sensorveil run` takes it) where the "
            f"camera has not been quiet long enough yet. How it was made and who looked at it, as the page's "
            f"writer states: {note}. A still is released as it is: an operator looks at it before giving it.")


def at_place_text(count: dict) -> str:
    """How many of the raw frames' people the counter finds at their place in the release and in JPEG 90 (equal
    counts can be a person missed where someone else is counted); audits from before the figure have none."""
    if "released_at_raw_people" not in count:
        return ""
    return (f"; of the raw people, {count['released_at_raw_people']:,} found at their place in the release "
            f"({count['floor_at_raw_people']:,} in JPEG 90)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--clip", type=Path, required=True)
    parser.add_argument("--source", required=True, help="where the clip came from and its licence")
    parser.add_argument("--epochs", type=int, default=15, help="the re-id attacker's epochs")
    parser.add_argument("--seed", type=int, default=0, help="the audit's seed: the attacker's, the bootstrap's and the "
                                                         "substitutes' draws' (the page's command regenerates it)")
    parser.add_argument("--out", type=Path, required=True, help="the page (.md; .json beside it)")
    parser.add_argument("--scene-still", default=None, metavar="IMAGE",
                        help="the operator's picture of the empty place (look at it first: it is released)")
    parser.add_argument("--still-note", default=None, metavar="TEXT",
                        help="with --scene-still: how the still was made and who looked at it (printed on the page)")
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    if args.scene_still is not None and not args.still_note:
        parser.error("--scene-still needs --still-note: how the still was made and who looked at it (the page says "
                     "it; nothing in the audit can tell whether a picture holds nobody)")
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    result = audit(args.bundle, args.clip, args.epochs, scene_still=scene_still_from(args), seed=args.seed)
    result["scene_still"] = None if args.scene_still is None else Path(args.scene_still).name
    result["scene_still_note"] = args.still_note
    result = portable(result, folders={
        str(args.clip.parent.resolve()): "CLIPS", str(args.bundle.parent.resolve()): "BUNDLES"})
    write_page(args.out, page(result, record, args.source), record, result, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
