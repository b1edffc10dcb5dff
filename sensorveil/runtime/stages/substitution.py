"""PASS's last step on the device: draw the substitute x' ~ P(X'|X=x) in numpy (PASS Algorithm 2,
line 4) and emit it in the bundle's output mode.

The exported model stops at eq. 2's logits (older bundles: at the probabilities P(X'|X)); the
softmax and the sampling happen here, so the randomness comes from the runtime's numpy Generator
(OS entropy unless the caller passes a seed), never from a value baked into a model file.

Output modes (``Privatizer.load(bundle, output=...)``):

* ``index``:  only the position of the substitute in the bank leaves the device (the server holds
              the bank; ``bank_indices.npy`` maps positions to rows of the training dataset).
* ``sample``: the substitute sample itself, in sensor units (needs ``substitutes.npy`` in the bundle).

A conditioned bundle (manifest ``condition``: an attribute and each bank entry's value of it) draws
each substitute among the bank entries that share what the device already knows about the sample
(``known``: e.g. the walking direction a camera's tracker measured), P(X'|X) renormalized over them:
the published value then holds by construction, and PASS's learned distribution only chooses among
people who walk the same way. A row whose value is unknown (-1) draws from the whole bank.
"""
import numpy as np

from sensorveil.runtime.errors import BundleError, InputError
from sensorveil.runtime.stages.base import BANK_INDEX, SENSOR_UNITS, Stage

KIND = "substitution"
OUTPUT_MODES = ("index", "sample")


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


class SubstitutionStage(Stage):
    """``{"kind": "substitution", "bank_size", "bank_indices", "bank_samples", "output_default"}``:
    the previous stage's P(X'|X) in, the drawn substitute (or its bank position) out."""

    kind = KIND
    output_modes = OUTPUT_MODES
    uses_known = True

    def __init__(self, spec, context):
        Stage.__init__(self, spec, context)
        root = context.bundle.root
        self.bank_size = int(self.require("bank_size"))
        self.samples_file = spec.get("bank_samples")
        self.output = context.output or spec.get("output_default", "sample" if self.samples_file else "index")
        if self.output not in OUTPUT_MODES:
            raise InputError(f"unknown output mode {self.output!r}; expected one of {list(OUTPUT_MODES)}")
        self.emits = BANK_INDEX if self.output == "index" else SENSOR_UNITS
        self.bank_indices = context.array(self.require("bank_indices"))
        if self.bank_indices.shape != (self.bank_size,):
            raise BundleError(f"{root}: {spec['bank_indices']} has shape {self.bank_indices.shape}; "
                              f"expected ({self.bank_size},)")
        self.samples = None
        if self.output == "sample":
            if not self.samples_file:
                raise BundleError(f"{root} carries no substitute samples, so output='sample' is not "
                                  "possible; use output='index' (the server maps indices to its bank) or "
                                  "re-export with the substitute samples included")
            self.samples = context.array(self.samples_file)
            if len(self.samples) != self.bank_size:
                raise BundleError(f"{root}: {self.samples_file} holds {len(self.samples)} samples; "
                                  f"expected {self.bank_size}")
        self.index_dtype = index_dtype(self.bank_size)
        condition = spec.get("condition") or {}
        self.condition = condition.get("attribute")          # None: an unconditioned bundle
        self.bank_labels = None
        if self.condition is not None:
            self.bank_labels = context.array(condition["bank_labels"]).astype(np.int64)
            if self.bank_labels.shape != (self.bank_size,):
                raise BundleError(f"{root}: {condition['bank_labels']} has shape {self.bank_labels.shape}; "
                                  f"expected ({self.bank_size},)")

    def probabilities(self, model_output: np.ndarray) -> np.ndarray:
        """P(X'|X) from the model's output: the softmax of eq. 2's logits ("model_output": "logits"),
        or the output itself (bundles that carry the softmax in the graph, schema 1 among them)."""
        if model_output.ndim != 2 or model_output.shape[1] != self.bank_size:
            raise BundleError(f"the model returned shape {model_output.shape}; expected (batch, {self.bank_size}) "
                              "substitution scores, so the model and the bank do not belong together")
        if self.spec.get("model_output") != "logits":
            return model_output
        shifted = model_output.astype(np.float64) - model_output.max(axis=1, keepdims=True)
        weights = np.exp(shifted)
        return weights / weights.sum(axis=1, keepdims=True)

    def conditioned(self, probabilities: np.ndarray, known=None) -> np.ndarray:
        """P(X'|X) restricted to the bank entries that share each row's known value (conditioned bundles)."""
        if self.bank_labels is None:
            return probabilities
        return restrict_to_known(probabilities, self.bank_labels, known)

    def __call__(self, model_output: np.ndarray, rng: np.random.Generator, known=None) -> np.ndarray:
        """Model output (batch, bank) -> what leaves the device, per the output mode."""
        positions = draw_indices(self.conditioned(self.probabilities(model_output), known), rng)
        if self.output == "index":
            return positions.astype(self.index_dtype)
        return self.samples[positions]

    def bytes_per_frame(self, sample_bytes: int) -> dict:
        """Bandwidth of each output mode this bundle can serve, per privatized frame."""
        sizes = {"index": int(self.index_dtype.itemsize)}
        if self.samples_file:
            sizes["sample"] = int(sample_bytes)
        return sizes


