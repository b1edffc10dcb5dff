"""The one definition of a valid manifest: every field the runtime reads, its type and its range.

``validate_manifest`` walks a parsed manifest.json once, before any file is read or any value is
used, and raises one ``ManifestError`` (a BundleError) naming the field's path, e.g.
``input.normalization.scale``, what it holds and what was expected. Past this point the runtime may
index the manifest without guarding: a bad manifest can no longer surface as KeyError, TypeError or
a silent all-zero / NaN output.

``check_model_io`` is the second half, run after a backend has loaded a graph: the model's own
inputs and outputs against what the manifest promises.

Fields the runtime never reads (metrics, complexity, training, validation, ...) are free-form.
Runs on the boards' Python (3.6): no annotations import here.
"""
import math
import re

from sensorveil.runtime.errors import BundleError
from sensorveil.runtime.stages import GRAPH_UNITS, REPRESENTATION, SENSOR_UNITS, STAGE_KINDS

# 2: a mechanism is a pipeline of stages over named graphs (artifacts[backend]["graphs"]).
# 1: one model per backend (artifacts[backend]["file"]); read as the equivalent schema-2 pipeline.
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "manifest.sig"     # signs the manifest, so the manifest cannot list it (runtime/trust.py)
REQUIRED_KEYS = ("schema_version", "mechanism", "input", "output", "artifacts", "files")
REQUIRED_SPEC_KEYS = ("name", "sample_shape", "model_shape", "dtype", "sensor_range", "normalization")
SINGLE_GRAPH = "model"      # the graph name of a one-model bundle (and of every schema-1 bundle)

# Sensor readings are numbers; names are spelled as numpy spells them, so np.dtype() cannot surprise.
NUMERIC_DTYPES = ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float16", "float32", "float64")
PRECISIONS = ("fp32", "fp16", "int8")
# Bounds that no real bundle comes near and that keep every product far below int64's range.
MAX_RANK = 8
MAX_SAMPLE_ELEMENTS = 1 << 28       # 268 M values per sample: a 16-megapixel RGB frame is 48 M
MAX_FILES = 1024
MAX_FILE_BYTES = 1 << 34            # 16 GiB
MAX_STAGES = 32
MAX_NAME_CHARS = 255
MAX_PATH_CHARS = 1024
SHA256_HEX = re.compile(r"\A[0-9a-f]{64}\Z")


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


# -- shapes and specs ---------------------------------------------------------------------------
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


def validate_spec(where, path, spec):
    """One tensor spec (manifest 'input' or 'output'): what the runtime clips, scales and casts by."""
    need_object(where, path, spec, REQUIRED_SPEC_KEYS)
    need_text(where, path + ".name", spec["name"])
    sample_count = need_shape(where, path + ".sample_shape", spec["sample_shape"])
    if not isinstance(spec["model_shape"], list) or len(spec["model_shape"]) < 2:
        fail(where, path + ".model_shape", spec["model_shape"], "a list [batch, dims...] with at least one dim")
    model_count = need_shape(where, path + ".model_shape", spec["model_shape"], allow_batch=True)
    if model_count != sample_count:
        fail(where, path + ".model_shape", spec["model_shape"], "as many values per sample as sample_shape "
             "{} ({}), since the runtime reshapes one into the other".format(spec["sample_shape"], sample_count))
    need_text(where, path + ".dtype", spec["dtype"], NUMERIC_DTYPES)
    sensor_range = need_list(where, path + ".sensor_range", spec["sensor_range"], 2, 2, "finite numbers [low, high]")
    low = need_number(where, path + ".sensor_range[0]", sensor_range[0])
    high = need_number(where, path + ".sensor_range[1]", sensor_range[1])
    if not low < high:
        fail(where, path + ".sensor_range", sensor_range, "[low, high] with low < high")
    norm = need_object(where, path + ".normalization", spec["normalization"], ("offset", "scale"))
    need_number(where, path + ".normalization.offset", norm["offset"])
    need_number(where, path + ".normalization.scale", norm["scale"], positive=True)
    optional(spec, "units", need_str, where, path + ".units", spec.get("units"))


