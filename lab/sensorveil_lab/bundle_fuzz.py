"""The bundle fuzzer's cases: the hostile values and mutations of a bundle's manifest fields, stage arrays and
input, and the judge of what the runtime does with a mutated bundle (refused with its own error, or released
finite, in range and privatized; anything else a finding). scripts/fuzz_bundles.py runs them over seed bundles,
scripts/fuzz_camera.py mutates a camera bundle's fields with them, tests/lab/test_fuzz_property.py lets
hypothesis pick them."""
import copy
import hashlib
import io
import json
import math
import shutil
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]   # the checkout (lab/sensorveil_lab/ sits two folders down)


FIXTURES = REPO / "tests" / "fixtures"


SEED_BUNDLES = ("schema1-prgan-digits-onnx", "schema1-pass-digits-onnx")


# values a hostile or careless editor puts in a manifest field
HOSTILE_VALUES = (0, -1, 1, 1e-300, 1e-45, 1e39, 1e308, -1e308, math.nan, math.inf, True, None, "", "logit",
                  "0", [], {}, [0], 2 ** 63, 0.5)


ARRAY_MUTATIONS = ("zeros", "nan", "inf", "huge", "negative", "bool", "int64", "truncate", "transpose", "scalar")


# -- mutations ---------------------------------------------------------------------------------------
def leaf_paths(node, prefix=()):
    """Every key path of a JSON tree, containers included."""
    yield prefix
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from leaf_paths(value, prefix + (key,))


def set_path(tree, path, value):
    node = tree
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value


DELETE = object()


def mutate_manifest(manifest, rng):
    """A copy with one field replaced by a hostile value or deleted; (copy, description)."""
    paths = [path for path in leaf_paths(manifest) if path and path[0] not in ("files",)]
    path = paths[rng.integers(len(paths))]
    value = DELETE if rng.random() < 0.15 else HOSTILE_VALUES[rng.integers(len(HOSTILE_VALUES))]
    changed = copy.deepcopy(manifest)
    set_path(changed, path, value)
    return changed, "manifest {} = {}".format(".".join(map(str, path)), "<deleted>" if value is DELETE else repr(value))


def mutate_array(array, how):
    if how == "zeros":
        return np.zeros_like(array)
    if how == "nan":
        return np.full(array.shape, np.nan) if array.dtype.kind != "f" else np.full_like(array, np.nan)
    if how == "inf":
        return np.full(array.shape, np.inf)
    if how == "huge":
        return (array.astype(np.float64) * 1e6 + 1e30).astype(array.dtype if array.dtype.kind == "f" else np.float64)
    if how == "negative":
        return -np.abs(array.astype(np.float64)) - 1
    if how == "bool":
        return array != 0
    if how == "int64":
        return array.astype(np.int64)
    if how == "truncate":
        return array[: max(len(array) // 2, 1)] if array.ndim else array
    if how == "transpose":
        return array.T.copy() if array.ndim > 1 else array[::-1].copy()
    return np.asarray(array.ravel()[:1].sum())


def write_array(bundle, name, array):
    """Replace a listed .npy and re-list its sha256: an unsigned bundle edited by someone who can write it."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    data = buffer.getvalue()
    (bundle / name).write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (bundle / "manifest.json").write_text(json.dumps(manifest))


# -- one case ------------------------------------------------------------------------------------------
def inputs_for(spec, rng):
    """Inputs in range: random readings, the range's ends, and a constant frame."""
    shape = tuple(spec.sample_shape)
    random = rng.uniform(spec.low, spec.high, size=(4,) + shape)
    ends = np.stack([np.full(shape, spec.low), np.full(shape, spec.high)])
    batch = np.concatenate([random, ends])
    if spec.dtype.kind in "ui":
        batch = np.rint(batch)
    return batch.astype(spec.dtype)


def outcome(bundle, rng):
    """("refused", reason) / ("released", None) / ("finding", what)."""
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.errors import SensorveilError
    try:
        p = Privatizer.load(bundle, seed=int(rng.integers(1 << 31)))
        x = inputs_for(p.input_spec, rng)
        y = p(x)
    except SensorveilError as error:
        return "refused", str(error)[:160]
    except Exception as error:     # anything but the runtime's own error is a finding
        return "finding", "{}: {}".format(type(error).__name__, str(error)[:200])
    return check_release(p, x, y)


def check_release(p, x, y):
    from sensorveil.runtime.stages import BANK_INDEX, MODEL_UNITS, REPRESENTATION, SENSOR_UNITS
    y = np.asarray(y)
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        return "finding", "released NaN/inf"
    if p.emits in (MODEL_UNITS, SENSOR_UNITS):
        if y.min() < p.output_spec.low or y.max() > p.output_spec.high:
            return "finding", "released values {}..{} outside [{}, {}]".format(
                y.min(), y.max(), p.output_spec.low, p.output_spec.high)
        # AttriGuard's M* keeps x itself (r_i = 0) with probability p_i when C already infers the drawn
        # value i (eq. 3): an unchanged sample is one of its outcomes, so the identity check skips it
        may_keep_input = any(stage.kind == "attriguard" for stage in p.pipeline.stages)
        if not may_keep_input and y.shape == x.shape and np.allclose(y.astype(np.float64), x.astype(np.float64),
                                                                     atol=1e-6):
            return "finding", "released the input unchanged"
    elif p.emits not in (BANK_INDEX, REPRESENTATION):
        return "finding", "unknown output kind {!r}".format(p.emits)
    return "released", None


def one_case(seed_bundle, work, rng):
    """Copy the bundle, apply one mutation, and judge what the runtime does with it."""
    target = work / "case"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(seed_bundle, target)
    manifest = json.loads((target / "manifest.json").read_text())
    arrays = [name for name in manifest["files"] if name.endswith(".npy")]
    if arrays and rng.random() < 0.35:
        name = arrays[rng.integers(len(arrays))]
        how = ARRAY_MUTATIONS[rng.integers(len(ARRAY_MUTATIONS))]
        write_array(target, name, mutate_array(np.load(target / name), how))
        description = "array {} -> {}".format(name, how)
    else:
        changed, description = mutate_manifest(manifest, rng)
        (target / "manifest.json").write_text(json.dumps(changed))
    kind, detail = outcome(target, rng)
    return {"bundle": seed_bundle.name, "mutation": description, "outcome": kind, "detail": detail}

