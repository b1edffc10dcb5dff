"""Raw facing and identity accuracy on synthetic depth, measured as PR-GAN's protocol measures them.

    OMP_NUM_THREADS=1 nice -n 19 python scripts/depth_raw_accuracy.py [--samples-per-class 160] [--epochs 20]
                                                                      [--lr-schedule cosine] [--curve] [--trees]
                                                                      [--attributes facing identity]
                                                                      [--json FILE] [--markdown FILE]

docs/depth_raw_accuracy.{json,md} come from
    python scripts/depth_raw_accuracy.py --curve --trees --json docs/depth_raw_accuracy.json \\
        --markdown docs/depth_raw_accuracy.md

The same steps as ``prgan.prepare`` and ``raw_reference`` (the "Original Acc" of the fixed D_y / D_z):
the ``synthetic-depth`` dataset, PR-GAN section 5.3's slices (``make_slices``, seed 0), the mechanisms'
depth classifier (``make_classifier("depth", ...)``) trained by ``train_classifier`` on slice 1 with
PR-GAN's ``classifier_epochs`` and learning-rate schedule for this dataset (``default_config``), scored
on slice 3 (held-out frames, rendered afresh). Besides the accuracy it prints the identities most often
confused with each other and their body measures, and
(``--curve``) the held-out accuracy after each epoch, to tell under-training from capacity, and
(``--trees``) what extra-trees read from each frame's depth histogram: a floor under what the frames allow.
About 12 minutes per attribute on a shared 2-core CPU (20 epochs on 2,134 frames of 180x180).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from sensorveil.sdk.datasets import load_dataset, make_identities
from sensorveil.sdk.evaluation import make_slices
from sensorveil.sdk.mechanisms.prgan import default_config
from sensorveil.sdk.networks import make_classifier
from sensorveil.sdk.training import LR_SCHEDULES, model_shape, predict, set_seed, to_model, train_classifier
from sensorveil_lab.provenance import page_header, portable, provenance, recorded, require_clean

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", Path(__file__).resolve().parents[2] / "shared"))
DEPTH_DEFAULTS = default_config("synthetic-depth", utility_threshold=0.95)  # what a PR-GAN run on depth uses


def histogram_trees(frames: np.ndarray, labels: np.ndarray, train, test, seed: int) -> float:
    """Extra-trees on what a depth histogram says (low percentiles of the valid depths, the share of
    valid pixels nearer than every 50 mm from 0.8 to 2.8 m, the share of invalid pixels): how well the
    frames tell the people apart, whatever a network makes of them."""
    from sklearn.ensemble import ExtraTreesClassifier

    def features(frame):
        valid = frame[frame > 0]
        return np.r_[
            np.percentile(valid, [0.5, 1, 2, 5, 10, 20, 30]),
            [np.mean(valid < t) for t in range(800, 2800, 50)],
            np.mean(frame == 0),
        ]

    table = np.array([features(frame) for frame in frames])
    forest = ExtraTreesClassifier(300, random_state=seed, n_jobs=1).fit(table[train], labels[train])
    return float((forest.predict(table[test]) == labels[test]).mean())


def confusions(truth: np.ndarray, guess: np.ndarray, classes: int, top: int = 6) -> list:
    """The most frequent (true, predicted, count) pairs off the diagonal."""
    matrix = np.zeros((classes, classes), dtype=int)
    np.add.at(matrix, (truth, guess), 1)
    np.fill_diagonal(matrix, 0)
    order = np.argsort(matrix, axis=None)[::-1][:top]
    return [(int(i), int(j), int(matrix[i, j])) for i, j in zip(*np.unravel_index(order, matrix.shape)) if matrix[i, j]]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples-per-class", type=int, default=160, help="frames per (identity, facing)")
    parser.add_argument("--identities", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="dataset and protocol seed")
    parser.add_argument("--epochs", type=int, default=DEPTH_DEFAULTS.classifier_epochs)
    parser.add_argument("--attributes", nargs="+", default=["facing", "identity"])
    parser.add_argument(
        "--lr-schedule",
        choices=LR_SCHEDULES,
        default=DEPTH_DEFAULTS.classifier_lr_schedule,
        help="train_classifier's learning-rate schedule (default: PR-GAN's on synthetic depth)",
    )
    parser.add_argument("--curve", action="store_true", help="held-out accuracy after every epoch")
    parser.add_argument(
        "--trees",
        action="store_true",
        help="also trees on each frame's depth histogram: a floor under what the frames allow",
    )
    parser.add_argument("--json", type=Path, help="write every figure here (docs/depth_raw_accuracy.json)")
    parser.add_argument("--markdown", type=Path, help="and the page read from it (docs/depth_raw_accuracy.md)")
    parser.add_argument("--allow-dirty", action="store_true", help="write --json/--markdown from uncommitted code")
    args = parser.parse_args(argv)
    if args.json or args.markdown:   # a run that writes no file is an experiment: any tree will do
        require_clean(args.allow_dirty)
    record = provenance([__file__] + list(sys.argv[1:] if argv is None else argv), args.allow_dirty)
    torch.set_num_threads(1)

    started = time.time()
    data = load_dataset(
        "synthetic-depth", n_identities=args.identities, samples_per_class=args.samples_per_class, seed=args.seed
    )
    x = to_model(data)
    y, z = data.attributes["facing"], data.attributes["identity"]
    slices = make_slices(y, z, data.num_classes["identity"], args.seed)  # = dataset_slices for this dataset
    train, test = slices["classifiers"], slices["test"]
    print(
        f"{len(x)} frames rendered in {time.time() - started:.0f} s; slice 1 trains ({len(train)}), "
        f"slice 3 tests ({len(test)})",
        flush=True,
    )
    result = {
        "command": " ".join(["python", "scripts/depth_raw_accuracy.py"] + list(argv or sys.argv[1:])),
        "frames": len(x),
        "train": len(train),
        "test": len(test),
        "epochs": args.epochs,
        "lr_schedule": args.lr_schedule,
    }
    for name in args.attributes:
        labels, classes = data.attributes[name], data.num_classes[name]
        set_seed(args.seed)  # as prepare() does before D_y, then D_z
        net = make_classifier(data.modality, model_shape(data), classes)
        t0, curve = time.time(), []

        def held_out(model, epoch):
            curve.append(float((predict(model, x[test]) == labels[test]).mean()))
            print(f"  {name} epoch {epoch}: held-out {curve[-1]:.3f}", flush=True)

        train_classifier(
            net,
            x[train],
            labels[train],
            epochs=args.epochs,
            progress=False,
            seed=args.seed,
            lr_schedule=args.lr_schedule,
            on_epoch=held_out if args.curve else None,
        )
        guess = predict(net, x[test])
        train_acc = float((predict(net, x[train]) == labels[train]).mean())
        acc = float((guess == labels[test]).mean())
        print(
            f"raw {name}: {acc:.1%} held-out (slice 1 itself {train_acc:.1%}), trained in {time.time() - t0:.0f} s",
            flush=True,
        )
        result[name] = {"held_out": acc, "train": train_acc, "curve": curve, "seconds": round(time.time() - t0)}
        if name == "identity":
            people = make_identities(args.identities, args.seed)
            pairs = confusions(labels[test], guess, classes)
            result[name]["confusions"] = pairs
            for i, j, count in pairs:
                a, b = people[i], people[j]
                print(
                    f"  person {i} read as {j}: {count}x; height {a.height:.3f}/{b.height:.3f}, shoulders "
                    f"{a.shoulder_width:.3f}/{b.shoulder_width:.3f}, head {a.head_width:.3f}x{a.head_length:.3f}/"
                    f"{b.head_width:.3f}x{b.head_length:.3f}"
                )
    if args.trees:
        t0 = time.time()
        acc = histogram_trees(data.x, z, train, test, args.seed)
        print(f"trees on the depth histogram, identity: {acc:.1%} held-out ({time.time() - t0:.0f} s)")
        result["trees_identity"] = acc
    result["seconds"] = round(time.time() - started)
    result["provenance"] = record
    result = portable(result, shared=SHARED)
    print(f"total {result['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.markdown:
        args.markdown.write_text(page(result))
    return result


def page(result: dict) -> str:
    """The page for docs/: each attribute's held-out and training accuracy, its learning curve, and the
    identities confused most, all read from ``result``."""
    lines = [
        "# Raw depth classifiers: what PR-GAN's fixed D_y / D_z read from synthetic depth",
        "",
        page_header(recorded(result)),
        "",
        f"The run took {result['seconds']} s. {result['frames']} frames rendered; slice 1 ({result['train']} frames) "
        "trains, slice 3 "
        f"({result['test']} held-out frames) scores; {result['epochs']} epochs, learning rate "
        f"{result['lr_schedule']}. Goal: at least 95% held-out on facing and identity.",
        "",
        "| attribute | held-out | its own training frames | goal met | seconds |",
        "|---|---:|---:|---|---:|",
    ]
    attributes = [name for name in ("facing", "identity") if name in result]
    for name in attributes:
        entry = result[name]
        lines.append(
            f"| {name} | {entry['held_out']:.1%} | {entry['train']:.1%} | "
            f"{'yes' if entry['held_out'] >= 0.95 else 'NO'} | {entry['seconds']} |"
        )
    if "trees_identity" in result:
        lines += [
            "",
            f"Extra-trees on each frame's depth histogram, identity: {result['trees_identity']:.1%} "
            "held-out (what the frames allow, whatever a network makes of them).",
        ]
    for name in attributes:
        if result[name]["curve"]:
            curve = ", ".join(f"{acc:.1%}" for acc in result[name]["curve"])
            lines += ["", f"Held-out {name} after each epoch: {curve}."]
    pairs = result.get("identity", {}).get("confusions")
    if pairs:
        lines += [
            "",
            "Identities confused most (true -> read as: frames): "
            + "; ".join(f"{i} -> {j}: {count}" for i, j, count in pairs)
            + ".",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
