"""The camera mechanisms on a clip, measured as the field measures them: PASS and PR-GAN trained on people
crops of the first 60% of the clip, exported as ONNX bundles and audited as the device runs them.

* The camera goal, part by part, as `sensorveil camera-audit` judges it (sensorveil/benchmarks/camera_goal.py):
  re-identification of test tracks disjoint from the attacker's, with its power (sdk/reid_audit.py); the leak
  meter, recall and the people count against the JPEG-90 floor (benchmarks/clip_audit.py); and the attribute
  attackers. "goal met" only when every part holds.
* The attribute attackers (sdk/audit.py) as the second table: appearance clusters against walking direction,
  scored on the test rows reweighted to the training part's P(appearance | direction).
* The whole pipeline's cost, and a contact sheet of raw frames beside each release.

    python scripts/camera_results.py                        # ../shared/media/walkway.avi beside the clone
    python scripts/camera_results.py --clip CROWD --tag crowd --made-crowd    # scripts/crowd_clip.py's crowd

Writes docs/camera_results[-TAG].{json,md} and docs/camera_contact_sheet[-TAG].png. Runs and bundles go to
runs/camera/ and bundles/camera/ (kept: a second call reuses them; --retrain trains again). The substitutes are
drawn from the runtime's replayable seed --draw-seed, so the command gives the same release again.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from sensorveil.runtime.camera.settings import PASTE_CUT_OUT, CameraSettings
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", ROOT.parent / "shared"))
CLIP = SHARED / "media" / "walkway.avi"
MECHANISMS = {
    # the tracker measures each person's walking direction on the device: PASS draws its substitute
    # among bank people walking the same way (PASSConfig.condition); its bank is the camera quickstart's,
    # walkers sensorveil renders itself (no bystander of this camera), screened by the bundle's detector
    "pass": {"condition": "direction"},
    # four margins of PR-GAN's section 6.4 sweep, 20 epochs each: a few minutes on 2 cores
    "prgan": {"margin_fractions": "0.05,0.1,0.2,0.35", "epochs": "20"},
}
REID_EPOCHS = 15          # the re-identification attacker's, as `sensorveil camera-audit` trains it


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def train_and_export(name: str, clip: Path, runs: Path, bundles: Path, retrain: bool, tag: str = "walkway") -> Path:
    from sensorveil.export import export_run
    from sensorveil.quickstart import bank_options
    from sensorveil.sdk.runs import train_run
    run_dir, bundle_dir = runs / f"{name}-{tag}", bundles / f"{name}-{tag}"
    if retrain or not (run_dir / "run.json").is_file():
        print(f"training {name} on {clip.name} ...", flush=True)
        # PASS's bank as the camera quickstart makes it: walkers screened by the bundle's own detector
        options = bank_options("ssdlite", "rendered") if name == "pass" else None
        train_run(name, "walkway", data_path=str(clip), out=run_dir, settings=dict(MECHANISMS[name]),
                  dataset_options=options)
    if retrain or not (bundle_dir / "manifest.json").is_file():
        export_run(run_dir, "onnx", bundle_dir)
    return bundle_dir


def nag(acc: float, guessing: float, raw: float) -> float:
    span = raw - guessing
    return float(max(0.0, (acc - guessing) / span)) if span > 0 else 0.0


def audit_bundle(bundle: Path, seeds: int, epochs: int, draw_seed: int = 0) -> dict:
    """`sensorveil evaluate BUNDLE`'s audit, plus the same attackers on the raw crops (the reference). The release
    is drawn from the runtime's replayable ``draw_seed``, so a second run of the page scores the same release."""
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.assess import bundle_run_dir
    from sensorveil.sdk.audit import Release, audit, label_shift_weights, score
    from sensorveil.sdk.rundir import read_run
    run_dir = bundle_run_dir(bundle)
    run = read_run(run_dir)
    mechanism = mechanisms.get(run["mechanism"])
    privatizer = Privatizer.load(bundle, seed=draw_seed, **mechanism.audit_load_options)
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


