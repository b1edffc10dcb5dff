"""Are the identity audit's test people really people the attacker never saw? The audit's identities are the
tracker's tracks (sensorveil.sdk.reid_audit.identity_split): a person whose track breaks, or who leaves and comes
back, is several identities, and a test track can be a training person under a new track. Where the clip has
ground truth (a MOTChallenge gt.txt of the same frames), this script maps every crop of the bundle's dataset to
the ground-truth person at its place (the box whose centre is nearest the crop's in that frame), says how many
people the audit's training and test tracks really are and how many test people the attacker trained on, and
runs the identity audit again with the ground truth's people as identities (test people: those never seen in
their fold's training part), on the same bundle's release. The page docs/identity_ground_truth.md:

    python scripts/identity_ground_truth.py --bundle BUNDLE --clip ../shared/media/walkway.avi \\
        --gt GT.txt --gt-size 768x576 --source TEXT --out docs/identity_ground_truth.md

(BUNDLE: `sensorveil quickstart --camera ../shared/media/walkway.avi`'s pass bundle; GT.txt: MOTChallenge 2015's
PETS09-S2L1/gt/gt.txt, the sequence walkway.avi's frames are, kept out of this repository.)
"""
import argparse
import json
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.ground_truth import clip_size_of, ground_truth
from sensorveil_lab.provenance import page_header, provenance, require_clean

UNMATCHED = -1
BANK_IDS = 1_000_000          # the substitute bank's rows keep their own identities, above every person's


def crop_people(timeline: np.ndarray, people: dict) -> np.ndarray:
    """Each crop's ground-truth person: the one whose centre x is nearest the crop's box centre in that frame,
    within half their width; UNMATCHED where none is, or where two are within 2 px of the same distance (the
    dataset keeps each crop's frame and centre x, not its height)."""
    ids = np.full(len(timeline), UNMATCHED, np.int64)
    for row, (frame, cx) in enumerate(timeline):
        if not np.isfinite(cx) or int(frame) not in people:
            continue
        who, centre, _, width = people[int(frame)]
        distance = np.abs(centre - cx)
        order = np.argsort(distance)
        near = distance[order[0]] <= max(width[order[0]] / 2, 4.0)
        clear = len(order) == 1 or distance[order[1]] - distance[order[0]] > 2.0
        if near and clear:
            ids[row] = who[order[0]]
    return ids


def track_table(track: np.ndarray, split: np.ndarray, person: np.ndarray) -> dict:
    """The audit's split by tracks, in ground-truth people: how many people its training and test tracks are,
    and how many test tracks follow a person who is also in a training track."""
    from sensorveil.sdk.reid_audit import identity_split
    train, gallery, query = identity_split(track, split)
    test_rows = np.concatenate([gallery, query])

    def majority(rows):
        out = {}
        for t in np.unique(track[rows]):
            own = person[rows][track[rows] == t]
            own = own[own != UNMATCHED]
            if len(own):
                values, counts = np.unique(own, return_counts=True)
                out[int(t)] = int(values[np.argmax(counts)])
        return out

    train_people, test_people = majority(train), majority(test_rows)
    seen = set(train_people.values())
    return {"training_tracks": len(np.unique(track[train])), "training_people": len(seen),
            "test_tracks": len(np.unique(track[test_rows])), "test_tracks_matched": len(test_people),
            "test_people": len(set(test_people.values())),
            "test_tracks_of_training_people": sum(p in seen for p in test_people.values()),
            "test_people_also_in_training": len(set(test_people.values()) & seen),
            "crops_matched": float(np.mean(person[split < 2] != UNMATCHED))}


def audit_by_people(bundle: Path, dataset, person: np.ndarray, epochs: int, seed: int) -> dict:
    """The identity audit with the ground truth's people as identities, in both folds: each fold's test people
    are those never seen in its training part; crops matched to no person are left out."""
    import dataclasses

    from sensorveil.sdk.reid_audit import bundle_release, identity_audit
    split, track = dataset.attributes["trial_split"], dataset.attributes["track"]
    identity = np.where(split == 2, BANK_IDS + track, person)
    people = dataclasses.replace(dataset, attributes={**dataset.attributes, "track": identity})
    release = bundle_release(bundle, dataset, seed=seed)     # drawn on the dataset's rows, as the device draws
    result = identity_audit(people, release, epochs, seed, identities="people of the ground truth",
                            keep=identity != UNMATCHED)
    return {"test_people": result["chance"]["people"], **result}


def page(result: dict, record: dict) -> str:
    from sensorveil.sdk.reid_audit import format_identity
    t = result["tracks"][0]
    rows = [row for k, fold in enumerate(result["tracks"]) for row in (
        (f"fold {k + 1}: training part", fold["training_tracks"], fold["training_people"], "-"),
        (f"fold {k + 1}: test part (the audit's test tracks)", fold["test_tracks"], fold["test_people"],
         f"{fold['test_tracks_of_training_people']} tracks, {fold['test_people_also_in_training']} people"))]
    lines = ["# The identity audit's people, checked against the clip's ground truth", "", page_header(record), "",
             f"Clip `{Path(result['clip']).name}`; ground truth: {result['source']}. Bundle "
             f"`{Path(result['bundle']).name}`. {t['crops_matched']:.1%} of the dataset's crops are matched to a "
             "ground-truth person (nearest box centre in that frame, within half their width).", "",
             "The audit's split by tracks in each fold (decision 0027: each part of the clip trains once), counted in "
             "ground-truth people:", "",
             "| part | tracks | ground-truth people | test tracks that are training people |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    lines += ["", "The identity audit again, with the ground truth's people as identities (test people: never seen "
              "in their fold's training part), on the same release:", "", "```", format_identity(result["by_people"]),
              "```", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", required=True, type=Path)
    parser.add_argument("--clip", required=True, type=Path)
    parser.add_argument("--gt", required=True, type=Path, help="a MOTChallenge gt.txt of the clip's frames")
    parser.add_argument("--gt-size", required=True, help="the frame size the gt.txt's boxes are in, WxH")
    parser.add_argument("--source", required=True, help="where the ground truth came from and its licence")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    args = parser.parse_args()
    require_clean(args.allow_dirty)
    record = provenance(allow_dirty=args.allow_dirty)
    from sensorveil.sdk.assess import bundle_run_dir
    from sensorveil.sdk.rundir import load_recorded_dataset, read_run
    dataset = load_recorded_dataset(read_run(bundle_run_dir(args.bundle)).dataset)
    clip_size = clip_size_of(args.clip)
    size = tuple(int(v) for v in args.gt_size.lower().split("x"))
    person = crop_people(dataset.timeline, ground_truth(args.gt, size, clip_size))
    split = dataset.attributes["trial_split"]
    from sensorveil.sdk.reid_audit import folds
    matched = np.where(split == 2, UNMATCHED, person)
    result = {"clip": str(args.clip), "bundle": str(args.bundle), "source": args.source,
              "tracks": [track_table(dataset.attributes["track"], part, matched) for part in folds(split)]}
    print(json.dumps(result["tracks"], indent=1), flush=True)
    result["by_people"] = audit_by_people(args.bundle, dataset, person, args.epochs, args.seed)
    args.out.write_text(page(result, record))
    args.out.with_suffix(".json").write_text(json.dumps({**result, "provenance": record}, indent=1, default=float))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