def need_str(where, path, value):
    if not isinstance(value, str):
        fail(where, path, value, "a string")


# -- files --------------------------------------------------------------------------------------
def check_file_name(where, name):
    """A listed name is one plain relative path, spelled one way only: no '.', '..', '//', absolute
    paths or backslashes, so two entries cannot name (and hash) the same file."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_PATH_CHARS or "\x00" in name:
        fail(where, "files key", name, "a relative path of at most {} characters".format(MAX_PATH_CHARS))
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or re.match(r"\A[A-Za-z]:", name):
        raise ManifestError("{}: file entry {!r} points outside the bundle directory; expected a path "
                            "inside it".format(where, name))
    if "\\" in name or any(part in ("", ".") for part in parts):
        raise ManifestError("{}: file entry {!r} is not a plain relative path; expected one spelling per "
                            "file, such as 'model.onnx' or 'sub/model.bin' (no '.', '//' or '\\\\')".format(where, name))
    if name in (MANIFEST_NAME, SIGNATURE_NAME):
        raise ManifestError("{}: the manifest lists {!r}, which cannot be hashed inside itself; expected "
                            "only the bundle's model and array files".format(where, name))


def validate_files(where, files):
    need_object(where, "files", files)
    if not 0 < len(files) <= MAX_FILES:
        fail(where, "files", files, "from 1 to {} listed files".format(MAX_FILES))
    for name, record in files.items():
        check_file_name(where, name)
        path = subpath("files", name)
        need_object(where, path, record, ("sha256", "size"))
        if not isinstance(record["sha256"], str) or not SHA256_HEX.match(record["sha256"]):
            fail(where, path + ".sha256", record["sha256"], "64 lowercase hex digits")
        need_integer(where, path + ".size", record["size"], 0, MAX_FILE_BYTES)


def need_listed(where, path, value, files):
    need_text(where, path, value)
    if value not in files:
        raise ManifestError("{}: manifest field {} names file {!r}, which is not listed in 'files'; expected a "
                            "listed (and so verified) file".format(where, path, value))


# -- artifacts ----------------------------------------------------------------------------------
def graphs_of(artifact):
    """{graph name: {"file": ...}} of one backend's artifact, for either schema."""
    if "graphs" in artifact:
        return artifact["graphs"]
    return {SINGLE_GRAPH: {key: value for key, value in artifact.items() if key == "file"}}


def validate_artifacts(where, manifest):
    artifacts, files = manifest["artifacts"], manifest["files"]
    if not isinstance(artifacts, dict) or not artifacts:
        raise ManifestError("{}: manifest 'artifacts' must name at least one backend's model file".format(where))
    graph_key = "graphs" if manifest["schema_version"] >= 2 else "file"
    for backend, artifact in artifacts.items():
        path = subpath("artifacts", need_text(where, "artifacts key", backend))
        if not isinstance(artifact, dict) or graph_key not in artifact:
            raise ManifestError("{}: artifact {!r} must be an object with a {!r} key".format(where, backend, graph_key))
        optional(artifact, "precision", need_text, where, path + ".precision", artifact.get("precision"), PRECISIONS)
        graphs = graphs_of(artifact)
        if not isinstance(graphs, dict) or not graphs:
            raise ManifestError("{}: artifact {!r} 'graphs' must map graph names to {{'file': ...}}".format(where, backend))
        for graph, entry in graphs.items():
            graph_path = subpath(path + ".graphs", need_text(where, path + ".graphs key", graph))
            validate_graph_entry(where, graph_path, entry, files)
            if backend == "tensorrt":     # build settings per graph, or shared by all (graph_artifact merges)
                build = entry.get("build", artifact.get("build"))
                validate_tensorrt_build(where, graph_path + ".build" if "build" in entry else path + ".build",
                                        build, files)


