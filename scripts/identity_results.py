"""Who a camera release shows, on one clip: PASS trained with each substitute bank (rendered walkers, the
default; the clip's own people, bank=clip), each bundle audited by `sensorveil camera-audit`'s identity audit
(sensorveil.sdk.reid_audit): re-identification of the clip's test people (rank-1, mAP, 95% intervals over
people, chance, the attacker's power on raw crops), the bank search (the camera's people among the released
substitutes) and trajectory linkage. Bundles are exported with the motion detector alone: the identity audit
runs on the crops the bundle releases, which do not depend on the detector. The page docs/identity_results.md:

    python scripts/identity_results.py --clip ../shared/media/walkway.avi --out docs/identity_results.md
"""
import argparse
import json
import sys
from pathlib import Path

from sensorveil_lab.provenance import page_header, portable, provenance, require_clean

ROOT = Path(__file__).resolve().parents[1]

BANKS = ("rendered", "clip")


def bundle_for(bank: str, clip: Path, work: Path, epochs: int | None) -> Path:
    """PASS on the clip with this bank (conditioned on walking direction, as the camera quickstart trains it),
    exported for onnxruntime; reused when the work folder already holds it."""
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run, bundle = work / f"run-{bank}", work / f"bundle-{bank}"
    if not (run / "run.json").is_file():
        train_run("pass", "walkway", data_path=str(clip), out=run, epochs=epochs, dataset_options={"bank": bank},
                  settings={"condition": "direction", "progress": False})
    if not (bundle / "manifest.json").is_file():
        export_run(run, "onnx", bundle, person_detector="motion")
    return bundle


def percent(value: dict) -> str:
    return f"{value['mean']:.1%} [{value['low']:.1%}, {value['high']:.1%}]"


def page(results: dict, record: dict) -> str:
    first = next(iter(results.values()))
    lines = ["# Identity in the camera release: re-identification and the substitute bank", "",
             page_header(record), "",
             f"Clip `{record['clip']}`: {first['test_people']} test tracks in two folds (decision 0027: the "
             "clip's first 60% trains the attacker and the tracks seen only in the rest are tested, then the other "
             f"way round; training tracks {' and '.join(str(n) for n in first['training_people'])}). A track is not "
             "a person: one who comes back is a new track; docs/identity_ground_truth.md counts them against the "
             f"clip's ground truth. {first['raw']['queries']} "
             "queries, each a crop the bundle released at a test person's place and time, ranked against a raw "
             "gallery of that person's other crops. Attacker: " + first["attacker"] + ". Each person weighs once "
             "(chance 1/N); intervals: 95%, bootstrap over people. Goal: released rank-1 within 2x chance while "
             "raw rank-1 >= 40% (power), a rank-1 interval of +-5 points or less, and no more substitutes found "
             "among the camera's people "
             "than strangers (5%).", "",
             "| bank | raw rank-1 (power) | released rank-1 | chance | released mAP | substitutes found as "
             "this camera's people | verdict |", "|---|---|---|---|---|---|---|"]
    for bank, r in results.items():
        lines.append(f"| {bank} | {percent(r['raw']['rank1'])} | {percent(r['released']['rank1'])} | "
                     f"{r['chance']['rank1']:.1%} | {percent(r['released']['mAP'])} | {percent(r['bank']['found'])} "
                     f"| {r['verdict']}: {r['why']} |")
    lines += ["", "What the release keeps by design: each person's box, its place and its timing. An attacker who "
              "holds timestamped raw crops of the same camera links a released box to its person by place and "
              "time alone:", ""]
    for bank, r in results.items():
        lines.append(f"- {bank} bank: trajectory linkage rank-1 {percent(r['trajectory_linkage']['rank1'])}")
    clip_bank = results.get("clip", {}).get("bank", {})
    if "rank1_of_clip_people" in clip_bank:
        lines += ["", "The bank search has power: the clip-cut bank's substitutes, cut from the camera's own "
                  "people, are re-identified as the person they were cut from at rank-1 "
                  f"{percent(clip_bank['rank1_of_clip_people']['rank1'])}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clip", required=True, help="a still camera clip of people walking")
    parser.add_argument("--out", default="docs/identity_results.md", help="the page (its .json beside it)")
    parser.add_argument("--work", default="runs/identity", help="runs and bundles (reused when present)")
    parser.add_argument("--epochs", type=int, default=None, help="PASS epochs (default: the dataset's)")
    parser.add_argument("--attacker-epochs", type=int, default=15, help="the re-id attacker's epochs")
    parser.add_argument("--allow-dirty", action="store_true", help="write from uncommitted code (the page says so)")
    parser.add_argument("--render-only", action="store_true", help="only rewrite the page from its .json")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.render_only:
        saved = json.loads(out.with_suffix(".json").read_text())
        out.write_text(page(saved["banks"], saved["provenance"]))
        print(f"wrote {out} from {out.with_suffix('.json')}")
        return 0
    require_clean(args.allow_dirty)
    record = {**provenance(allow_dirty=args.allow_dirty), "clip": Path(args.clip).name}
    from sensorveil.sdk.reid_audit import audit_bundle
    results = {}
    for bank in BANKS:
        print(f"{bank} bank: training and exporting", flush=True)
        bundle = bundle_for(bank, Path(args.clip), Path(args.work), args.epochs)
        results[bank] = audit_bundle(bundle, epochs=args.attacker_epochs, log=lambda line: print(line, flush=True))
    out.write_text(page(results, record))
    out.with_suffix(".json").write_text(json.dumps(portable({"provenance": record, "banks": results}), indent=2,
                                                   default=str) + "\n")
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
