"""PASS's last step on the device: draw the substitute x' ~ P(X'|X=x) in numpy (PASS Algorithm 2,
line 4) and emit it in the bundle's output mode.

The exported model stops at eq. 2's logits (older bundles: at the probabilities P(X'|X)); the
softmax and the sampling happen here, so the randomness comes from the runtime's numpy Generator
(OS entropy unless the caller passes a seed), never from a value baked into a model file.

Output modes (``Privatizer.load(bundle, output=...)``):

* ``index``:  only the position of the substitute in the bank leaves the device (the server holds
              the bank; ``bank_indices.npy`` maps positions to rows of the training dataset).
* ``sample``: the substitute sample itself, in sensor units (needs ``substitutes.npy`` in the bundle).
* ``colour``: camera bundles whose bank people were cut out of colour crops (``bank_colour``): the same
              substitute in colour (H, W, 3 uint8, 0 outside the person as in ``sample``), for the camera
              release; the model and the audit work on the grey samples.

A conditioned bundle (manifest ``condition``: an attribute and each bank entry's value of it) draws
each substitute among the bank entries that share what the device already knows about the sample
(``known``: e.g. the walking direction a camera's tracker measured), P(X'|X) renormalized over them:
the published value then holds by construction, and PASS's learned distribution only chooses among
people who walk the same way. A row whose value is unknown (-1) draws from the whole bank.

Keys (``Privatizer(x, keys=...)``, e.g. a camera tracker's person ids) hold the draw: a key seen again
keeps its substitute instead of drawing anew (a new draw every frame would flicker between strangers,
and would show an observer many draws of P(X'|X) for the same person instead of one). Where the bundle
carries its bank people's sequences (manifest ``sequence``: each bank position's next crop of the same
person), a held substitute walks on through them, as the bank person walked in the training clip.
"""
import numpy as np

from sensorveil.runtime.errors import BundleError, InputError, OutputError
from sensorveil.runtime.manifest_fields import (
    MAX_SAMPLE_ELEMENTS,
    fail,
    need_integer,
    need_listed,
    need_object,
    need_str,
    need_text,
    optional,
)
from sensorveil.runtime.stages.base import BANK_INDEX, SENSOR_UNITS, Stage
from sensorveil.runtime.stages.held_draws import HeldDraws

KIND = "substitution"
OUTPUT_MODES = ("index", "sample", "colour")
# What the graph before the draw returns (manifest "model_output"): eq. 2's logits, or P(X'|X) itself.
# Bundles that carry the softmax in the graph describe it in words, always starting "P(X'|X)".
LOGITS = "logits"
PROBABILITIES = ("probabilities", "P(X'|X)")
BANK_INDICES_MEANING = "bank position -> row of the dataset record"


def default_output(bank_samples):
    """The output mode of a bundle whose manifest names none: the sample where the bundle carries the bank's
    samples, else the bank position."""
    return "sample" if bank_samples else "index"


# a row of P(X'|X) sums to 1 up to float32 rounding and int8 quantization; a graph whose rows are off by
# more than this returns something else (logits, mislabelled), and drawing from it would not be PASS
PROBABILITY_SUM_TOLERANCE = 0.05


def index_dtype(bank_size: int) -> np.dtype:
    """The smallest unsigned integer that holds every bank position: what index mode transmits."""
    return np.dtype(np.uint16 if bank_size <= np.iinfo(np.uint16).max + 1 else np.uint32)


