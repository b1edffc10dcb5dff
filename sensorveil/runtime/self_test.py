"""A bundle's self-test: inputs the exporter ran through the bundle as written, and what came out.

A one-model bundle says in its manifest which side maps sensor units to model units (the stage's
``units``) and by how much (``normalization``). A value that passes validation but does not fit the
graph (the units flag flipped, a scale that is not the graph's) makes every frame garbage without an
error: off by the scale, or left in model units. The exporter records a few real inputs and the
runtime's output for them right after validation passed (``self_test``: two listed .npy files); on
load the Privatizer runs the same inputs and refuses the bundle when its output strays from the record
by more than ``max_mean_error`` of the output range. Other backends, other CPUs and int8 kernels move
outputs by a few percent of the range at most; a wrong unit mapping moves them by tens of percent.

Only a pipeline of one model stage has one (every other stage draws randomly, and only a one-model
stage may carry the units: schema.py). Bundles without the entry load as they did.
Runs on the boards' Python (3.6): no annotations import here.
"""
import io

import numpy as np

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.manifest_fields import need_listed, need_number, need_object, optional

SELF_TEST = "self_test"
DEFAULT_MAX_MEAN_ERROR = 0.1


def validate_self_test(where, manifest):
    """The manifest entry: two listed files and a tolerance in (0, 0.5]."""
    if SELF_TEST not in manifest:
        return
    entry = need_object(where, SELF_TEST, manifest[SELF_TEST], ("input", "output"))
    for key in ("input", "output"):
        need_listed(where, "{}.{}".format(SELF_TEST, key), entry[key], manifest["files"])
    optional(entry, "max_mean_error", need_number, where, SELF_TEST + ".max_mean_error",
             entry.get("max_mean_error"), True)
    if not 0 < entry.get("max_mean_error", DEFAULT_MAX_MEAN_ERROR) <= 0.5:
        raise BundleError("{}: manifest field {}.max_mean_error is {}; expected a share of the output range in "
                          "(0, 0.5]".format(where, SELF_TEST, entry["max_mean_error"]))


def bundle_array(bundle, name):
    try:
        return np.load(io.BytesIO(bundle.read(name)), allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise BundleError("{}: {} is not a plain .npy array ({})".format(bundle.root, name, error))


def run_self_test(privatizer):
    """Refuse the bundle when the recorded inputs no longer give the recorded output."""
    entry = privatizer.manifest.get(SELF_TEST)
    if not entry or not privatizer.pipeline.single_model:     # only a one-model pipeline is deterministic
        return
    root = privatizer.pipeline.bundle.root
    inputs, expected = (bundle_array(privatizer.pipeline.bundle, entry[key]) for key in ("input", "output"))
    spec = privatizer.output_spec
    if inputs.shape[1:] != privatizer.input_spec.sample_shape or expected.shape != (len(inputs),) + spec.sample_shape:
        raise BundleError("{}: self_test arrays {} and {} do not fit the input and output specs".format(
            root, inputs.shape, expected.shape))
    actual = privatizer(inputs)
    error = float(np.mean(np.abs(actual.astype(np.float64) - expected.astype(np.float64)))) / (spec.high - spec.low)
    limit = float(entry.get("max_mean_error", DEFAULT_MAX_MEAN_ERROR))
    if not error <= limit:
        raise BundleError("{}: self-test failed: the recorded inputs now give output {:.1%} of the output range away "
                          "from what the exporter recorded (at most {:.0%} expected); the manifest's units or "
                          "normalization do not fit its graph, refusing to load it".format(root, error, limit))
