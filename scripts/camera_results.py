"""The camera mechanism on walkway.avi: train PASS and PR-GAN on people crops of the first 60%
of the clip, export ONNX bundles, audit each bundle as the device runs it on the rest of the clip, run the
whole camera pipeline (detector -> privatizer per crop -> paste back) over the clip, and write
docs/camera_results.{json,md} and docs/camera_contact_sheet.png.

    PYTHONPATH=. python scripts/camera_results.py            # ../shared/media/walkway.avi beside the clone

Runs and bundles go to runs/camera/ and bundles/camera/ (kept: a second call reuses them; --retrain
trains again). Every figure on the page comes from this script.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from sensorveil.benchmarks.leak_meter import empty_scene
from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
from sensorveil.runtime.camera.settings import PASTE_CUT_OUT, CameraSettings
from sensorveil_lab.camera_pipeline import pipeline_on_clip
from sensorveil_lab.clips import clip_frames, scene_truth
from sensorveil_lab.people_counters import COUNTER_NAMES, COUNTERS, count_figures, counters
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean
from sensorveil_lab.scene_reveals import REVEAL_RECENT

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
CLIP = SHARED / "media" / "walkway.avi"
MECHANISMS = {
    # the tracker measures each person's walking direction on the device: PASS draws its substitute
    # among bank people walking the same way (PASSConfig.condition)
    "pass": {"condition": "direction"},
    # four margins of PR-GAN's section 6.4 sweep, 20 epochs each: a few minutes on 2 cores
    "prgan": {"margin_fractions": "0.05,0.1,0.2,0.35", "epochs": "20"},
}
GOAL_POINTS, GOAL_NAG = 0.05, 0.60


def train_and_export(name: str, clip: Path, runs: Path, bundles: Path, retrain: bool, tag: str = "walkway") -> Path:
    from sensorveil.export import export_run
    from sensorveil.sdk.runs import train_run
    run_dir, bundle_dir = runs / f"{name}-{tag}", bundles / f"{name}-{tag}"
    if retrain or not (run_dir / "run.json").is_file():
        print(f"training {name} on {clip.name} ...", flush=True)
        train_run(name, "walkway", data_path=str(clip), out=run_dir, settings=dict(MECHANISMS[name]))
    if retrain or not (bundle_dir / "manifest.json").is_file():
        export_run(run_dir, "onnx", bundle_dir)
    return bundle_dir


def nag(acc: float, guessing: float, raw: float) -> float:
    span = raw - guessing
    return float(max(0.0, (acc - guessing) / span)) if span > 0 else 0.0


def audit_bundle(bundle: Path, seeds: int, epochs: int) -> dict:
    """`sensorveil evaluate BUNDLE`'s audit, plus the same attackers on the raw crops (the reference)."""
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.assess import bundle_run_dir
    from sensorveil.sdk.audit import Release, audit, label_shift_weights, score
    from sensorveil.sdk.rundir import read_run
    run_dir = bundle_run_dir(bundle)
    run = read_run(run_dir)
    mechanism = mechanisms.get(run["mechanism"])
    privatizer = Privatizer.load(bundle, **mechanism.audit_load_options)
    release = mechanism.release(run_dir, run, privatizer)
    task = release.task
    # the clip's two parts hold the appearance classes in other shares: scored on the test part
    # reweighted to the training part's P(appearance | direction), Random* is the floor again
    release.test_weights = weights = label_shift_weights(task)
    private = audit(release, seeds=seeds, attacker_epochs=epochs)
    raw = audit(Release(task=task, train=task.x[task.attacker_train], test=task.x[task.test], test_weights=weights),
                seeds=seeds, attacker_epochs=epochs)
    train_useful, test_useful = task.useful[task.attacker_train], task.useful[task.test]
    guessing = score(np.full(len(test_useful), np.bincount(train_useful).argmax()), test_useful, weights)
    camera = privatizer.pipeline.declared or CameraSettings()   # the defaults where a bundle has no entry
    direction_only = (direction_only_audit(run_dir, run, privatizer, seeds, epochs, weights)
                      if privatizer.conditioned_on else None)
    return {
        "bundle": str(bundle),
        "direction_only": direction_only,
        "backend": privatizer.backend_name,
        "privatized": private,
        "raw": raw,
        "conditioned_on": privatizer.conditioned_on,
        "paste": camera.paste,
        "direction_guessing": guessing,
        "direction_nag": nag(private["useful"]["mean"], guessing, raw["useful"]["mean"]),
        "direction_nag_low": nag(private["useful"]["low"], guessing, raw["useful"]["mean"]),
        "n_attacker_train": int(len(task.attacker_train)),
        "n_test": int(len(task.test)),
    }


