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
import re

from sensorveil.runtime.manifest_fields import (  # noqa: F401
    MAX_NAME_CHARS,
    MAX_RANK,
    MAX_SAMPLE_ELEMENTS,
    SINGLE_GRAPH,
    ManifestError,
    describe,
    fail,
    graphs_of,
    is_integer,
    is_number,
    need_integer,
    need_list,
    need_listed,
    need_number,
    need_object,
    need_shape,
    need_str,
    need_text,
    optional,
    pipeline_of,
    subpath,
)
from sensorveil.runtime.preprocessor import declared_in
from sensorveil.runtime.self_test import validate_self_test
from sensorveil.runtime.stages import STAGE_KINDS, stage_class

# 2: a mechanism is a pipeline of stages over named graphs (artifacts[backend]["graphs"]).
# 1: one model per backend (artifacts[backend]["file"]); read as the equivalent schema-2 pipeline.
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)
MANIFEST_NAME = "manifest.json"
SIGNATURE_NAME = "manifest.sig"     # signs the manifest, so the manifest cannot list it (runtime/trust.py)
REQUIRED_KEYS = ("schema_version", "mechanism", "input", "output", "artifacts", "files")
REQUIRED_SPEC_KEYS = ("name", "sample_shape", "model_shape", "dtype", "sensor_range", "normalization")

# Sensor readings are numbers; names are spelled as numpy spells them, so np.dtype() cannot surprise.
NUMERIC_DTYPES = ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float16", "float32", "float64")
PRECISIONS = ("fp32", "fp16", "int8")
# Bounds that no real bundle comes near and that keep every product far below int64's range.
MAX_FILES = 1024
MAX_FILE_BYTES = 1 << 34            # 16 GiB
MAX_STAGES = 32
MAX_PATH_CHARS = 1024
SHA256_HEX = re.compile(r"\A[0-9a-f]{64}\Z")
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38     # the smallest normal float32
# model units of a real bundle span about 1 (0..1, -1..1, a few standard deviations); these bounds are
# orders of magnitude wider and still keep float32 arithmetic far from overflow and underflow
MODEL_SPAN = (1e-4, 1e4)


# -- shapes and specs ---------------------------------------------------------------------------
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
    for index, value in enumerate((low, high)):
        if abs(value) > FLOAT32_MAX:
            fail(where, "{}.sensor_range[{}]".format(path, index), value, "a value float32 can hold")
    norm = need_object(where, path + ".normalization", spec["normalization"], ("offset", "scale"))
    offset = need_number(where, path + ".normalization.offset", norm["offset"])
    scale = need_number(where, path + ".normalization.scale", norm["scale"], positive=True)
    validate_normalization(where, path + ".normalization", low, high, offset, scale)
    optional(spec, "units", need_str, where, path + ".units", spec.get("units"))
    if "accepts_dtypes" in spec:     # integer readings the runtime may convert (values checked in range)
        accepts = need_list(where, path + ".accepts_dtypes", spec["accepts_dtypes"], 0, len(NUMERIC_DTYPES),
                            "integer dtype names")
        for index, name in enumerate(accepts):
            need_text(where, "{}.accepts_dtypes[{}]".format(path, index), name,
                      [dtype for dtype in NUMERIC_DTYPES if dtype[0] in "ui"])


def validate_normalization(where, path, low, high, offset, scale):
    """The runtime computes (x - offset) / scale and y * scale + offset in float32: scale and its
    reciprocal must be normal float32 numbers, and the sensor range must map to model units of a sane
    span; otherwise the output is all NaN, all zero or constant, which would pass for a privatized frame."""
    if not FLOAT32_TINY <= scale <= FLOAT32_MAX or not FLOAT32_TINY <= 1.0 / scale <= FLOAT32_MAX:
        fail(where, path + ".scale", scale, "a scale whose value and reciprocal float32 can hold "
             "({:.3g} to {:.3g})".format(1 / FLOAT32_MAX, FLOAT32_MAX))
    if abs(offset) > FLOAT32_MAX:
        fail(where, path + ".offset", offset, "an offset float32 can hold")
    ends = [(end - offset) / scale for end in (low, high)]
    span = ends[1] - ends[0]
    if not (MODEL_SPAN[0] <= span <= MODEL_SPAN[1] and max(abs(end) for end in ends) <= MODEL_SPAN[1]):
        fail(where, path, {"offset": offset, "scale": scale}, "a normalization that maps the sensor range "
             "[{:g}, {:g}] to model units spanning {:g} to {:g} (it maps it to [{:.3g}, {:.3g}])".format(
                 low, high, MODEL_SPAN[0], MODEL_SPAN[1], ends[0], ends[1]))


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
                            "file, such as 'model.onnx' or 'sub/model.bin' (no '.', '//' or '\\\\')".format(
                                where, name))
    if name in (MANIFEST_NAME, SIGNATURE_NAME):
        raise ManifestError(
            "{}: the manifest lists {!r}, which cannot be hashed inside itself; expected "
            "only the bundle's model and array files".format(where, name)
        )


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


# -- artifacts ----------------------------------------------------------------------------------
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
            raise ManifestError(
                "{}: artifact {!r} 'graphs' must map graph names to {{'file': ...}}".format(where, backend)
            )
        for graph, entry in graphs.items():
            graph_path = subpath(path + ".graphs", need_text(where, path + ".graphs key", graph))
            validate_graph_entry(where, graph_path, entry, files)
            if backend == "tensorrt":  # build settings per graph, or shared by all (graph_artifact merges)
                build = entry.get("build", artifact.get("build"))
                validate_tensorrt_build(
                    where, graph_path + ".build" if "build" in entry else path + ".build", build, files
                )