def draw_indices(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of a (batch, bank) probability matrix, by inverse CDF.

    Each row is renormalized by its own sum, so float rounding (or small negative values from a
    quantized backend, clipped to 0) never biases the draw toward the last substitute.
    """
    probs = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, None)
    cdf = np.cumsum(probs, axis=1)
    total = cdf[:, -1:]
    if not np.all(total > 0):
        raise InputError("the model returned an all-zero substitution distribution; expected "
                         "probabilities P(X'|X) with a positive sum per row")
    u = rng.random((probs.shape[0], 1)) * total
    return np.minimum((cdf <= u).sum(axis=1), probs.shape[1] - 1)


def restrict_to_known(probabilities: np.ndarray, bank_labels: np.ndarray, known) -> np.ndarray:
    """P(X'|X) with the mass of bank entries whose label differs from the row's ``known`` value removed
    (renormalized by the draw). Rows with known < 0, or with no bank entry of their value, keep theirs."""
    if known is None:
        return probabilities
    known = np.asarray(known).reshape(-1)
    if len(known) != len(probabilities):
        raise InputError("known holds {} values for a batch of {}; expected one per sample".format(
            len(known), len(probabilities)))
    same = bank_labels[None, :] == known[:, None]
    usable = (known >= 0) & same.any(axis=1)
    return np.where(usable[:, None] & ~same, 0.0, probabilities)


# Who a camera bank's people are (sdk.datasets.walkway's ``bank``): walkers the SDK drew, people who agreed to
# be shown, or the deployment camera's own bystanders (exported only when asked for by name).
BANK_SOURCES = {"rendered": False, "consented": True, "clip": True}     # source -> real people


def need_bank_source(where, path, value):
    need_object(where, path, value)
    source = value.get("source")
    if source not in BANK_SOURCES:
        fail(where, path + ".source", source, "one of {}".format(sorted(BANK_SOURCES)))
    if value.get("real_people") is not BANK_SOURCES[source]:
        fail(where, path + ".real_people", value.get("real_people"),
             "{} for a {!r} bank".format(str(BANK_SOURCES[source]).lower(), source))


def describe_bank(source) -> str:
    """One line on who a cut-out bundle's substitutes are, for the console, the preview and the quickstart."""
    if source is None:
        return ("substitutes: who they are is not recorded (a bundle from before sensorveil recorded its bank); "
                "treat them as real people of the training camera")
    if source["source"] == "rendered":
        people = source.get("people") or "walkers sensorveil draws itself"
        return "substitutes: {}{}".format(people, "" if "no real person" in people else ", no real person")
    if source["source"] == "consented":
        return "substitutes: consented people of {} (sha256 {})".format(source.get("clip"),
                                                                         str(source.get("sha256"))[:12])
    return ("WARNING substitutes: real bystanders of the deployment camera (bank=clip, asked for by name): the "
            "release shows them at places and times they never were")


def need_model_output(where, path, value):
    """"logits", or a statement that the graph returns P(X'|X) itself: a misspelt or unknown value would
    make the draw read scores as probabilities."""
    if not isinstance(value, str) or not (value == LOGITS or value.startswith(PROBABILITIES)):
        fail(where, path, value, "'logits' (eq. 2's scores, softmaxed by the runtime) or 'probabilities' "
             "(a graph that returns P(X'|X))")


def checked_samples(samples: np.ndarray, bank_size: int, output: dict, where: str) -> np.ndarray:
    """The substitute samples are what leaves the device: one per bank entry, of the output's shape and
    dtype, finite, inside the output's sensor range; anything else is refused at load."""
    expected = (bank_size,) + tuple(output["sample_shape"])
    low, high = output["sensor_range"]
    if samples.shape != expected or samples.dtype != np.dtype(output["dtype"]):
        raise BundleError(f"{where} holds {samples.dtype} {samples.shape}; expected {output['dtype']} {expected} "
                          "(one substitute per bank entry, in the output's sensor units)")
    if samples.dtype.kind == "f" and not np.isfinite(samples).all():
        raise BundleError(f"{where} holds NaN or inf; expected finite substitute samples")
    if samples.size and (samples.min() < low or samples.max() > high):
        raise BundleError(f"{where} holds values {samples.min()}..{samples.max()}; expected values inside the "
                          f"output's sensor range [{low}, {high}]")
    return samples


def checked_colour(colour: np.ndarray, samples: np.ndarray, where: str) -> np.ndarray:
    """Colour substitutes must be the grey ones in colour: uint8 (bank, H, W, 3), a person exactly where the
    grey cut-out has one (non-zero) and 0 elsewhere, so a colour paste never brings back a rectangle of
    somebody else's background that the grey one left out."""
    if colour.dtype != np.uint8 or colour.shape != samples.shape + (3,):
        raise BundleError(f"{where} holds {colour.dtype} {colour.shape}; expected uint8 {samples.shape + (3,)} "
                          "(each grey substitute in colour)")
    if not np.array_equal(colour.any(axis=-1), samples > 0):
        raise BundleError(f"{where}: the colour substitutes' people are not where the grey substitutes' are; "
                          "expected the same cut-outs in colour")
    return colour


def checked_probabilities(rows: np.ndarray) -> np.ndarray:
    """A graph said to return P(X'|X) must: finite, non-negative (up to quantization) rows that sum to 1."""
    sums = rows.sum(axis=1, dtype=np.float64)
    if not np.isfinite(rows).all() or rows.min() < -PROBABILITY_SUM_TOLERANCE or \
            np.abs(sums - 1.0).max() > PROBABILITY_SUM_TOLERANCE:
        raise OutputError("the model's substitution scores are not probabilities (row sums {:.3g}..{:.3g}); the "
                          "manifest's model_output says P(X'|X), so refusing to draw from them".format(
                              sums.min(), sums.max()))
    return rows


class SubstitutionEntry(object):
    """What the sdk writes for PASS's draw, read back by :class:`SubstitutionStage`: the bank's size and
    the bundle files of its positions' dataset rows, of its samples (None: an index-only bundle) and of
    their colour cut-outs; what the graph before the draw returns (``model_output``, explained in words);
    whether the samples are people cut out of camera crops and who they are (``bank_source``); and,
    optionally, a ``condition`` (attribute, labels file) and a ``sequence`` (next-crop file, frames per step)."""

    def __init__(self, bank_size, bank_indices, bank_samples=None, bank_colour=None, model_output=LOGITS,
                 model_output_meaning=None, cut_out=False, bank_source=None, condition=None, sequence=None):
        self.bank_size, self.bank_indices = int(bank_size), bank_indices
        self.bank_samples, self.bank_colour = bank_samples, bank_colour
        self.model_output, self.model_output_meaning = model_output, model_output_meaning
        self.cut_out, self.bank_source = bool(cut_out), bank_source
        self.condition, self.sequence = condition, sequence

    def to_manifest(self):
        entry = {"kind": KIND, "bank_size": self.bank_size, "bank_indices": self.bank_indices,
                 "bank_samples": self.bank_samples, "bank_colour": self.bank_colour,
                 "output_default": default_output(self.bank_samples), "model_output": self.model_output,
                 "model_output_meaning": self.model_output_meaning, "bank_indices_meaning": BANK_INDICES_MEANING,
                 "cut_out": self.cut_out}
        if self.bank_source is not None:
            entry["bank_source"] = dict(self.bank_source)
        if self.condition is not None:
            attribute, bank_labels = self.condition
            entry["condition"] = {"attribute": attribute, "bank_labels": bank_labels}
        if self.sequence is not None:
            following, frames_per_step = self.sequence
            entry["sequence"] = {"next": following, "frames_per_step": int(frames_per_step)}
        return entry


class SubstitutionStage(Stage):
    """``{"kind": "substitution", "bank_size", "bank_indices", "bank_samples", "output_default"}``:
    the previous stage's P(X'|X) in, the drawn substitute (or its bank position) out."""

    kind = KIND
    output_modes = OUTPUT_MODES

    @classmethod
    def validate_fields(cls, where, path, stage, manifest):
        files = manifest["files"]
        need_integer(where, path + ".bank_size", stage.get("bank_size"), 1, MAX_SAMPLE_ELEMENTS)
        need_listed(where, path + ".bank_indices", stage.get("bank_indices"), files)
        if stage.get("bank_samples") is not None:          # null: an index-only bundle without the samples
            need_listed(where, path + ".bank_samples", stage["bank_samples"], files)
        if stage.get("bank_colour") is not None:           # camera bank people in colour, beside the grey ones
            need_listed(where, path + ".bank_colour", stage["bank_colour"], files)
            if stage.get("bank_samples") is None:
                fail(where, path + ".bank_samples", None, "the grey substitutes the colour ones are checked against")
        optional(stage, "output_default", need_text, where, path + ".output_default", stage.get("output_default"),
                 OUTPUT_MODES)
        optional(stage, "model_output", need_model_output, where, path + ".model_output", stage.get("model_output"))
        if not isinstance(stage.get("cut_out", False), bool):
            fail(where, path + ".cut_out", stage["cut_out"], "true or false")
        if stage.get("condition") is not None:             # a draw restricted by what the device knows
            condition = stage["condition"]
            need_object(where, path + ".condition", condition)
            need_str(where, path + ".condition.attribute", condition.get("attribute"))
            need_listed(where, path + ".condition.bank_labels", condition.get("bank_labels"), files)
        if stage.get("bank_source") is not None:           # who the released substitutes are
            need_bank_source(where, path + ".bank_source", stage["bank_source"])
        if stage.get("sequence") is not None:              # held camera substitutes walk on through the bank
            sequence = stage["sequence"]
            need_object(where, path + ".sequence", sequence)
            need_listed(where, path + ".sequence.next", sequence.get("next"), files)
            optional(sequence, "frames_per_step", need_integer, where, path + ".sequence.frames_per_step",
                     sequence.get("frames_per_step"), 1, 1 << 16)

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        root = context.bundle.root
        self.bank_size = int(self.require("bank_size"))
        self.samples_file = spec.get("bank_samples")
        self.output = context.output or spec.get("output_default", default_output(self.samples_file))
        if self.output not in OUTPUT_MODES:    # name the modes this bundle serves
            served = ["index"] + ["sample"] * bool(self.samples_file) + ["colour"] * bool(spec.get("bank_colour"))
            raise InputError(f"unknown output mode {self.output!r}; expected one of {served}")
        self.emits = BANK_INDEX if self.output == "index" else SENSOR_UNITS
        self.bank_indices = self.per_bank_entry(self.require("bank_indices"))
        self.samples = self.colour = None
        if self.output in ("sample", "colour"):
            if not self.samples_file:
                raise BundleError(f"{root} carries no substitute samples, so output='sample' is not "
                                  "possible; use output='index' (the server maps indices to its bank) or "
                                  "re-export with the substitute samples included")
            self.samples = checked_samples(context.array(self.samples_file), self.bank_size,
                                           context.bundle.manifest["output"], f"{root}: {self.samples_file}")
        if self.output == "colour":
            if not spec.get("bank_colour"):
                raise BundleError(f"{root} carries no colour substitutes, so output='colour' is not possible; "
                                  "expected output='sample' (grey), or a camera bundle exported from colour crops")
            self.colour = checked_colour(context.array(spec["bank_colour"]), self.samples,
                                         f"{root}: {spec['bank_colour']}")
        self.index_dtype = index_dtype(self.bank_size)
        condition = spec.get("condition") or {}
        self.condition = condition.get("attribute")          # None: an unconditioned bundle
        self.bank_labels = None
        if self.condition is not None:
            self.bank_labels = self.per_bank_entry(condition["bank_labels"]).astype(np.int64)
        self.held = HeldDraws(*self.sequence(spec.get("sequence")))
        # who the substitutes are: None for a bundle that does not say (see describe_bank)
        self.bank_source = spec.get("bank_source")
        self.pastes_people = bool(spec.get("cut_out"))

    def per_bank_entry(self, name) -> np.ndarray:
        """A bundle array of one value per bank entry (its dataset rows, labels or next positions)."""
        array = self.context.array(name)
        if array.shape != (self.bank_size,):
            raise BundleError(f"{self.context.bundle.root}: {name} has shape {array.shape}; "
                              f"expected ({self.bank_size},)")
        return array

    def output_mode(self):
        return self.output

    def conditioned_on(self):
        return self.condition

    def apply(self, batch, rng, known=None, keys=None):
        return self(batch, rng, known, keys)

    def describe(self):
        # a camera release pastes the bank's people: say who they are
        return {"substitutes": describe_bank(self.bank_source)} if self.pastes_people else {}

    def sequence(self, sequence) -> tuple:
        """(following, frames_per_step) of the manifest's ``sequence`` entry, or (None, 1) without one."""
        if not sequence:
            return None, 1
        following = self.per_bank_entry(sequence["next"]).astype(np.int64)
        if following.min() < 0 or following.max() >= self.bank_size:
            raise BundleError(f"{self.context.bundle.root}: {sequence['next']} must hold {self.bank_size} bank "
                              f"positions (0..{self.bank_size - 1}), one per bank entry")
        return following, int(sequence.get("frames_per_step", 1))

    def probabilities(self, model_output: np.ndarray) -> np.ndarray:
        """P(X'|X) from the model's output: the softmax of eq. 2's logits ("model_output": "logits"),
        or the output itself (bundles that carry the softmax in the graph, schema 1 among them)."""
        if model_output.ndim != 2 or model_output.shape[1] != self.bank_size:
            raise BundleError(f"the model returned shape {model_output.shape}; expected (batch, {self.bank_size}) "
                              "substitution scores, so the model and the bank do not belong together")
        if self.spec.get("model_output") != LOGITS:
            return checked_probabilities(model_output)
        shifted = model_output.astype(np.float64) - model_output.max(axis=1, keepdims=True)
        weights = np.exp(shifted)
        return weights / weights.sum(axis=1, keepdims=True)

    def conditioned(self, probabilities: np.ndarray, known=None) -> np.ndarray:
        """P(X'|X) restricted to the bank entries that share each row's known value (conditioned bundles)."""
        if self.bank_labels is None:
            return probabilities
        return restrict_to_known(probabilities, self.bank_labels, known)

    def needs_draw(self, keys, known=None) -> np.ndarray:
        """bool per row of the next call with these ``keys``: the rows whose model output it uses (HeldDraws)."""
        return self.held.needs_draw(keys, known)

    def __call__(self, model_output: np.ndarray, rng: np.random.Generator, known=None, keys=None,
                 drawn_rows=None) -> np.ndarray:
        """Model output (batch, bank) -> what leaves the device, per the output mode; with ``keys``, a
        key seen before keeps (or walks on through) its substitute (:class:`HeldDraws`). ``drawn_rows``
        (bool per key, from ``needs_draw``): the model ran on those rows only, ``model_output`` is theirs."""
        if drawn_rows is None:
            positions = draw_indices(self.conditioned(self.probabilities(model_output), known), rng)
        else:
            positions = np.full(len(drawn_rows), -1, dtype=np.int64)
            if drawn_rows.any():
                rows_known = None if known is None else np.asarray(known)[drawn_rows]
                positions[drawn_rows] = draw_indices(self.conditioned(self.probabilities(model_output), rows_known),
                                                     rng)
        if keys is not None:
            positions = self.held(positions, keys, known)
        if self.output == "index":
            return positions.astype(self.index_dtype)
        return (self.colour if self.output == "colour" else self.samples)[positions]

    def bytes_per_frame(self, sample_bytes: int) -> dict:
        """Bandwidth of each output mode this bundle can serve, per privatized frame."""
        sizes = {"index": int(self.index_dtype.itemsize)}
        if self.samples_file:
            sizes["sample"] = int(sample_bytes)
        if self.spec.get("bank_colour"):
            sizes["colour"] = 3 * int(sample_bytes)
        return sizes