def direction_only_audit(run_dir, run: dict, privatizer, seeds: int, epochs: int, weights) -> dict:
    """The same attackers on the release Random* stands for: each crop's substitute drawn uniformly among
    the bank people of its own direction, whoever it was. That release says nothing of appearance beyond
    the direction, so what the attackers score on it is what the split alone lets them score; the gap
    between it and the bundle's figure is what PASS's learned P(X'|X) adds."""
    import torch

    from sensorveil.sdk.audit import Release, audit
    from sensorveil.sdk.mechanisms.pass_substitution import attack_task, run_data

    stage = privatizer.pipeline.stages[-1]
    data = run_data(run_dir, run, bank_rows=stage.bank_indices)
    rng = np.random.default_rng(0)

    def draw(rows: np.ndarray) -> torch.Tensor:
        same = [np.flatnonzero(stage.bank_labels == value) for value in data.known(rows)]
        return torch.as_tensor([rng.choice(bank) for bank in same], dtype=torch.long)

    bank_x = data.x[torch.as_tensor(data.bank_rows, dtype=torch.long)]
    release = Release(
        task=attack_task(data, data.private[0]),
        train=bank_x[draw(data.train_rows)],
        test=bank_x[draw(data.test_rows)],
        test_weights=weights,
    )
    return audit(release, seeds=seeds, attacker_epochs=epochs)


FLOOR_CHANGE = "the raw clip re-encoded as JPEG quality 90"


def recall_figures(bundle: Path, clip: Path) -> "dict | None":
    """Each detector's recall on the clip (sensorveil.benchmarks.detector_recall), with the bundle's own
    learned graph as the device runs it; None for a bundle without one."""
    from sensorveil.benchmarks.detector_recall import detector_recall
    from sensorveil.runtime import Privatizer

    privatizer = Privatizer.load(bundle)
    if DETECTOR_GRAPH not in privatizer.pipeline.graphs:
        return None
    frames, (truth, _) = clip_frames(clip), scene_truth(clip)
    every = privatizer.pipeline.declared.detector_every
    return detector_recall(frames, privatizer.pipeline.run_graph, empty_scene(frames), every, truth=truth)


def recall_lines(result: dict) -> list:
    """The detectors' recall table (results written before the learned detector have none)."""
    recall = result.get("detector_recall")
    if not recall:
        return []
    names = {"motion": "motion alone (MOG2 blobs, every frame)", "learned": "learned graph alone (every frame)",
             "pipeline": f"the pipeline: learned every {recall['every']} frames + motion"}
    rows = [f"| {names[name]} | {r['found']:,} of {recall['reference_boxes']:,} | {pct(r['share'])} "
            f"[{pct(r['interval'][0])}, {pct(r['interval'][1])}] |" for name, r in recall["recall"].items()]
    return ["## Who the detectors find", "",
            f"On {recall['frames_scored']} frames (every 10th after the motion model's warm-up), reference people come "
            "from offline detectors that see more than the pipeline: the clip's median as the empty scene, and "
            "the bundle's learned graph on 2x2 overlapping tiles at score 0.15 "
            "(sensorveil/benchmarks/detector_recall.py). Found: a box of the detector's overlaps the reference "
            "box by IoU 0.3 or more; 95% Wilson intervals.", "",
            "| detector | reference people found | recall |", "|---|---|---|", *rows, ""]