def validate_graph_entry(where, path, entry, files):
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or entry["file"] not in files:
        raise ManifestError(
            "{}: {} file {} is not listed in 'files'".format(
                where, path, describe(entry.get("file") if isinstance(entry, dict) else entry)
            )
        )
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
def validate_mechanism(where, mechanism):
    need_object(where, "mechanism", mechanism)
    optional(mechanism, "name", need_text, where, "mechanism.name", mechanism.get("name"))
    optional(mechanism, "kind", need_text, where, "mechanism.kind", mechanism.get("kind"))
    if mechanism.get("substitution") is not None:  # null reads as {} (schema 1's pipeline_of)
        need_object(where, "mechanism.substitution", mechanism["substitution"])


def validate_pipeline(where, manifest):
    """Stages are objects with a known kind, and each kind's fields are what its stage reads."""
    if manifest["schema_version"] >= 2 and "pipeline" not in manifest:
        raise ManifestError("{}: manifest lacks 'pipeline'; expected a non-empty list of stages".format(where))
    pipeline = pipeline_of(manifest)
    if not isinstance(pipeline, list) or not 0 < len(pipeline) <= MAX_STAGES:
        raise ManifestError(
            "{}: manifest 'pipeline' must be a non-empty list of stages (at most {}); it is {}".format(
                where, MAX_STAGES, describe(pipeline)
            )
        )
    for position, stage in enumerate(pipeline):
        path = "pipeline[{}]".format(position)
        if not isinstance(stage, dict) or not isinstance(stage.get("kind"), str):
            raise ManifestError("{}: pipeline stage {} must be an object with a 'kind' string".format(where, position))
        if stage["kind"] not in STAGE_KINDS:
            raise ManifestError(
                "{}: pipeline stage kind {!r} is not known to this runtime; expected one of {} "
                "(upgrade sensorveil on the device)".format(where, stage["kind"][:60], sorted(STAGE_KINDS))
            )
        # each stage module checks its own entry, including the ranges in which it still protects
        stage_class(stage["kind"]).validate_fields(where, path, stage, manifest)


def validate_declared(where, manifest):
    """The pre-processor a bundle declares in its own manifest entry (a camera bundle's ``camera``), parsed and
    checked by the class registered for it (runtime.preprocessor.DECLARED_KINDS); returns it, or None."""
    return declared_in(manifest, where)


# -- the whole manifest -------------------------------------------------------------------------
def validate_manifest(manifest, where):
    """Every field the runtime reads, in the order the runtime depends on them; one ManifestError. Returns
    the parsed camera entry (``CameraSettings``), or None for a bundle without one."""
    need_object(where, "(the whole manifest)", manifest)
    missing = [key for key in REQUIRED_KEYS if key not in manifest]
    if missing:
        raise ManifestError(
            "{}: manifest lacks required keys {}; expected {}".format(where, missing, list(REQUIRED_KEYS))
        )
    version = manifest["schema_version"]
    if not is_integer(version) or version not in READABLE_SCHEMAS:
        raise ManifestError(
            "{}: manifest schema_version {} is not supported; this runtime reads schema_version {} (upgrade "
            "sensorveil or re-export the bundle)".format(
                where, describe(version), ", ".join(map(str, READABLE_SCHEMAS))
            )
        )
    validate_mechanism(where, manifest["mechanism"])
    optional(manifest, "serial", need_integer, where, "serial", manifest.get("serial"), 1, (1 << 63) - 1)
    for side in ("input", "output"):
        validate_spec(where, side, manifest[side])
    validate_files(where, manifest["files"])
    validate_artifacts(where, manifest)
    validate_pipeline(where, manifest)
    declared = validate_declared(where, manifest)
    validate_self_test(where, manifest)
    return declared


# -- the model against the manifest, once a backend has loaded it --------------------------------
def check_model_io(where, backend, graph, inputs, outputs, expected_input=None, expected_output=None, check_names=True):
    """``inputs``/``outputs``: [(name, shape)] the backend reports, a dim None where it is free.
    ``expected_*``: (name, per-sample shape) from the manifest, or None where the manifest says nothing
    about that side of this graph (a decoder's latent input). Each mismatch is one ManifestError."""
    label = "{}: the {} model of graph {!r}".format(where, backend, graph)
    if len(inputs) != 1 or not outputs:
        raise ManifestError(
            "{} has {} input(s) and {} output(s); expected one input and at least one output".format(
                label, len(inputs), len(outputs)
            )
        )
    for side, (name, shape), expected in (
        ("input", inputs[0], expected_input),
        ("output", outputs[0], expected_output),
    ):
        if expected is None:
            continue
        expected_name, sample_shape = expected
        if check_names and expected_name is not None and name != expected_name:
            raise ManifestError(
                "{} names its {} {!r}; the manifest expects {!r}".format(label, side, name, expected_name)
            )
        if not dims_agree(shape, sample_shape):
            raise ManifestError(
                "{} has {} shape {}; the manifest expects (batch, {}) ".format(
                    label, side, list(shape), ", ".join(map(str, sample_shape))
                )
                + "(a free dimension matches any size)"
            )


def dims_agree(shape, sample_shape):
    """A model's (batch, dims...) against the manifest's per-sample dims: same rank, every fixed dim equal."""
    if len(shape) != len(sample_shape) + 1:
        return False
    return all(dim is None or dim == want for dim, want in zip(shape[1:], sample_shape))
