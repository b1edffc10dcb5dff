"""`sensorveil quickstart`: the whole product once, on scikit-learn's bundled digits.

Train PASS and PR-GAN on the same task (useful = parity, private = lt5, PR-GAN's MNIST toy), export
both ONNX bundles, audit each bundle exactly as the device runs it (attackers of four families
trained on its output, over seeds, with 95% intervals), benchmark both, and print one short table:
the first thing a user sees is which mechanism protects and which one leaks.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np

# name -> (training settings, what its figure is called in the table). PASS gets fewer epochs than
# its paper default so the quickstart stays within a few minutes on a 2-core CPU.
MECHANISMS = {"pass": {"epochs": 40, "settings": {"substitutes": 512}},
              "prgan": {"epochs": None, "settings": {}}}
TASK = {"useful": "parity", "private": "lt5"}
AUDIT_SEEDS = 3


def progress_line(line: str) -> None:
    """A step's progress under its [k/n] heading, flushed so a long step is seen to move."""
    print(f"      {line}", flush=True)


def save_examples_png(raw: np.ndarray, privatized: dict, path: Path, n: int = 10) -> Path:
    """One row of raw digits, then one row per mechanism of what its bundle emits for them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [("raw", raw)] + list(privatized.items())
    fig, axes = plt.subplots(len(rows), n, figsize=(n * 0.9, 1.1 * len(rows) + 0.4))
    for r, (label, images) in enumerate(rows):
        for i in range(n):
            axes[r, i].imshow(images[i], cmap="gray", vmin=0, vmax=16)
            axes[r, i].set_xticks([]), axes[r, i].set_yticks([])
        axes[r, 0].set_ylabel(label, fontsize=8)
    for i in range(n):
        axes[0, i].set_title(str(i), fontsize=7)
    fig.suptitle("digits through each deployed bundle (top: raw; below: what leaves the sensor)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def quickstart(out: Path, epochs: int | None = None) -> dict:
    from sensorveil.export import export_run
    from sensorveil.runtime import Privatizer
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.audit import write_report as write_audit
    from sensorveil.sdk.datasets import load_dataset
    from sensorveil.sdk.runs import train_run

    out = Path(out)
    started = time.time()
    results, bundles = {}, {}
    for step, (name, plan) in enumerate(MECHANISMS.items(), start=1):
        print(f"[{step}/4] training {name} on digits (useful: parity, private: lt5)")
        run_dir = train_run(name, "digits", out=out / "runs" / f"{name}-digits", epochs=epochs or plan["epochs"],
                            settings=plan["settings"], attacker_epochs=5, **TASK)
        bundles[name] = export_run(run_dir, "onnx", out / "bundles" / f"{name}-digits")
    print(f"[3/4] auditing each bundle through the torch-free runtime ({AUDIT_SEEDS} seeds per attacker)")
    for name, bundle in bundles.items():
        audit = audit_path(bundle, seeds=AUDIT_SEEDS, log=progress_line)
        report = write_audit(audit, f"audit of the {name} digits bundle", out / "reports" / f"audit-{name}.md")
        results[name] = {"audit": audit, "report": str(report), "bundle": str(bundle)}
    print("[4/4] benchmarking each bundle (batch 1)")
    for name, bundle in bundles.items():
        results[name]["fps"] = benchmark(bundle, out / "reports" / f"benchmark-{name}")
    digits = load_dataset("digits")
    raw = digits.x[first_of_each_digit(digits.attributes["digit"])]
    examples = save_examples_png(raw, {name: Privatizer.load(bundle)(raw) for name, bundle in bundles.items()},
                                 out / "digits_raw_vs_privatized.png")
    summary = {"seconds": round(time.time() - started, 1), "examples": str(examples),
               "mechanisms": {name: summarize(result) for name, result in results.items()}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print_summary(summary, out)
    return summary


def first_of_each_digit(digit: np.ndarray) -> np.ndarray:
    order = np.argsort(digit, kind="stable")
    return order[np.searchsorted(digit[order], np.arange(10))]


def benchmark(bundle: Path, stem: Path) -> float:
    """Batch-1 calls per second through the full runtime (1000 / the mean call: the report's and JSON's 'fps');
    the long table goes to STEM.md (and .json, .png)."""
    from sensorveil.benchmarks.bench import benchmark_bundle
    from sensorveil.benchmarks.report import write_report
    stem.parent.mkdir(parents=True, exist_ok=True)
    result = benchmark_bundle(bundle, iters=300)
    write_report(result, json_path=f"{stem}.json", markdown_path=f"{stem}.md", plot_path=f"{stem}.png")
    return float(result["rows"][0]["fps"])


def summarize(result: dict) -> dict:
    audit = result["audit"]
    strongest = audit["strongest_attacker"]
    return {"strongest_attacker": strongest, "attacker_accuracy": audit["private"][strongest],
            "random_star": audit["random_star"], "utility": audit["useful"],
            "goal_met": audit["goal"]["strongest_within_5_points_of_random_star"], "fps": result["fps"],
            "verdict": audit["verdict"], "raw_accuracy": audit["power"]["raw_strongest_accuracy"],
            "bundle": result["bundle"], "audit_report": result["report"]}


VERDICT_TEXT = {"protects": "protects: its best attacker is within 5 points of Random*",
                "leaks": "LEAKS: attackers trained on its output recover the private attribute",
                "no power on this data": "no power on this data: on RAW data too the attackers stay within 5 "
                                         "points of Random*"}


def figure(f: dict) -> str:
    """An audit figure as 'mean [low, high]' in percent."""
    return f"{f['mean']:5.1%} [{f['low']:5.1%}, {f['high']:5.1%}]"


def print_summary(summary: dict, out: Path) -> None:
    """One table a person can read at 100 columns; details are in the reports it names."""
    print("\n== sensorveil quickstart: digits, hide lt5 (digit < 5), keep parity ==")
    print(
        f"{'mechanism':9s}  {'best attacker on lt5 [95%]':27s}  {'Random*':7s}  {'parity kept [95%]':25s}  {'FPS':>6s}"
    )
    for name, row in summary["mechanisms"].items():
        print(
            f"{name:9s}  {figure(row['attacker_accuracy']):27s}  {row['random_star']:7.1%}  "
            f"{figure(row['utility']):25s}  {row['fps']:6.0f}"
        )
    print()
    for name, row in summary["mechanisms"].items():
        print(f"  {name}: {VERDICT_TEXT[row['verdict']]}")
        print(f"    best attacker: {row['strongest_attacker']}; "
              f"the same attackers on raw data: {row['raw_accuracy']:.1%}")
    print(f"\n  bundles   {', '.join(row['bundle'] for row in summary['mechanisms'].values())}")
    print(f"  audits    {', '.join(row['audit_report'] for row in summary['mechanisms'].values())}")
    print(f"  examples  {summary['examples']}")
    print(
        f"  details   {out / 'reports'} (benchmark tables), {out / 'summary.json'}; {summary['seconds']:.0f} s in all"
    )


# The camera path in one call: PASS on people crops of a still camera clip, its walking
# direction kept (the tracker measures it on the device; the draw stays among bank people walking the
# same way), exported, audited as the device runs it, and previewed raw beside privatized.
CAMERA_SETTINGS = {"condition": "direction"}


def bank_options(person_detector: str, bank: str) -> dict:
    """The walkway loader's bank options. With the learned detector, a rendered bank keeps the walkers the
    bundle's own detector finds on this camera's scene (its ``bank_screen``); converted here, before training: a
    missing converter should cost seconds, not minutes."""
    if person_detector != "ssdlite":
        return {"bank": bank}
    from sensorveil.export.person_detector import detector_onnx
    graph = detector_onnx()
    return {"bank": bank, **({"bank_screen": str(graph)} if bank == "rendered" else {})}


def camera_quickstart(out: Path, clip: Path, seeds: int = AUDIT_SEEDS, person_detector: str = "ssdlite",
                      camera_speed: str = "recall", bank: str = "rendered", full_size: bool = False) -> dict:
    """Train PASS on ``clip`` (e.g. ../shared/media/walkway.avi), export its ONNX bundle, audit it
    (scripts/camera_results.py adds PR-GAN beside it, weighted attribute attackers and the pipeline's cost), and
    write the headless preview: OUT/camera-preview.mp4 and its contact sheet. ``person_detector``: "ssdlite" puts the
    learned detector in the bundle (sensorveil.export.person_detector), "motion" the motion detector alone;
    ``camera_speed``: export's --camera-speed ("recall" or "fast"); ``bank``: who the substitutes are (the
    walkway loader's ``bank``: "rendered" walkers by default, "clip" for this camera's own bystanders);
    ``full_size``: work at the clip's own size instead of WORKING_WIDTH (``working_clip``)."""
    from sensorveil.benchmarks.clip_audit import audit_clip
    from sensorveil.export import export_run
    from sensorveil.export.heartbeat import Heartbeat
    from sensorveil.runtime.camera.learned import DETECTOR_GRAPH
    from sensorveil.runtime.preview import preview
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import load_for_stream
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.audit import write_report as write_audit
    from sensorveil.sdk.reid_audit import audit_bundle as audit_identity
    from sensorveil.sdk.runs import train_run

    out, clip = Path(out), Path(clip)
    if not clip.is_file():
        raise FileNotFoundError(
            f"camera clip not found: {clip}; expected a still camera filming people walking, "
            "e.g. ../shared/media/walkway.avi"
        )
    options = bank_options(person_detector, bank)
    started = time.time()
    clip = working_clip(clip, out / "clips", full_size)
    # named for the clip, so runs on two cameras in one OUT neither overwrite nor mislabel each other
    # ("walkway" below is the camera-crops loader's name, whatever the clip)
    name = f"pass-{clip_slug(clip)}"
    # a line at least every 20 s: training and the audits have quiet stretches of minutes on a large frame
    with Heartbeat("camera quickstart"):
        print(f"[1/5] training pass on people crops of {clip.name} (private: appearance, useful: walking direction)")
        run_dir = train_run("pass", "walkway", data_path=str(clip), out=out / "runs" / name,
                            settings=dict(CAMERA_SETTINGS), dataset_options=options)
        bundle = export_run(run_dir, "onnx", out / "bundles" / name, person_detector=person_detector,
                            camera_speed=camera_speed)
        print(f"[2/5] auditing the bundle through the torch-free runtime ({seeds} seeds per attacker)")
        audit = audit_path(bundle, seeds=seeds, log=progress_line)
        report = write_audit(audit, f"audit of the {name} bundle", out / "reports" / f"audit-{name}.md")
        print("[3/5] re-identifying the release's people: a re-id network trained on raw crops of other people")
        identity = audit_identity(bundle, log=progress_line)
        print(f"[4/5] previewing raw beside privatized over {clip.name}")
        with open_source(str(clip)) as source:
            shown = preview(load_for_stream(bundle), source, out=out / "camera-preview.mp4", headless=True)
        print(f"[5/5] leak meter, recall and people count of the release over {clip.name}")
        clip_audit = audit_clip(bundle, clip, log=progress_line, seed=0)   # replayable, as the identity audit
    summary = camera_summary(time.time() - started, bundle, report, audit, identity, shown, clip_audit)
    loaded = load_for_stream(bundle)
    summary["substitutes"] = loaded.describe().get("substitutes")
    summary["scene_still"] = scene_still_hint(summary, clip, DETECTOR_GRAPH in loaded.pipeline.graphs)
    (out / "camera-summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print_camera_summary(summary)
    return summary


def scene_still_hint(summary: dict, clip: Path, has_detector: bool) -> "str | None":
    """Where the count fails and the bundle carries the learned detector, the next step: a picture of the empty
    place (decisions 0015, 0029: on the neutral scene a learned counter finds fewer of the pasted people), which the
    operator looks at before releasing it; it stays the operator's choice, so the quickstart does not make one."""
    count = summary["goal"]["parts"].get("count")
    if not has_detector or count is None or count["holds"] is not False:
        return None
    bundle = summary["bundle"]
    return (f"the count fails; on the neutral scene a learned counter finds fewer of the pasted people. A picture of "
            f"the empty place: `sensorveil scene-still {bundle} --clip {clip} --out still.png`; look at it (it is "
            f"released), then `sensorveil camera-audit {bundle} --clip {clip} --scene-still still.png`")


def camera_summary(seconds: float, bundle, report, audit: dict, identity: dict, shown: dict,
                   clip_audit: "dict | None") -> dict:
    """The camera quickstart's summary (camera-summary.json): the attribute audit's row, the identity audit, the
    clip audit (leak meter, recall, count) and the camera goal part by part, met only when every part holds."""
    from sensorveil.benchmarks.camera_goal import camera_goal
    row = summarize({"audit": audit, "report": str(report), "bundle": str(bundle), "fps": shown.get("fps", 0.0)})
    goal = camera_goal(clip_audit, identity, audit)
    return {
        "seconds": round(seconds, 1),
        "bundle": str(bundle),
        "audit_report": str(report),
        "mechanisms": {"pass": row},
        "video": str(shown["video"]),
        "contact_sheet": str(shown["contact_sheet"]),
        "identity": identity,
        "clip_audit": clip_audit,
        "goal": goal,
        "verdict": goal["verdict"],
    }


WORKING_WIDTH = 640   # wider clips are scaled down: training, audits and preview cost about their pixel count


def working_clip(clip: Path, folder: Path, full_size: bool = False) -> Path:
    """``clip`` itself when it is at most WORKING_WIDTH wide or ``full_size`` is asked for; else a copy scaled
    to WORKING_WIDTH in ``folder`` (Motion-JPEG at quality 100), with a line saying what full size would cost."""
    import cv2
    capture = cv2.VideoCapture(str(clip))
    width, height = (int(capture.get(p)) for p in (cv2.CAP_PROP_FRAME_WIDTH, cv2.CAP_PROP_FRAME_HEIGHT))
    cost = (width / WORKING_WIDTH) ** 2
    if width <= WORKING_WIDTH or full_size:
        capture.release()
        if width > WORKING_WIDTH:
            print(f"working at the clip's full size, {width}x{height}: about {cost:.1f}x the time at "
                  f"{WORKING_WIDTH} wide")
        return clip
    size = (WORKING_WIDTH, 2 * round(height * WORKING_WIDTH / width / 2))
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{clip.stem}-{WORKING_WIDTH}w.avi"
    writer = cv2.VideoWriter(str(target), cv2.VideoWriter_fourcc(*"MJPG"), capture.get(cv2.CAP_PROP_FPS) or 25.0,
                             size)
    writer.set(cv2.VIDEOWRITER_PROP_QUALITY, 100)
    ok, frame = capture.read()
    while ok:
        writer.write(cv2.resize(frame, size, interpolation=cv2.INTER_AREA))
        ok, frame = capture.read()
    capture.release()
    writer.release()
    print(f"working at {size[0]}x{size[1]} ({target}): the clip is {width}x{height}, which costs about "
          f"{cost:.1f}x the time (--full-size); deploy the bundle on frames of the working size")
    return target


def clip_slug(clip: Path) -> str:
    """The clip's file stem as a bundle name: letters, digits and dashes only (walkway.avi -> walkway)."""
    slug = re.sub(r"[^a-z0-9]+", "-", clip.stem.lower()).strip("-")
    return slug or "camera"


def print_camera_summary(summary: dict) -> None:
    from sensorveil.benchmarks.camera_goal import format_goal, format_people_there
    from sensorveil.benchmarks.direction_check import format_direction
    from sensorveil.sdk.reid_audit import format_identity
    row = summary["mechanisms"]["pass"]
    print("\n== sensorveil quickstart --camera: people made substitutes, walking direction kept ==")
    print(
        f"  best attacker on appearance  {figure(row['attacker_accuracy'])} ({row['strongest_attacker']}); "
        f"Random* {row['random_star']:.1%}, on raw crops {row['raw_accuracy']:.1%}: {row['verdict']}"
    )
    # the attribute audit's probe reads back the label each row was drawn on; the clip audit says what a device
    # delivers, drawn on the tracker's direction from past frames
    print(f"  direction kept               {figure(row['utility'])} (read back: each row drawn on its label)")
    print(f"  whole pipeline               {row['fps']:.1f} FPS (decode, detect, privatize, paste back)")
    print(format_identity(summary["identity"]))
    print(format_goal(summary["goal"]))
    if "direction" in (summary.get("clip_audit") or {}):
        print(format_direction(summary["clip_audit"]["direction"]))
        print(format_people_there(summary["clip_audit"]))
    print(f"  {summary['substitutes']}")
    if summary.get("scene_still"):
        print(f"  next      {summary['scene_still']}")
    print(f"  preview   {summary['video']} (raw | privatized), {summary['contact_sheet']}")
    print(f"  bundle    {summary['bundle']}; audit {summary['audit_report']}; {summary['seconds']:.0f} s in all")