def validate_graph_entry(where, path, entry, files):
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or entry["file"] not in files:
        raise ManifestError("{}: {} file {} is not listed in 'files'".format(
            where, path, describe(entry.get("file") if isinstance(entry, dict) else entry)))
    optional(entry, "weights", need_listed, where, path + ".weights", entry.get("weights"), files)
    optional(entry, "input_shape", need_shape, where, path + ".input_shape", entry.get("input_shape"))


def validate_tensorrt_build(where, path, build, files):
    need_object(where, path, build, ("precision", "max_batch", "workspace_mb"))
    need_text(where, path + ".precision", build["precision"], PRECISIONS)
    need_integer(where, path + ".max_batch", build["max_batch"], 1, 1 << 16)
    need_integer(where, path + ".workspace_mb", build["workspace_mb"], 1, 1 << 20)
    if build["precision"] == "int8":
        need_listed(where, path + ".calibration", build.get("calibration"), files)


# -- mechanism and pipeline ---------------------------------------------------------------------
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


def validate_mechanism(where, mechanism):
    need_object(where, "mechanism", mechanism)
    optional(mechanism, "name", need_text, where, "mechanism.name", mechanism.get("name"))
    optional(mechanism, "kind", need_text, where, "mechanism.kind", mechanism.get("kind"))
    if mechanism.get("substitution") is not None:     # null reads as {} (schema 1's pipeline_of)
        need_object(where, "mechanism.substitution", mechanism["substitution"])


def validate_graph_name(where, path, graph, manifest):
    """A graph a stage runs must be carried by every backend's artifact."""
    need_text(where, path, graph)
    for backend, artifact in manifest["artifacts"].items():
        if graph not in graphs_of(artifact):
            raise ManifestError("{}: {} runs graph {!r}, which the {!r} artifact does not carry".format(
                where, path.rsplit(".", 1)[0], graph, backend))


def validate_model_stage(where, path, stage, manifest):
    validate_graph_name(where, path + ".graph", stage.get("graph"), manifest)
    optional(stage, "units", need_text, where, path + ".units", stage.get("units"), GRAPH_UNITS)
    if stage.get("units") == SENSOR_UNITS:
        validate_sensor_units_stage(where, path, stage, manifest)


def validate_sensor_units_stage(where, path, stage, manifest):
    """A graph with the normalization inside takes the bundle's input and returns its output in sensor
    units, so it must be the whole pipeline, and its output must be a sensor reading (not TAPPFL's
    representation, which has no sensor units to map back to)."""
    if len(pipeline_of(manifest)) != 1:
        fail(where, path + ".units", stage["units"], "'model' (the default): only a one-stage pipeline's model "
             "can take and return sensor units; the other stages work in model units")
    if stage.get("emits") == REPRESENTATION:
        fail(where, path + ".units", stage["units"], "'model' (the default) for a stage that emits a "
             "representation, which is not in sensor units")


def validate_substitution_stage(where, path, stage, manifest):
    files = manifest["files"]
    need_integer(where, path + ".bank_size", stage.get("bank_size"), 1, MAX_SAMPLE_ELEMENTS)
    need_listed(where, path + ".bank_indices", stage.get("bank_indices"), files)
    if stage.get("bank_samples") is not None:          # null: an index-only bundle without the samples
        need_listed(where, path + ".bank_samples", stage["bank_samples"], files)
    optional(stage, "output_default", need_text, where, path + ".output_default", stage.get("output_default"),
             ("index", "sample"))
    optional(stage, "model_output", need_str, where, path + ".model_output", stage.get("model_output"))
    if not isinstance(stage.get("cut_out", False), bool):
        fail(where, path + ".cut_out", stage["cut_out"], "true or false")
    if stage.get("condition") is not None:             # a draw restricted by what the device knows
        condition = stage["condition"]
        need_object(where, path + ".condition", condition)
        need_str(where, path + ".condition.attribute", condition.get("attribute"))
        need_listed(where, path + ".condition.bank_labels", condition.get("bank_labels"), files)
    if stage.get("sequence") is not None:              # held camera substitutes walk on through the bank
        sequence = stage["sequence"]
        need_object(where, path + ".sequence", sequence)
        need_listed(where, path + ".sequence.next", sequence.get("next"), files)
        optional(sequence, "frames_per_step", need_integer, where, path + ".sequence.frames_per_step",
                 sequence.get("frames_per_step"), 1, 1 << 16)


