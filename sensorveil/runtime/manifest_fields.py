"""The field checks every manifest validator shares (schema.py for the manifest as a whole, each stage
module in runtime/stages for its own pipeline entry), and where a manifest keeps its graphs and stages.

Each check raises one ``ManifestError`` naming the field's path, what it holds and what was expected.
Runs on the boards' Python (3.6): no annotations import here.
"""
import math
import re

from sensorveil.runtime.errors import BundleError

MAX_RANK = 8
MAX_SAMPLE_ELEMENTS = 1 << 28       # 268 M values per sample: a 16-megapixel RGB frame is 48 M
MAX_NAME_CHARS = 255
SINGLE_GRAPH = "model"      # the graph name of a one-model bundle (and of every schema-1 bundle)


class ManifestError(BundleError):
    """A manifest field is missing, of the wrong type or out of range; the message names its path."""


# -- describing values and failing ------------------------------------------------------------
def describe(value):
    """A short description of a bad value; containers are never expanded (they may be huge or deep)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, dict):
        return "an object of {} key(s)".format(len(value))
    if isinstance(value, list):
        return "a list of {} item(s)".format(len(value))
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fail(where, path, value, expected):
    raise ManifestError("{}: manifest field {} is {}; expected {}".format(where, path, describe(value), expected))


def subpath(path, key):
    return "{}.{}".format(path, key) if re.match(r"\A[A-Za-z_][A-Za-z0-9_]*\Z", key) else "{}[{!r}]".format(path, key)


# -- field kinds --------------------------------------------------------------------------------
def is_integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return (is_integer(value) or isinstance(value, float)) and math.isfinite(value)


def need_object(where, path, value, keys=None):
    if not isinstance(value, dict):
        fail(where, path, value, "an object" + (" with keys {}".format(list(keys)) if keys else ""))
    if keys:
        absent = [key for key in keys if key not in value]
        if absent:
            raise ManifestError("{}: manifest '{}' lacks {}; expected {}".format(where, path, absent, list(keys)))
    return value


def need_list(where, path, value, least, most, what):
    if not isinstance(value, list) or not least <= len(value) <= most:
        fail(where, path, value, "a list of {} to {} {}".format(least, most, what))
    return value


def need_text(where, path, value, choices=None):
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        fail(where, path, value, "a non-empty string of at most {} characters".format(MAX_NAME_CHARS))
    if choices is not None and value not in choices:
        fail(where, path, value, "one of {}".format(list(choices)))
    return value


def need_integer(where, path, value, least, most):
    if not is_integer(value) or not least <= value <= most:
        fail(where, path, value, "an integer from {} to {}".format(least, most))
    return value


def need_number(where, path, value, positive=False):
    if not is_number(value) or (positive and value <= 0):
        fail(where, path, value, "a finite {}number".format("positive " if positive else ""))
    return float(value)


def optional(container, key, check, *args):
    """Check ``container[key]`` with ``check`` when the key is present (null is a value like any other:
    the stages read ``spec.get(key, default)``, which returns a null, not the default)."""
    if key in container:
        check(*args)



# -- shapes ------------------------------------------------------------------------------------
def need_shape(where, path, value, allow_batch=False):
    """Positive dimensions (the first may be null, a free batch axis); returns the per-sample element count."""
    need_list(where, path, value, 1, MAX_RANK + int(allow_batch), "positive integers")
    dims = value[1:] if allow_batch else value
    if allow_batch and not (value[0] is None or is_integer(value[0]) and value[0] > 0):
        fail(where, path + "[0]", value[0], "null (any batch size) or a positive integer")
    count = 1
    for index, dim in enumerate(dims):
        need_integer(where, "{}[{}]".format(path, index + int(allow_batch)), dim, 1, MAX_SAMPLE_ELEMENTS)
        count *= dim
        if count > MAX_SAMPLE_ELEMENTS:
            fail(where, path, value, "at most {} values per sample".format(MAX_SAMPLE_ELEMENTS))
    return count


def need_str(where, path, value):
    if not isinstance(value, str):
        fail(where, path, value, "a string")


def need_listed(where, path, value, files):
    need_text(where, path, value)
    if value not in files:
        raise ManifestError("{}: manifest field {} names file {!r}, which is not listed in 'files'; expected a "
                            "listed (and so verified) file".format(where, path, value))



# -- where a manifest keeps its graphs and stages ------------------------------------------------
def graphs_of(artifact):
    """{graph name: {"file": ...}} of one backend's artifact, for either schema."""
    if "graphs" in artifact:
        return artifact["graphs"]
    return {SINGLE_GRAPH: {key: value for key, value in artifact.items() if key == "file"}}


def pipeline_of(manifest):
    """Schema 2 states its pipeline; a schema-1 bundle is one model, followed by PASS's draw for
    the substitution kind (its bank entry lived under mechanism.substitution)."""
    if "pipeline" in manifest:
        return manifest["pipeline"]
    stages = [{"kind": "model", "graph": SINGLE_GRAPH}]
    mechanism = manifest["mechanism"]
    if mechanism.get("kind") == "substitution":
        stage = {"kind": "substitution"}
        stage.update(mechanism.get("substitution") or {})
        stages.append(stage)
    return stages