def leak_lines(result: dict) -> list:
    """The leak meter's figures per mechanism (results written before it existed have none)."""
    lines = []
    for name, m in result["mechanisms"].items():
        leak = m["pipeline"].get("leak_meter")
        if not leak:
            continue
        worst = leak["worst_frame"]
        lines.append(
            f"- {name}: {leak['leaking_boxes']:,} leaking boxes of {leak['offline_boxes']:,} people the offline "
            f"detector found ({leak['not_privatized_boxes']:,} not covered by a box of the pipeline's, "
            f"{leak['measured_boxes']:,} of those with enough person pixels to judge); "
            + (f"worst frame {worst['frame']} with {worst['leaking']}." if worst["frame"] is not None else
               "no frame leaks.") + power_text(leak)
        )
    if lines:
        lines = ["## Leak meter: does the release show a person the pipeline missed?", "",
                 "Offline detectors (sensorveil/benchmarks/leak_meter.py) find the people in every raw frame: "
                 "person-sized blobs that differ from the empty scene (the clip's median, or a made scene's own "
                 "empty scene), the bundle's learned graph on 2x2 overlapping tiles at score 0.15 (bundles that "
                 "carry it), and a made scene's recorded people. For a person no box of the pipeline's covers, "
                 "the meter fits the released pixels of the person (pasted substitutes left out) as share x raw "
                 "+ b x empty scene + c: a ghost blended at 0.3 reads 0.3, the empty scene or a neutral grey 0, "
                 "the raw frame 1. A box leaks when its share is 0.1 or more (docs/decisions/0007). A box with too "
                 "few pixels that differ from the empty scene, or with no pattern beyond it, cannot be judged (a "
                 "person standing through a whole camera clip is in its median). Its power on the clip's own "
                 "boxes: a control ghost (0.2 of the raw frame blended into the release) in each judged box. "
                 "Goal: 0 leaking boxes.", ""] + lines + [""]
    return lines


def power_text(leak: dict) -> str:
    """The meter's own power and the largest share it read (results written before the share rule have none)."""
    if "control_caught_boxes" not in leak:
        return ""
    largest = "none judged" if leak["largest_share"] is None else f"{leak['largest_share']:.3f}"
    return (f" Largest share read: {largest} (rule {leak['rule']['ghost_share']}); the control ghost "
            f"({leak['rule']['control_ghost']}) is caught in {leak['control_caught_boxes']:,} of "
            f"{leak['measured_boxes']:,} judged boxes.")


def count_floor(clip: Path) -> dict:
    """How far each counter's count moves under a change nobody would call privacy: ``FLOOR_CHANGE``,
    counted against the raw clip the same way as the privatized video is."""
    import cv2

    from sensorveil.benchmarks.clip_audit import jpeg_floor

    pairs = counters()
    counted = {name: ([], []) for name in pairs}
    capture = cv2.VideoCapture(str(clip))
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        changed = jpeg_floor(frame)
        for name, (on_raw, on_changed) in pairs.items():
            counted[name][0].append(len(on_raw(frame)))
            counted[name][1].append(len(on_changed(changed)))
    capture.release()
    return {"change": FLOOR_CHANGE, "counts": {name: count_figures(*counted[name]) for name in pairs}}


def count_over_draws(bundle: Path, clip: Path, seeds: int) -> dict:
    """The count check repeated over ``seeds`` seeded runs of the bundle (a substitution bundle draws
    other substitutes each run, and how a counter sees them varies): per counter, the share of frames
    with the same count and the mean difference, each as mean and 95% interval (seed spread + frames'
    binomial error)."""
    from sensorveil.sdk.audit import interval

    runs = [pipeline_on_clip(bundle, clip, [], seed=seed, leaks=False) for seed in range(seeds)]
    figures = {}
    for name in COUNTERS:
        counts = [run["counts"][name] for run in runs]
        diffs = [c["mean_diff"] for c in counts]
        spread = float(np.var(diffs, ddof=1)) / len(diffs) if len(diffs) > 1 else 0.0
        within = float(np.mean([c["mean_diff_ci95"] for c in counts])) / 1.96
        figures[name] = {
            "same_share": interval([c["same_share"] for c in counts], runs[0]["frames"]),
            "mean_diff": float(np.mean(diffs)),
            "mean_diff_ci95": 1.96 * math.sqrt(spread + within**2),
            "undetected_people": float(np.mean([c["undetected_people"] for c in counts])),
            "raw_people": counts[0]["raw_people"],
        }
    return {"seeds": seeds, "frames": runs[0]["frames"], "counts": figures}