def validate_attriguard_stage(where, path, stage, manifest):
    validate_graph_name(where, path + ".graph", stage.get("graph"), manifest)
    for key in ("weights", "bias", "target"):
        need_listed(where, path + "." + key, stage.get(key), manifest["files"])
    need_number(where, path + ".beta", stage.get("beta"), positive=True)
    need_text(where, path + ".policy", stage.get("policy"))
    optional(stage, "tau", need_number, where, path + ".tau", stage.get("tau"))
    optional(stage, "max_iterations", need_integer, where, path + ".max_iterations", stage.get("max_iterations"),
             1, 1 << 20)


def validate_sanitizer_stage(where, path, stage, manifest):
    need_text(where, path + ".mechanism", stage.get("mechanism"))
    need_integer(where, path + ".sensitive_dim", stage.get("sensitive_dim"), 0, MAX_SAMPLE_ELEMENTS)
    arrays = stage.get("arrays", {})
    need_object(where, path + ".arrays", arrays)
    for name, file_name in arrays.items():
        need_listed(where, subpath(path + ".arrays", name), file_name, manifest["files"])
    for key in ("clip_norm", "laplace_scale"):
        optional(stage, key, need_number, where, path + "." + key, stage.get(key))


def validate_prgan_med_stage(where, path, stage, manifest):
    for key in ("classifier", "generator"):
        validate_graph_name(where, path + "." + key, stage.get(key), manifest)
    need_listed(where, path + ".med", stage.get("med"), manifest["files"])
    need_integer(where, path + ".noise_dim", stage.get("noise_dim"), 0, MAX_SAMPLE_ELEMENTS)


# what each built-in stage kind reads from its manifest entry (the stage modules in runtime/stages use it);
# a kind registered in stages.STAGE_KINDS without an entry here checks its own keys with Stage.require
STAGE_FIELDS = {"model": validate_model_stage, "substitution": validate_substitution_stage,
                "attriguard": validate_attriguard_stage, "sanitizer": validate_sanitizer_stage,
                "prgan-med": validate_prgan_med_stage}


def validate_pipeline(where, manifest):
    """Stages are objects with a known kind, and each kind's fields are what its stage reads."""
    if manifest["schema_version"] >= 2 and "pipeline" not in manifest:
        raise ManifestError("{}: manifest lacks 'pipeline'; expected a non-empty list of stages".format(where))
    pipeline = pipeline_of(manifest)
    if not isinstance(pipeline, list) or not 0 < len(pipeline) <= MAX_STAGES:
        raise ManifestError("{}: manifest 'pipeline' must be a non-empty list of stages (at most {}); it is "
                            "{}".format(where, MAX_STAGES, describe(pipeline)))
    for position, stage in enumerate(pipeline):
        path = "pipeline[{}]".format(position)
        if not isinstance(stage, dict) or not isinstance(stage.get("kind"), str):
            raise ManifestError("{}: pipeline stage {} must be an object with a 'kind' string".format(where, position))
        if stage["kind"] not in STAGE_KINDS:
            raise ManifestError("{}: pipeline stage kind {!r} is not known to this runtime; expected one of {} "
                                "(upgrade sensorveil on the device)".format(where, stage["kind"][:60],
                                                                            sorted(STAGE_KINDS)))
        if stage["kind"] in STAGE_FIELDS:
            STAGE_FIELDS[stage["kind"]](where, path, stage, manifest)


