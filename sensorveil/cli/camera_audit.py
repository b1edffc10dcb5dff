"""sensorveil camera-audit BUNDLE [--clip CLIP]: the camera goal of a bundle, part by part, without retraining.

Identity (re-identification) needs the bundle's training run on this machine; leak meter, recall and count run
the bundle over a clip (the training run's clip by default, or the user's own ``--clip``). With a clip's annotated
people (``--ground-truth``, a MOTChallenge gt.txt) the counts are also scored against them. Nothing is written
but ``--json``."""
import argparse
import sys
from pathlib import Path

from sensorveil.cli.common import SCENE_STILL_HELP, positive_int, scene_still_from, write_json
from sensorveil.runtime.errors import InputError


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def training_clip(bundle):
    """The clip the bundle's training run read, where that run is on this machine; else None."""
    from sensorveil.sdk.assess import bundle_run_dir
    from sensorveil.sdk.rundir import read_run
    try:
        path = read_run(bundle_run_dir(bundle)).dataset.path
    except FileNotFoundError:
        return None
    return Path(path) if path and Path(path).is_file() else None


def identity_audit(args) -> dict:
    """The identity audit, or {"verdict": "not measured", "why"} where it cannot run here or was not asked for."""
    from sensorveil.sdk.reid_audit import audit_bundle, format_identity
    if args.no_identity:
        return {"verdict": "not measured", "why": "--no-identity"}
    try:
        result = audit_bundle(args.bundle, backend=args.backend, epochs=args.epochs, seed=args.seed, log=log)
    except FileNotFoundError as error:
        return {"verdict": "not measured", "why": str(error)}
    print(format_identity(result))
    return result


def people_there(args, clip):
    """{frame index: people} of ``--ground-truth`` for ``clip``, read before any audit runs (a bad file is one
    error, not minutes of auditing first); None without it."""
    from sensorveil.benchmarks.ground_truth import true_counts
    if args.ground_truth is None:
        if args.gt_size is not None:
            raise InputError(f"--gt-size {args.gt_size[0]}x{args.gt_size[1]} without --ground-truth; expected both")
        return None
    if clip is None:
        raise InputError("--ground-truth needs the clip its frames annotate; expected --clip CLIP")
    return true_counts(args.ground_truth, clip, args.gt_size)


def cmd_camera_audit(args) -> int:
    from sensorveil.benchmarks.camera_goal import camera_goal, format_goal, format_people_there
    from sensorveil.benchmarks.clip_audit import audit_clip
    from sensorveil.benchmarks.direction_check import format_direction
    clip = args.clip or training_clip(args.bundle)
    truth = people_there(args, clip)
    identity = identity_audit(args)
    clip_result = None
    if clip is not None:
        log(f"clip audit: {clip} through {args.bundle} (leak meter, recall, count)")
        clip_result = audit_clip(args.bundle, clip, frames=args.frames, backend=args.backend, log=log,
                                 scene_still=scene_still_from(args), seed=args.seed, true_counts=truth)
    goal = camera_goal(clip_result, identity)
    print(format_goal(goal))
    if clip_result is not None:
        print(format_direction(clip_result["direction"]))
        print(format_people_there(clip_result))
    write_json({"bundle": str(args.bundle), "goal": goal, "identity": identity, "clip": clip_result}, args.json)
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("camera-audit", help="the camera goal of a bundle, part by part: re-identification with "
                                              "power, leak meter, recall and people count on a clip")
    p.add_argument("bundle", help="a camera BUNDLE (identity needs its training run on this machine)")
    p.add_argument("--clip", type=Path, default=None,
                   help="the clip to run the bundle over (default: its training run's clip)")
    p.add_argument("--frames", type=positive_int, default=None, help="only the clip's first N frames")
    p.add_argument("--scene-still", default=None, metavar="IMAGE", help=SCENE_STILL_HELP + " (as `run` takes it)")
    p.add_argument("--no-identity", action="store_true", help="skip the re-identification audit (it trains an "
                                                              "attacker: minutes)")
    p.add_argument("--backend", default="auto", help="runtime backend that draws the release")
    p.add_argument("--epochs", type=positive_int, default=15, help="training epochs of the re-id attacker")
    p.add_argument("--seed", type=int, default=0, help="the attacker's, the intervals' bootstrap's and the "
                                                       "substitutes' draws' seed (a device draws from the OS; the "
                                                       "audit replays one draw, so one seed gives one set of figures)")
    p.add_argument("--ground-truth", type=Path, default=None, metavar="GT_TXT",
                   help="the clip's annotated people (a MOTChallenge gt.txt: frame,id,left,top,width,height,...; "
                   "frames from 1): the counts are also scored against them, beside the goal (default: against "
                   "the recall's reference people)")
    p.add_argument("--gt-size", type=frame_size, default=None, metavar="WxH",
                   help="the frame size the gt.txt's boxes are in (default: the clip's)")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.set_defaults(func=cmd_camera_audit)


def frame_size(text: str) -> tuple:
    """argparse type: WxH, two whole numbers of 1 or more."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels (e.g. 768x576), got {text!r}")
    return int(parts[0]), int(parts[1])