def camera_audits(bundle: Path, clip: Path, attributes: dict, draw_seed: int) -> dict:
    """`sensorveil camera-audit BUNDLE --clip CLIP --seed DRAW_SEED`'s audits: identity (re-identification with
    its power), the clip audit (leak meter, recall, count) and the goal part by part, the attribute audit's
    verdict among the parts."""
    from sensorveil.benchmarks.camera_goal import camera_goal
    from sensorveil.benchmarks.clip_audit import audit_clip
    from sensorveil.sdk.reid_audit import audit_bundle as audit_identity

    identity = audit_identity(bundle, epochs=REID_EPOCHS, seed=draw_seed, log=log)
    clip_result = audit_clip(bundle, clip, log=log, seed=draw_seed)
    return {"identity": identity, "clip": clip_result, "goal": camera_goal(clip_result, identity, attributes)}


def release_cost(bundle: Path, clip: Path, sheet_frames: list, draw_seed: int) -> dict:
    """The whole pipeline (decode, detect, privatize every crop, paste back) over the clip as `sensorveil run`
    streams it (``load_for_stream``: colour release, threads that sleep between runs), timed alone, with the raw
    and released ``sheet_frames`` kept for the contact sheet."""
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import Stream, load_for_stream

    privatizer = load_for_stream(bundle, seed=draw_seed)
    stream = Stream(privatizer, open_source(str(clip), reconnect=False, prefetch=False))
    people, kept, cpu, wall = [], {}, 0.0, 0.0
    iterator = iter(stream)
    while True:
        c0, w0 = time.process_time(), time.perf_counter()
        result = next(iterator, None)
        cpu, wall = cpu + time.process_time() - c0, wall + time.perf_counter() - w0
        if result is None:
            break
        people.append(len(stream.preprocessor.last_boxes))
        if result.frame.index in sheet_frames:
            kept[result.frame.index] = (result.frame.data.copy(), result.output.copy())
    frames = len(people)
    return {"frames": frames, "fps": frames / wall, "cpu_ms_per_frame": 1e3 * cpu / frames,
            "wall_ms_per_frame": 1e3 * wall / frames, "people_per_frame_mean": float(np.mean(people)),
            "substitutes": privatizer.describe().get("substitutes"), "_sheet": kept}


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


def how_it_pastes(mechanism: dict) -> str:
    """One sentence on what the bundle's pipeline puts where the person was, and who the substitutes are (the
    bundle's own record of its bank)."""
    audit = mechanism["audit"]
    if audit.get("paste") != PASTE_CUT_OUT:
        return ("the privatized crop replaces the person's whole window (background included); the camera's frame "
                "is released outside the windows, so a person the detectors miss goes out as filmed.")
    text = ("each person found is replaced by a substitute cut-out, stretched to the person's box and pasted "
            "onto the quiet scene, which is the whole frame released (the camera only where nobody was seen for "
            "a long horizon, a grey grain made from a seed elsewhere: a person the detectors miss is left out), "
            "one draw per tracked person")
    if audit.get("conditioned_on"):
        text += f", among the bank's people of the {audit['conditioned_on']} the tracker measured (past frames only)"
    return text + f"; {mechanism['cost']['substitutes'] or 'substitutes: not recorded'}."


def identity_people_text(result: dict) -> str:
    """Who the identity audit's test people are: in each of its two folds, tracks seen only in the part the
    attacker did not train on; in a made crowd those are time-shifted copies of people the attacker trained on."""
    if result["dataset"].get("made_from_copies"):
        return ("the made crowd repeats walkway's people in time-shifted copies, so its test people (in each of "
                "the two folds, tracks of the part the attacker did not train on) are the attacker's training "
                "people again: re-identification here is of people it trained on, not strangers")
    return ("in two folds (each part of the clip trains the attacker once, decision 0027) test people are tracks "
            "seen only in the other part, none of them a training track, each person weighing once; a track is not "
            "a person (one who comes back, or whose track breaks, is a new track), so some can be people the "
            "attacker trained on: docs/identity_ground_truth.md counts them on walkway against its ground truth")


def goal_cells(goal: dict) -> str:
    mark = {True: "holds", False: "FAILS", None: "no verdict"}
    return " | ".join(mark[goal["parts"][name]["holds"]] if name in goal["parts"] else "-"
                      for name in GOAL_COLUMNS)


GOAL_COLUMNS = ("identity", "leak_meter", "recall", "count", "attributes")