def validate_camera(where, manifest):
    """The optional ``camera`` entry of a bundle trained on people crops (sensorveil.runtime.camera):
    frame "person-crops", detector "motion", crop_shape equal to the input's sample shape."""
    if "camera" not in manifest:
        return
    camera = manifest["camera"]
    need_object(where, "camera", camera, ("frame", "detector", "crop_shape"))
    if camera["frame"] != "person-crops":
        fail(where, "camera.frame", camera["frame"], "'person-crops'")
    if camera["detector"] != "motion":
        fail(where, "camera.detector", camera["detector"], "'motion'")
    if camera["crop_shape"] != manifest["input"]["sample_shape"]:
        fail(where, "camera.crop_shape", camera["crop_shape"],
             "the input's sample_shape {}".format(manifest["input"]["sample_shape"]))
    if camera.get("paste", "window") not in ("window", "cut-out"):
        fail(where, "camera.paste", camera.get("paste"), "'window' (the default) or 'cut-out'")
    margin = camera.get("margin", 0.0)
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin <= 2:
        fail(where, "camera.margin", margin, "a number from 0 to 2")


# -- the whole manifest -------------------------------------------------------------------------
def validate_manifest(manifest, where):
    """Every field the runtime reads, in the order the runtime depends on them; one ManifestError."""
    need_object(where, "(the whole manifest)", manifest)
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise ManifestError("{}: manifest lacks required keys {}; expected {}".format(where, missing,
                                                                                   list(REQUIRED_KEYS)))
    version = manifest["schema_version"]
    if not is_integer(version) or version not in READABLE_SCHEMAS:
        raise ManifestError(
            "{}: manifest schema_version {} is not supported; this runtime reads schema_version {} (upgrade "
            "sensorveil or re-export the bundle)".format(where, describe(version), ", ".join(map(str, READABLE_SCHEMAS))))
    validate_mechanism(where, manifest["mechanism"])
    for side in ("input", "output"):
        validate_spec(where, side, manifest[side])
    validate_files(where, manifest["files"])
    validate_artifacts(where, manifest)
    validate_pipeline(where, manifest)
    validate_camera(where, manifest)


# -- the model against the manifest, once a backend has loaded it --------------------------------
def check_model_io(where, backend, graph, inputs, outputs, expected_input=None, expected_output=None,
                   check_names=True):
    """``inputs``/``outputs``: [(name, shape)] the backend reports, a dim None where it is free.
    ``expected_*``: (name, per-sample shape) from the manifest, or None where the manifest says nothing
    about that side of this graph (a decoder's latent input). Each mismatch is one ManifestError."""
    label = "{}: the {} model of graph {!r}".format(where, backend, graph)
    if len(inputs) != 1 or not outputs:
        raise ManifestError("{} has {} input(s) and {} output(s); expected one input and at least one output".format(
            label, len(inputs), len(outputs)))
    for side, (name, shape), expected in (("input", inputs[0], expected_input), ("output", outputs[0], expected_output)):
        if expected is None:
            continue
        expected_name, sample_shape = expected
        if check_names and expected_name is not None and name != expected_name:
            raise ManifestError("{} names its {} {!r}; the manifest expects {!r}".format(label, side, name, expected_name))
        if not dims_agree(shape, sample_shape):
            raise ManifestError("{} has {} shape {}; the manifest expects (batch, {}) ".format(
                label, side, list(shape), ", ".join(map(str, sample_shape))) + "(a free dimension matches any size)")


def dims_agree(shape, sample_shape):
    """A model's (batch, dims...) against the manifest's per-sample dims: same rank, every fixed dim equal."""
    if len(shape) != len(sample_shape) + 1:
        return False
    return all(dim is None or dim == want for dim, want in zip(shape[1:], sample_shape))