def contact_sheet(sheets: dict, path: Path) -> Path:
    """Rows: chosen frames of the test part; columns: raw, then each mechanism's privatized frame."""
    import cv2

    names = list(sheets)
    frames = sorted(set.intersection(*(set(s) for s in sheets.values())))
    rows = []
    for index in frames:
        raw = sheets[names[0]][index][0]
        tiles = [("raw", raw)] + [(name, sheets[name][index][1]) for name in names]
        row = []
        for label, image in tiles:
            tile = cv2.resize(image, (320, 240), interpolation=cv2.INTER_AREA)
            cv2.putText(tile, f"{label}  #{index}", (6, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (0, 255, 255), 1)
            row.append(tile)
        rows.append(np.concatenate(row, axis=1))
    cv2.imwrite(str(path), np.concatenate(rows, axis=0))
    return path


def outside_windows_line(name: str, c: dict) -> str:
    """What the pipeline's own counter finds outside every privatized window, and what it is."""
    found = (f"- {name}: of the {c['counted_private_people']:,} people the pipeline's own counter finds in the "
             f"privatized video, {c['unprivatized_people']:,} lie outside every window the pipeline privatized")
    frames = f"in {c['frames_with_unprivatized']} of {c['frames']} frames"
    reveals = c.get("unprivatized_over_reveals")
    if reveals is None:   # a window release (the camera's frame around the windows), or results from before
        return f"{found} (people its detector missed), {frames}."
    return f"{found}, {frames}; " + (
        f"{reveals:,} of them lie over a block the quiet scene began showing the camera in the {REVEAL_RECENT} "
        "frames before: the scene's own change (the neutral grey giving way to the place, which a background "
        "model reads as something new), not a person released as the camera saw them, since the release shows "
        "no pixel of the camera where anyone was seen lately; the leak meter below checks every person.")


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def interval_text(figure: dict) -> str:
    return f"{pct(figure['mean'])} [{pct(figure['low'])}, {pct(figure['high'])}]"


def test_people_text(result: dict) -> str:
    """Who the test part holds, as the run measured it: a made crowd repeats one clip's people in time-shifted
    copies, so its tracks differ while its people are the same on both sides of the split."""
    data = result["dataset"]
    if data.get("made_from_copies"):
        return "the made crowd repeats walkway's people, so the same people are on both sides of the split"
    if "test_rows_of_training_tracks" not in data:
        return "whether its people were seen in training was not recorded"
    share = data["test_rows_of_training_tracks"] / max(data["test_rows"], 1)
    return f"{share:.0%} of them of tracks also seen in training"


def detectors_text(result: dict) -> str:
    """Which detectors the bundles ran: the learned graph (when the page measured its recall) and motion."""
    motion = "a still-camera background model (OpenCV MOG2, person-shaped foreground blobs)"
    recall = result.get("detector_recall")
    if not recall:
        return motion
    return (f"the bundle's learned person detector (COCO SSDLite-MobileNetV2, every {recall['every']} frames) "
            f"united with {motion}")


def how_it_pastes(audit_figures: dict) -> str:
    """One sentence on what the bundle's pipeline puts where the person was."""
    if audit_figures.get("paste") == PASTE_CUT_OUT:
        from sensorveil.runtime.camera import PERSON_GAP as gap

        text = (
            "a substitute person cut out of a bank crop (its largest blob, gaps closed) is stretched to the "
            "detected person's box and pasted (in colour where the bundle carries its bank in colour) onto the "
            "quiet scene, which is the whole frame released (the camera shows only where nobody was seen for a "
            "long horizon, neutral grey elsewhere, so a person the detector misses is left out), people side by "
            f"side kept {gap[0]} px apart ({gap[1]} px "
            "above and below) and thickened by a pixel, darker parts below 0.45 of the scene (no shadow to a "
            "background model), so a counter downstream sees each of them, one draw per tracked person (drawn again "
            "once the tracker knows its direction), walking on through that bank person's own crops of the "
            "training part as they were filmed"
        )
        if audit_figures.get("conditioned_on"):
            text += (
                f", drawn among bank people of the same {audit_figures['conditioned_on']} as the tracker "
                "measured it (past frames only); the attackers are given the whole bank crop, background "
                "included, which is more than the device emits"
            )
        return text + "."
    return "the privatized crop replaces the person's whole window (background included)."


def difference_text(c: dict) -> str:
    """A counter's same-count share (with its interval over seeded runs, where it has one) / mean diff."""
    share = interval_text(c["same_share"]) if isinstance(c["same_share"], dict) else pct(c["same_share"])
    return f"{share} / {c['mean_diff']:+.2f} +- {c['mean_diff_ci95']:.2f}"


def count_text(pipeline: dict, counter: str = "pipeline") -> str:
    """Same-count share and mean difference: over seeded draws with intervals where the run has them."""
    return difference_text(pipeline.get("count_over_draws", pipeline)["counts"][counter])


def floor_text(floor: dict, counter: str) -> str:
    return difference_text(floor["counts"][counter])


def count_lines(result: dict) -> list:
    """The count table: each counter on each mechanism's release, beside the same counter under a change
    nobody would call privacy (the floor), and the people the pipeline's detector never found."""
    floor = result.get("count_floor")
    names = list(result["mechanisms"])
    lines = [
        "| counter | "
        + " | ".join(f"{name}: same / mean diff" for name in names)
        + (f" | {floor['change']}: same / mean diff" if floor else "")
        + " | raw people the pipeline's "
        "detector did not find |",
        "|---|" + "---|" * (len(names) + bool(floor) + 1),
    ]
    for counter, what in COUNTERS.items():
        undetected = [
            m["pipeline"].get("count_over_draws", m["pipeline"])["counts"][counter]
            for m in result["mechanisms"].values()
        ][0]
        lines.append(
            f"| {what} | "
            + " | ".join(count_text(m["pipeline"], counter) for m in result["mechanisms"].values())
            + (f" | {floor_text(floor, counter)}" if floor else "")
            + f" | {undetected['undetected_people']:,.0f} of {undetected['raw_people']:,} |"
        )
    return lines


def family_cells(private: dict, raw: dict) -> str:
    return ", ".join(
        f"{family} {pct(fig['mean'])} ({pct(raw['private'][family]['mean'])})"
        if family in raw["private"]
        else f"{family} {pct(fig['mean'])}"
        for family, fig in private["private"].items()
    )


def shares_text(result: dict) -> str:
    shares = result["dataset"].get("appearance_shares")
    if not shares:
        return "the test part holds other people"
    return (
        "appearance classes in the training part "
        + " / ".join(pct(v) for v in shares["train"])
        + ", in the test part "
        + " / ".join(pct(v) for v in shares["test"])
    )


def effective_text(result: dict) -> str:
    audits = [m["audit"]["privatized"] for m in result["mechanisms"].values()]
    return ", ".join(f"{a['n_effective']:.0f} of {a['n_test']}" for a in audits[:1] if "n_effective" in a) or "n/a"


def render(result: dict, command: str) -> str:
    from sensorveil.runtime.camera.scene import SCENE_HORIZON

    lines = [
        f"# The camera mechanism on {result.get('clip', 'walkway.avi')}",
        "",
        page_header(recorded(result)),
        "",
        f"The run took {result['seconds']:.0f} s on that machine.",
        "",
        f"People are found by {detectors_text(result)} and followed by an IoU/centroid tracker "
        "(`sensorveil/runtime/camera/`); each person is a 128x64 grey crop. "
        f"Labels come from the clip: **private** = appearance, {result['dataset']['clusters']} k-means clusters "
        "of the tracks' look (who it is, coarsely); **useful** = walking direction (left/right). Trained on the "
        f"first 60% of the clip ({result['dataset']['train_rows']} crops), scored on the rest "
        f"({result['dataset']['test_rows']} crops; {test_people_text(result)}).",
        "",
        *[f"- **{name}**: {how_it_pastes(m['audit'])}" for name, m in result["mechanisms"].items()],
        "",
        f"Audit: `sensorveil evaluate BUNDLE`'s attackers (sdk/audit.py) trained on the bundle's output, "
        f"{result['seeds']} seeds, 95% intervals. Goal: strongest attacker within 5 points of Random*, "
        "direction NAG >= 60%, people count per frame unchanged.",
        "",
        f"Scoring: the clip's two parts hold the appearance classes in other shares ({shares_text(result)}), "
        "so on the plain test rows Random* (the best guess from the direction under the training part's "
        "prior) is no floor: an attacker that spreads its guesses beats it on a release that carries nothing "
        "but the direction. Every figure below is therefore scored on the test rows reweighted to the "
        "training part's P(appearance | direction) (label-shift weights, sdk/audit.label_shift_weights; "
        f"{effective_text(result)} effective rows), where Random* is the best any guess from the direction "
        "can do; the plain figures follow the table.",
        "",
        "| mechanism | strongest attacker (privatized) | same attacker on raw crops | Random* | goal: within 5 pts "
        "| direction probe (privatized) | direction probe (raw) | direction NAG | count same / mean diff |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in result["mechanisms"].items():
        a = m["audit"]
        strongest = a["privatized"]["strongest_attacker"]
        raw_same = a["raw"]["private"].get(strongest)
        if raw_same:
            raw_text = interval_text(raw_same)
        else:   # an attacker of the release alone (the bank-index posterior): the audit's power is raw's strongest
            raw_best = a["raw"]["strongest_attacker"]
            raw_text = f"none of its kind; strongest on raw, {raw_best}: {interval_text(a['raw']['private'][raw_best])}"
        c = m["pipeline"]
        lines.append(
            f"| {name} | {strongest}: {interval_text(a['privatized']['private'][strongest])} | "
            f"{raw_text} | {pct(a['privatized']['random_star'])} | "
            f"{'met' if a['privatized']['goal']['strongest_within_5_points_of_random_star'] else 'NOT met'} | "
            f"{interval_text(a['privatized']['useful'])} | {interval_text(a['raw']['useful'])} | "
            f"{pct(a['direction_nag'])} (low end {pct(a['direction_nag_low'])}) | "
            f"{count_text(c)} |"
        )
    lines += ["", "Every attacker family, privatized (raw in brackets), weighted; then the plain test rows:", ""]
    for name, m in result["mechanisms"].items():
        a = m["audit"]
        lines.append(f"- {name}: " + family_cells(a["privatized"], a["raw"]))
        if "unweighted" in a["privatized"]:
            plain, plain_raw = a["privatized"]["unweighted"], a["raw"]["unweighted"]
            lines.append(
                f"- {name}, plain test rows: "
                + family_cells(plain, plain_raw)
                + f"; Random* {pct(plain['random_star'])}"
            )
    for name, m in result["mechanisms"].items():
        ideal = m["audit"].get("direction_only")
        if not ideal:
            continue
        strongest = ideal["strongest_attacker"]
        cells = ", ".join(f"{family} {pct(fig['mean'])}" for family, fig in ideal["private"].items())
        lines += [
            "",
            f"The check of that floor: the same attackers on a direction-only release ({name}'s bank, each "
            "substitute drawn uniformly among the bank people of the crop's own direction, no appearance "
            f"beyond the direction), weighted: {cells}; strongest {strongest} "
            f"{interval_text(ideal['private'][strongest])} against Random* {pct(ideal['random_star'])}.",
        ]
        if "unweighted" in ideal:
            plain = ideal["unweighted"]
            best = max(plain["private"], key=lambda family: plain["private"][family]["mean"])
            lines[-1] += (
                f" On the plain test rows the same release gives {best} {interval_text(plain['private'][best])} "
                f"against Random* {pct(plain['random_star'])}: the shift alone, no appearance."
            )
    lines += [
        "",
        "## Cost of the whole camera pipeline on the clip",
        "",
        "Decode + detect + privatize every crop + paste back, one process, onnxruntime, "
        "loaded and run as `sensorveil run`/`preview` do (`load_for_stream`: threads that sleep between runs; "
        "no display, no sink). CPU ms add every thread of the process over the pipeline's own calls; the "
        "counters and the leak meter run between them, untimed.",
        "",
        "| mechanism | frames | people per frame | FPS | CPU ms per frame | wall ms per frame |",
        "|---|---|---|---|---|---|",
    ]
    for name, m in result["mechanisms"].items():
        c = m["pipeline"]
        lines.append(
            f"| {name} | {c['frames']} | {c['people_per_frame_mean']:.2f} | {c['fps']:.1f} | "
            f"{c['cpu_ms_per_frame']:.1f} | {c['wall_ms_per_frame']:.1f} |"
        )
    lines += [
        "",
        "## People count per frame",
        "",
        "Each counter (the same person rules on a background model: the pipeline's own detector and tracker, "
        "its MOG2 detector alone, or OpenCV's KNN model) is run afresh on the raw video and on the privatized "
        'video; "same" is the share of frames where both '
        "count the same people, the diff is privatized minus raw per frame (mean, 95% interval), over the audit's "
        "number of seeded runs of the pipeline (each draws other substitutes), the interval combining their "
        "spread and the frames' binomial error (frames of a clip are not independent, so it is a lower bound on "
        f"the spread). Beside them the floor: the same counter on {FLOOR_CHANGE}, a change nobody would call "
        "privacy, against the raw clip. Last column: people each counter finds in the raw video with no "
        "detection of the pipeline's over them (IoU < 0.3), per run, of all the people it finds there.",
        "",
        *count_lines(result),
        "",
    ]
    for name, m in result["mechanisms"].items():
        draws = m["pipeline"].get("count_over_draws")
        if draws:  # how much of each counter's shortfall the pipeline's detector explains
            lines.append(
                f"- {name}: "
                + "; ".join(
                    f"{COUNTER_NAMES[counter]} counts {abs(c['mean_diff']) * draws['frames']:,.0f} people "
                    f"{'fewer' if c['mean_diff'] <= 0 else 'more'} in the release than in the raw video, "
                    "where it finds "
                    f"{c['undetected_people']:,.0f} people the pipeline's detector never found"
                    for counter, c in draws["counts"].items()
                )
                + "."
            )
    for name, m in result["mechanisms"].items():
        c = m["pipeline"]
        if "unprivatized_people" in c:  # results written before this figure existed lack it
            lines.append(outside_windows_line(name, c))
    lines += ["", *recall_lines(result), *leak_lines(result)]
    lines += [
        "",
        f"![raw and privatized frames of the test part]({Path(result['contact_sheet']).name})",
        "",
        "What the released scene holds (seen on the contact sheet): PASS pastes its substitutes on the quiet "
        "scene (sensorveil/runtime/camera/scene.py), which shows the camera only in blocks where no motion, "
        f"detection or track was seen for {SCENE_HORIZON} frames and is neutral grey until then, so the first "
        "frames, slow walkers and people who stop are never learnt into it; quiet blocks are revealed together "
        f"once every {SCENE_HORIZON} frames and only in regions a counter would not take for a person (wider than "
        "tall, or taller than any person), so the grey giving way to the place is not counted as someone new "
        "(docs/decisions/0010-scene-reveals.md). What it cannot tell from the scene "
        "is a person neither detector ever found and who never moves (the leak meter above looks for them). "
        "PR-GAN releases the camera's frame outside each person's window, so a person its detector "
        "misses goes out raw: the leak meter above counts them.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default=str(CLIP))
    parser.add_argument("--runs", default=str(ROOT / "runs" / "camera"))
    parser.add_argument("--bundles", default=str(ROOT / "bundles" / "camera"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--attacker-epochs", type=int, default=20)
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=list(MECHANISMS))
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--made-crowd", action="store_true",
                        help="the clip is scripts/crowd_clip.py's crowd: time-shifted copies of another clip's people, "
                        "so the same people are on both sides of the split (the page says so)")
    parser.add_argument("--tag", default="walkway",
                        help="names the runs, bundles and page: walkway writes docs/camera_results.md, another "
                        "tag docs/camera_results-TAG.md (e.g. --clip crowd-walkway.avi --tag crowd, from "
                        "scripts/crowd_clip.py)")
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="re-draw docs/camera_results[-TAG].md from its .json (no run)",
    )
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    docs = Path(args.docs)
    page = "camera_results" + ("" if args.tag == "walkway" else f"-{args.tag}")
    if args.render_only:
        result = json.loads((docs / f"{page}.json").read_text())
        (docs / f"{page}.md").write_text(render(result, result["command"]))
        print((docs / f"{page}.md").read_text())
        return 0
    require_clean(args.allow_dirty)
    record = provenance([__file__] + list(sys.argv[1:] if argv is None else argv), args.allow_dirty)
    clip = Path(args.clip)
    if not clip.is_file():
        parser.error(f"clip not found: {clip} (set --clip or SENSORVEIL_SHARED)")
    started = time.time()
    from sensorveil.sdk.datasets import load_dataset

    data = load_dataset("walkway", str(clip))
    split = data.attributes["trial_split"]
    appearance, classes = data.attributes["appearance"], data.num_classes["appearance"]
    shares = {
        part: (np.bincount(appearance[split == k], minlength=classes) / max((split == k).sum(), 1)).tolist()
        for k, part in enumerate(("train", "test"))
    }
    result = {
        "clip": clip.name,
        "seeds": args.seeds,
        "attacker_epochs": args.attacker_epochs,
        "dataset": {
            "rows": len(data),
            "train_rows": int((split == 0).sum()),
            "test_rows": int((split == 1).sum()),
            # test crops whose track the training part also holds: the same person on both sides of the split
            "test_rows_of_training_tracks": int(np.isin(data.attributes["track"][split == 1],
                                                        data.attributes["track"][split == 0]).sum()),
            "made_from_copies": bool(args.made_crowd),
            "clusters": classes,
            "description": data.description,
            "appearance_shares": shares,
        },
        "mechanisms": {},
    }
    import cv2

    capture = cv2.VideoCapture(str(clip))
    cut = int(round(0.6 * capture.get(cv2.CAP_PROP_FRAME_COUNT)))  # load_walkway's train_fraction
    capture.release()
    sheet_frames = [cut + 40, cut + 120, cut + 200, cut + 280]
    sheets = {}
    for name in args.mechanisms:
        bundle = train_and_export(name, clip, Path(args.runs), Path(args.bundles), args.retrain, args.tag)
        print(f"auditing {bundle} ...", flush=True)
        audit_figures = audit_bundle(bundle, args.seeds, args.attacker_epochs)
        print(f"running the camera pipeline of {bundle} over {clip.name} ...", flush=True)
        pipeline = pipeline_on_clip(bundle, clip, sheet_frames)
        sheets[name] = pipeline.pop("_sheet")
        print(f"counting people on {args.seeds} seeded runs of {bundle} ...", flush=True)
        pipeline["count_over_draws"] = count_over_draws(bundle, clip, args.seeds)
        result["mechanisms"][name] = {"audit": audit_figures, "pipeline": pipeline}
    if "pass" in args.mechanisms:
        print(f"measuring each detector's recall on {clip.name} ...", flush=True)
        result["detector_recall"] = recall_figures(Path(args.bundles) / f"pass-{args.tag}", clip)
    print(f"counting people on {clip.name} re-encoded ({FLOOR_CHANGE}) ...", flush=True)
    result["count_floor"] = count_floor(clip)
    sheet_name = "camera_contact_sheet" + ("" if args.tag == "walkway" else f"-{args.tag}")
    result["contact_sheet"] = str(contact_sheet(sheets, docs / f"{sheet_name}.png"))
    result["seconds"] = time.time() - started
    command = (
        "PYTHONPATH=. python scripts/camera_results.py"
        + (f" --seeds {args.seeds}" if args.seeds != 3 else "")
        + (f" --attacker-epochs {args.attacker_epochs}" if args.attacker_epochs != 20 else "")
        + ("" if args.tag == "walkway" else f" --clip {Path(args.clip).name} --tag {args.tag}")
    )
    result["command"] = command
    result["provenance"] = record
    # a clip outside the checkout and the shared files (a made crowd) is named by its folder's role, not its path
    result = portable(result, shared=SHARED, folders={str(clip.resolve().parent): "<clip folder>"})
    (docs / f"{page}.json").write_text(json.dumps(result, indent=2, default=float))
    (docs / f"{page}.md").write_text(render(result, command))
    print((docs / f"{page}.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