def identity_cell(identity: dict) -> str:
    if "chance" not in identity:
        return identity["verdict"]
    return (f"{interval_text(identity['released']['rank1'])} (raw {pct(identity['raw']['rank1']['mean'])}, "
            f"chance {pct(identity['chance']['rank1'])})")


def count_cell(count: dict) -> str:
    """The goal's counters (pipeline, independent: JPEG 90 in brackets); a counter beside the goal is left to the
    mechanism's lines below the table."""
    return ", ".join(f"{name} {pct(c['same_count'])} ({pct(c['floor_same_count'])})" for name, c in count.items()
                     if c.get("in_goal", True))


def goal_lines(result: dict) -> list:
    """The camera goal table, then each mechanism's parts and identity audit as `camera-audit` prints them."""
    from sensorveil.benchmarks.camera_goal import format_goal, format_people_there
    from sensorveil.benchmarks.direction_check import format_direction
    from sensorveil.sdk.reid_audit import format_identity

    lines = [
        "## The camera goal, part by part",
        "",
        "Each bundle audited as `sensorveil camera-audit BUNDLE --clip CLIP --seed "
        f"{result['draw_seed']}` audits it (docs/guides/camera.md, \"The camera goal, part by part\"): released "
        "over the whole clip as `sensorveil run` releases it, no scene still, its substitutes drawn from the "
        f"runtime's replayable seed {result['draw_seed']} (a device draws from the OS). Identity: a "
        "re-identification network trained with identity and triplet losses on raw crops of the training "
        "people ranks a raw gallery of each test person for every released crop; "
        f"{identity_people_text(result)}. The goal is met only when every part holds.",
        "",
        "| mechanism | identity | leak meter | recall | count | attributes | camera goal | released rank-1 "
        "[95%] (raw; chance) | leaking boxes | recall [95%] | count as raw: counter (JPEG 90) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in result["mechanisms"].items():
        clip, goal = m["clip"], m["goal"]
        leak, recall = clip["leak_meter"], clip["recall"]
        lines.append(
            f"| {name} | {goal_cells(goal)} | {goal['verdict']} | {identity_cell(m['identity'])} | "
            f"{leak['leaking_boxes']:,} of {leak['offline_boxes']:,} | {pct(recall['share'])} "
            f"[{pct(recall['interval'][0])}, {pct(recall['interval'][1])}] | {count_cell(clip['count'])} |")
    for name, m in result["mechanisms"].items():
        lines += ["", f"{name}:", "", "```", format_goal(m["goal"])]
        if "direction" in m["clip"]:       # beside the goal: the direction the device's draws walk
            lines += [format_direction(m["clip"]["direction"])]
        lines += [format_people_there(m["clip"])]      # beside the goal: the count a user reads
        if "chance" in m["identity"]:
            lines += [format_identity(m["identity"])]
        lines += ["```"]
    return lines + [""]


def attribute_lines(result: dict) -> list:
    """The attribute attackers (the second table): appearance against direction, label-shift weighted."""
    lines = [
        "## The attribute attackers",
        "",
        f"`sensorveil evaluate BUNDLE`'s attackers (sdk/audit.py) trained on the bundle's output, {result['seeds']} "
        "seeds, 95% intervals: **private** = appearance, "
        f"{result['dataset']['clusters']} k-means clusters of the tracks' look (light against dark clothing, "
        "roughly: not identity, which the table above measures); **useful** = walking direction. This part holds "
        "when the strongest attacker is within 5 points of Random* and the same attackers on raw crops are not "
        "(power).",
        "",
        f"Scoring: the clip's two parts hold the appearance classes in other shares ({shares_text(result)}), "
        "so on the plain test rows Random* (the best guess from the direction under the training part's "
        "prior) is no floor: an attacker that spreads its guesses beats it on a release that carries nothing "
        "but the direction. Every figure below is therefore scored on the test rows reweighted to the "
        "training part's P(appearance | direction) (label-shift weights, sdk/audit.label_shift_weights; "
        f"{effective_text(result)} effective rows), where Random* is the best any guess from the direction "
        "can do; the plain figures follow the table.",
        "",
        "| mechanism | strongest attacker (privatized) | same attacker on raw crops | Random* | within 5 pts "
        "| attributes part | direction probe (privatized) | direction probe (raw) | direction NAG |",
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
        within = a["privatized"]["goal"]["strongest_within_5_points_of_random_star"]
        lines.append(
            f"| {name} | {strongest}: {interval_text(a['privatized']['private'][strongest])} | {raw_text} | "
            f"{pct(a['privatized']['random_star'])} | {'yes' if within else 'no'} | {a['privatized']['verdict']} | "
            f"{direction_cells(a)} |")
    lines += drawn_on_direction_lines(result)
    lines += ["", "Every attacker family, privatized (raw in brackets), weighted; then the plain test rows:", ""]
    for name, m in result["mechanisms"].items():
        a = m["audit"]
        lines.append(f"- {name}: " + family_cells(a["privatized"], a["raw"]))
        if "unweighted" in a["privatized"]:
            plain, plain_raw = a["privatized"]["unweighted"], a["raw"]["unweighted"]
            lines.append(f"- {name}, plain test rows: " + family_cells(plain, plain_raw)
                         + f"; Random* {pct(plain['random_star'])}")
    return lines + floor_check_lines(result)


def drawn_on_direction(a: dict) -> bool:
    """Whether the audited release draws each substitute among the bank people of the row's labelled direction
    (the audit records it: audit.Release.useful_drawn_on_label)."""
    return bool(a["privatized"].get("useful_drawn_on_label"))


def direction_cells(a: dict) -> str:
    """The direction probe on the release and on raw crops, and NAG; a release drawn on the labelled direction
    hands the probe the label back, so its NAG is no gain a user has and is not given."""
    privatized, raw = interval_text(a["privatized"]["useful"]), interval_text(a["raw"]["useful"])
    if drawn_on_direction(a):
        return f"{privatized} (read back from the draw) | {raw} | - (drawn on the label)"
    return f"{privatized} | {raw} | {pct(a['direction_nag'])} (low end {pct(a['direction_nag_low'])})"


def drawn_on_direction_lines(result: dict) -> list:
    names = [name for name, m in result["mechanisms"].items() if drawn_on_direction(m["audit"])]
    if not names:
        return []
    return ["", f"**The direction probe of {', '.join(names)} measures no utility.** The audit draws each substitute "
                "among the bank's people of the crop's labelled direction, so a probe of the release reads that label "
                "back from the substitute (the rendered walkers of one direction all face it): the figure says the "
                "draw kept its condition, not that the release tells a user more than raw crops do. On a device the "
                "condition is the tracker's direction from past frames, which this audit does not measure; what "
                "the release gives a user is judged by the camera goal's count above."]


def floor_check_lines(result: dict) -> list:
    """The direction-only release: with nothing but the direction, attackers should sit at Random*."""
    lines = []
    for name, m in result["mechanisms"].items():
        ideal = m["audit"].get("direction_only")
        if not ideal:
            continue
        strongest = ideal["strongest_attacker"]
        cells = ", ".join(f"{family} {pct(fig['mean'])}" for family, fig in ideal["private"].items())
        lines += ["", f"The check of that floor: the same attackers on a direction-only release ({name}'s bank, each "
                      "substitute drawn uniformly among the bank people of the crop's own direction, no appearance "
                      f"beyond the direction), weighted: {cells}; strongest {strongest} "
                      f"{interval_text(ideal['private'][strongest])} against Random* {pct(ideal['random_star'])}."]
        if "unweighted" in ideal:
            plain = ideal["unweighted"]
            best = max(plain["private"], key=lambda family: plain["private"][family]["mean"])
            lines[-1] += (f" On the plain test rows the same release gives {best} "
                          f"{interval_text(plain['private'][best])} against Random* {pct(plain['random_star'])}: "
                          "the shift alone, no appearance.")
    return lines + [""]


def cost_lines(result: dict) -> list:
    lines = ["## Cost of the whole camera pipeline on the clip", "",
             "Decode + detect + privatize every crop + paste back, one process, onnxruntime, loaded and run as "
             "`sensorveil run` does (`load_for_stream`: threads that sleep between runs; no display, no sink), "
             "timed on its own pass over the clip, no audit running. CPU ms add every thread of the process; "
             "people per frame are the pipeline's boxes. `sensorveil benchmark` and docs/camera_speed.md time it "
             "against deface.", "",
             "| mechanism | frames | people per frame | FPS | CPU ms per frame | wall ms per frame |",
             "|---|---|---|---|---|---|"]
    for name, m in result["mechanisms"].items():
        c = m["cost"]
        lines.append(f"| {name} | {c['frames']} | {c['people_per_frame_mean']:.2f} | {c['fps']:.1f} | "
                     f"{c['cpu_ms_per_frame']:.1f} | {c['wall_ms_per_frame']:.1f} |")
    return lines + [""]


def render(result: dict) -> str:
    from sensorveil.runtime.camera.scene import SCENE_HORIZON

    lines = [
        f"# The camera mechanisms on {result['clip']}",
        "",
        page_header(recorded(result)),
        "",
        f"The run took {result['seconds']:.0f} s on that machine.",
        "",
        "People are found by the bundle's learned person detector (COCO SSDLite-MobileNetV2) united with a "
        "still-camera background model and followed by a tracker (`sensorveil/runtime/camera/`). Both "
        f"mechanisms trained on the first 60% of the clip ({result['dataset']['train_rows']} crops); the "
        f"attribute attackers are scored on the rest ({result['dataset']['test_rows']} crops; "
        f"{test_people_text(result)}).",
        "",
        *[f"- **{name}**: {how_it_pastes(m)}" for name, m in result["mechanisms"].items()],
        "",
        *goal_lines(result),
        *attribute_lines(result),
        *cost_lines(result),
        f"![raw and privatized frames of the test part]({Path(result['contact_sheet']).name})",
        "",
        "What the released scene holds (seen on the contact sheet): PASS pastes its substitutes on the quiet "
        "scene (sensorveil/runtime/camera/scene.py), which shows the camera only in blocks where no motion, "
        f"detection or track was seen for {SCENE_HORIZON} frames and is the neutral scene until then, a grey "
        "grain made from a seed (a device can start from an operator's scene still instead: `sensorveil "
        "scene-still`). PR-GAN releases the camera's "
        "frame outside each person's window, so a person its detectors miss goes out raw: the leak meter above "
        "counts them.",
        "",
    ]
    return "\n".join(lines)


def dataset_figures(clip: Path, made_crowd: bool) -> dict:
    """The people crops' split as the walkway loader makes it: rows, the appearance classes' shares, and how many
    test rows are of tracks the training part also holds."""
    from sensorveil.sdk.datasets import load_dataset

    data = load_dataset("walkway", str(clip))
    split = data.attributes["trial_split"]
    appearance, classes = data.attributes["appearance"], data.num_classes["appearance"]
    shares = {part: (np.bincount(appearance[split == k], minlength=classes) / max((split == k).sum(), 1)).tolist()
              for k, part in enumerate(("train", "test"))}
    return {"rows": len(data), "train_rows": int((split == 0).sum()), "test_rows": int((split == 1).sum()),
            # test crops whose track the training part also holds: the same person on both sides of the split
            "test_rows_of_training_tracks": int(np.isin(data.attributes["track"][split == 1],
                                                        data.attributes["track"][split == 0]).sum()),
            "made_from_copies": bool(made_crowd), "clusters": classes, "description": data.description,
            "appearance_shares": shares}


def sheet_frames(clip: Path) -> list:
    """Four frames of the clip's test part (after load_walkway's 60% cut)."""
    import cv2

    capture = cv2.VideoCapture(str(clip))
    cut = int(round(0.6 * capture.get(cv2.CAP_PROP_FRAME_COUNT)))
    capture.release()
    return [cut + 40, cut + 120, cut + 200, cut + 280]


def measure(args, clip: Path, docs: Path) -> dict:
    """Every mechanism trained (or reused), audited part by part, timed; the contact sheet written."""
    result = {"clip": clip.name, "seeds": args.seeds, "attacker_epochs": args.attacker_epochs,
              "draw_seed": args.draw_seed, "dataset": dataset_figures(clip, args.made_crowd), "mechanisms": {}}
    frames, sheets = sheet_frames(clip), {}
    for name in args.mechanisms:
        bundle = train_and_export(name, clip, Path(args.runs), Path(args.bundles), args.retrain, args.tag)
        log(f"{name}: the attribute attackers on {bundle} ...")
        audit = audit_bundle(bundle, args.seeds, args.attacker_epochs, args.draw_seed)
        log(f"{name}: identity, leak meter, recall and count (camera-audit) ...")
        entry = {"audit": audit, **camera_audits(bundle, clip, audit["privatized"], args.draw_seed)}
        log(f"{name}: the whole pipeline timed over {clip.name} ...")
        entry["cost"] = release_cost(bundle, clip, frames, args.draw_seed)
        sheets[name] = entry["cost"].pop("_sheet")
        result["mechanisms"][name] = entry
    sheet_name = "camera_contact_sheet" + ("" if args.tag == "walkway" else f"-{args.tag}")
    result["contact_sheet"] = str(contact_sheet(sheets, docs / f"{sheet_name}.png"))
    return result


def command_of(args) -> str:
    return ("python scripts/camera_results.py"
            + (f" --seeds {args.seeds}" if args.seeds != 3 else "")
            + (f" --attacker-epochs {args.attacker_epochs}" if args.attacker_epochs != 20 else "")
            + (f" --draw-seed {args.draw_seed}" if args.draw_seed != 0 else "")
            + ("" if args.tag == "walkway" else f" --clip {Path(args.clip).name} --tag {args.tag}")
            + (" --made-crowd" if args.made_crowd else ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default=str(CLIP))
    parser.add_argument("--runs", default=str(ROOT / "runs" / "camera"))
    parser.add_argument("--bundles", default=str(ROOT / "bundles" / "camera"))
    parser.add_argument("--docs", default=str(ROOT / "docs"))
    parser.add_argument("--seeds", type=int, default=3, help="the attribute attackers' seeds")
    parser.add_argument("--attacker-epochs", type=int, default=20, help="the attribute attackers' epochs")
    parser.add_argument("--draw-seed", type=int, default=0,
                        help="the runtime's replayable seed for every release the page audits (attribute attackers, "
                        "identity, clip audit, cost), and the identity attacker's")
    parser.add_argument("--mechanisms", nargs="+", default=list(MECHANISMS), choices=list(MECHANISMS))
    parser.add_argument("--retrain", action="store_true")
    parser.add_argument("--made-crowd", action="store_true",
                        help="the clip is scripts/crowd_clip.py's crowd: time-shifted copies of another clip's people, "
                        "so the same people are on both sides of the split (the page says so)")
    parser.add_argument("--tag", default="walkway",
                        help="names the runs, bundles and page: walkway writes docs/camera_results.md, another "
                        "tag docs/camera_results-TAG.md (e.g. --clip crowd-walkway.avi --tag crowd, from "
                        "scripts/crowd_clip.py)")
    parser.add_argument("--render-only", action="store_true",
                        help="re-draw docs/camera_results[-TAG].md from its .json (no run)")
    parser.add_argument("--allow-dirty", action="store_true", help="run from uncommitted code (the page says so)")
    args = parser.parse_args(argv)
    docs = Path(args.docs)
    page = "camera_results" + ("" if args.tag == "walkway" else f"-{args.tag}")
    if args.render_only:
        result = json.loads((docs / f"{page}.json").read_text())
        (docs / f"{page}.md").write_text(render(result))
        print((docs / f"{page}.md").read_text())
        return 0
    require_clean(args.allow_dirty)
    record = provenance([__file__] + list(sys.argv[1:] if argv is None else argv), args.allow_dirty)
    clip = Path(args.clip)
    if not clip.is_file():
        parser.error(f"clip not found: {clip} (set --clip or SENSORVEIL_SHARED)")
    started = time.time()
    result = measure(args, clip, docs)
    result.update(seconds=time.time() - started, command=command_of(args), provenance=record)
    # a clip outside the checkout and the shared files (a made crowd) is named by its folder's role, not its path
    result = portable(result, shared=SHARED, folders={str(clip.resolve().parent): "<clip folder>"})
    (docs / f"{page}.json").write_text(json.dumps(result, indent=2, default=float))
    (docs / f"{page}.md").write_text(render(result))
    print((docs / f"{page}.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
