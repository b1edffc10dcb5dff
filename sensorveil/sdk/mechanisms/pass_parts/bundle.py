"""PASS's files: the weights and bank of a run directory, read back as the model and its export head,
and the bank files and pipeline entries a bundle carries."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from sensorveil.runtime.camera.settings import CROP_EVERY
from sensorveil.runtime.stages.model import ModelEntry
from sensorveil.runtime.stages.substitution import LOGITS, SubstitutionEntry
from sensorveil.sdk.datasets import SensorDataset
from sensorveil.sdk.mechanisms.base import BundleParts
from sensorveil.sdk.mechanisms.pass_parts.data import bank_cut_outs
from sensorveil.sdk.mechanisms.pass_parts.model import SubstitutionHead, SubstitutionModel, make_embedding
from sensorveil.sdk.rundir import RunRecord

WEIGHTS_FILE = "embedding.pt"
BANK_FILE = "bank_indices.npy"           # bank position -> row of the recorded dataset
CONDITION_FILE = "bank_condition.npy"    # bank position -> its value of the condition attribute
SAMPLES_FILE = "substitutes.npy"         # bank position -> substitute sample, sensor units
SEQUENCE_FILE = "bank_next.npy"          # bank position -> the same person's next crop in the bank
COLOUR_FILE = "substitutes_colour.npy"   # bank position -> the same cut-out in colour (camera bundles)
SUBSTITUTION = "substitution"             # PASS's section of run.json: substitution_record's
HIDDEN = "hidden"                         # PASS's section of run.json: attributes kept out of the release
MODEL_OUTPUT_MEANING = ("cos(f(x), g(x'))/tau per substitute x', shape (batch, bank_size); "
                        "P(X'|X) is their softmax (eq. 2)")


def substitution_record(config, data, training: dict, **extra) -> dict:
    """run.json's "substitution", read back by load_model and write_bundle_files: PASS's settings and
    fitted weights, and the files of the bank (``data.bank_rows``, saved as BANK_FILE) and of the weights."""
    return {"tau": config.tau, "bank_size": data.bank_size, "bank_file": BANK_FILE, "weights_file": WEIGHTS_FILE,
            "lambda": training["lambda"], "mu": training["mu"], "constant_C": training["constant_C"],
            "embedding_dim": config.embedding_dim, "condition": config.condition, **extra}


def substitution_of(run: RunRecord) -> dict:
    """The run's substitution section (substitution_record), the one reader of it."""
    return run.sections[SUBSTITUTION]


def hidden_of(run: RunRecord):
    """The attributes a PASS run kept hidden (None where its run.json names none)."""
    return run.sections.get(HIDDEN)


def load_model(run_dir, run: RunRecord) -> SubstitutionModel:
    sub = substitution_of(run)
    model = SubstitutionModel(make_embedding(run.modality, run.model_shape, sub["embedding_dim"]),
                              sub["bank_size"], sub["embedding_dim"], sub["tau"])
    model.load_state_dict(torch.load(Path(run_dir) / sub["weights_file"], weights_only=True))
    return model.eval()


def load_head(run_dir, run: RunRecord) -> SubstitutionHead:
    """The module to export: f with the similarity-and-softmax head folded in."""
    return SubstitutionHead(load_model(run_dir, run)).eval()


def load_bank_rows(run_dir, run: RunRecord) -> np.ndarray:
    return np.load(Path(run_dir) / substitution_of(run)["bank_file"], allow_pickle=False)


def substitute_samples(dataset: SensorDataset, bank_rows: np.ndarray) -> np.ndarray:
    """The bank's samples as the device emits them. Camera crops with a foreground mask become cut-outs:
    the person's pixels (at least 1), 0 elsewhere, so the device pastes a person, not a rectangle of
    somebody else's background (runtime camera "cut-out" paste). Each cut-out keeps only its largest
    blob with small gaps closed (runtime camera.clean_cut_out): pasted with the pieces of neighbours and
    the holes a detector's mask has, a substitute split or failed a downstream counter's shape rules. A bank
    holding a cut-out that is not one person (runtime camera.person_shaped: pass_parts.data.bank_pool leaves
    them out) is refused rather than shipped."""
    samples = dataset.x[bank_rows]
    if dataset.foreground is None:
        return np.ascontiguousarray(samples)
    from sensorveil.runtime.camera import person_shaped
    shaped = bank_cut_outs(dataset, bank_rows)
    odd = [int(row) for row, c in zip(bank_rows, shaped) if not person_shaped(c)]
    if odd:
        raise ValueError(f"{len(odd)} of the bank's {len(bank_rows)} cut-outs are not person-shaped (dataset rows "
                         f"{odd[:5]}{' ...' if len(odd) > 5 else ''}); a substitute that is not one person is never "
                         "pasted: retrain, so the bank is drawn from person-shaped rows only")
    return shaped


def colour_cut_outs(colour: np.ndarray, cut_outs: np.ndarray) -> np.ndarray:
    """Colour crops cut out exactly as the grey cut-outs are: the person's pixels (no channel all 0), 0
    elsewhere."""
    person = (cut_outs > 0)[..., None]
    return np.where(person, np.maximum(colour, 1), 0).astype(np.uint8)


def write_bundle_files(run_dir, run: RunRecord, dataset: SensorDataset, out_dir: Path,
                       include_samples: bool) -> BundleParts:
    """The bank files the runtime needs, the manifest's mechanism entry, and the pipeline: f with its
    similarity head (P(X'|X)), then the draw (sensorveil.runtime.stages.substitution)."""
    bank_rows = load_bank_rows(run_dir, run)
    np.save(out_dir / BANK_FILE, bank_rows, allow_pickle=False)
    samples = substitute_samples(dataset, bank_rows) if include_samples else None
    if include_samples:     # the substitute samples in sensor units, for output="sample"
        np.save(out_dir / SAMPLES_FILE, samples, allow_pickle=False)
    colour = include_samples and dataset.foreground is not None and dataset.colour is not None
    if colour:              # the same cut-outs in colour, for the camera release (output="colour")
        np.save(out_dir / COLOUR_FILE, colour_cut_outs(dataset.colour[bank_rows], samples), allow_pickle=False)
    sub = substitution_of(run)
    entry = {"name": run.mechanism, "kind": "substitution", "useful": run.useful, "private": run.private,
             "hidden": run.sections.get(HIDDEN, []),
             "parameters": {"tau": sub["tau"], "lambda": sub["lambda"], "mu": sub["mu"],
                            "constant_C": sub["constant_C"], "embedding_dim": sub["embedding_dim"]}}
    if sub.get("bank_origin"):   # a federated run's bank: which declared, non-private set it was drawn from
        entry["bank_origin"] = dict(sub["bank_origin"])
    cut_out = bool(include_samples and dataset.foreground is not None)   # camera crops: people cut out, 0 = not
    bank_source = (dataset.camera or {}).get("bank")      # who the released substitutes are (sdk.datasets.walkway)
    condition = sequence = None
    if sub.get("condition"):   # the device restricts the draw to substitutes that share what it knows
        np.save(out_dir / CONDITION_FILE, dataset.attributes[sub["condition"]][bank_rows].astype(np.int64),
                allow_pickle=False)
        condition = (sub["condition"], CONDITION_FILE)
    if cut_out and "track" in dataset.attributes:    # camera people: let held substitutes walk
        grouping = [dataset.attributes["track"][bank_rows]]
        if sub.get("condition"):
            grouping.append(dataset.attributes[sub["condition"]][bank_rows])
        np.save(out_dir / SEQUENCE_FILE, bank_sequences(bank_rows, *grouping), allow_pickle=False)
        sequence = (SEQUENCE_FILE, (dataset.camera or {}).get("crop_every", CROP_EVERY))
    draw = SubstitutionEntry(len(bank_rows), BANK_FILE, SAMPLES_FILE if include_samples else None,
                             COLOUR_FILE if colour else None, LOGITS, MODEL_OUTPUT_MEANING, cut_out,
                             bank_source=dict(bank_source) if cut_out and bank_source else None,
                             condition=condition, sequence=sequence)
    return BundleParts(entry, [ModelEntry("model").to_manifest(), draw.to_manifest()])


def bank_sequences(bank_rows: np.ndarray, *groups: np.ndarray) -> np.ndarray:
    """Bank position -> the position of the same person's next crop: the next bank entry, in dataset
    order (a clip's crops are stored in frame order), that shares every one of ``groups`` (the track,
    and the condition value, so a walker keeps walking the way it was drawn for); a sequence's last
    entry leads back to its first."""
    following = np.arange(len(bank_rows))
    keys = np.stack(groups, axis=1) if groups else np.zeros((len(bank_rows), 1), np.int64)
    for key in np.unique(keys, axis=0):
        members = np.flatnonzero((keys == key).all(axis=1))
        members = members[np.argsort(bank_rows[members], kind="stable")]
        following[members] = np.roll(members, -1)
    return following
