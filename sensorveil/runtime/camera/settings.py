"""The manifest's ``camera`` entry as one typed object: parsed once, validated once, every default here.

A camera bundle (one trained on people crops) declares how frames become its samples in its manifest's
``camera`` entry. ``CameraSettings.from_manifest`` reads that entry against the rest of the manifest (the
detector graph in every artifact, the crop shape against the input, the paste mode against the bank), raises
the runtime's one ``ManifestError`` naming the field, its value and what was expected, and holds the result;
the camera pipeline (``PersonCrops``), the learned detector and the stream read these attributes, never the
dict. A key absent from the entry means the default named below, in this module alone.

Runs on the boards' own Python (3.6): no annotations import, no walrus, no dataclasses.
"""
import numpy as np

from sensorveil.runtime.errors import InputError
from sensorveil.runtime.manifest_fields import ManifestError, describe, fail, graphs_of, need_object, pipeline_of
from sensorveil.runtime.preprocessor import Declared

ENTRY = "camera"                    # the manifest's key for this entry
FRAME = "person-crops"              # camera.frame: a frame's people are the bundle's samples
DETECTOR_MOTION = "motion"          # camera.detector: the motion detector alone
DETECTOR_KIND = "ssdlite+motion"    # camera.detector: the learned detector (a bundle graph) with motion beside it
DETECTORS = (DETECTOR_MOTION, DETECTOR_KIND)
DETECTOR_GRAPH = "person-detector"  # the bundle graph the learned detector runs
COCO_PERSON = 1                     # the COCO class id of a person

# camera.paste: "window" pastes each privatized crop over its whole window; "cut-out" pastes the people a
# substitution bank holds cut out of their crops (0 = not the person) on the quiet scene
PASTE_WINDOW = "window"
PASTE_CUT_OUT = "cut-out"
PASTE_MODES = (PASTE_WINDOW, PASTE_CUT_OUT)

# -- the defaults of the keys a manifest may leave out, and the ranges in which each still protects
DEFAULT_PASTE = PASTE_WINDOW
DEFAULT_SCORE = 0.3                 # the score from which a learned box counts as a person
SCORE_RANGE = (0.05, 0.7)           # the thresholds a manifest may set; a higher one would all but blind the graph
DEFAULT_EVERY = 1                   # run the graph on every frame unless the manifest says otherwise
EVERY_RANGE = (1, 10)
# rows of smaller square tiles the graph also sees (learned.detector_tiles): 1, the frame's own square tiles
# alone; 2 adds two rows of tiles, so a small or distant person fills more of the graph's input. The export
# chooses it per camera (sensorveil.export.person_detector.camera_fit); a bundle without the key runs 1, as
# every bundle before it did
DEFAULT_TILE_ROWS = 1
TILE_ROWS_RANGE = (1, 2)
# the tallest a learned box found below DEFAULT_SCORE may be, as a share of the frame's height: at the low
# thresholds a camera of small people is fitted to, the graph also answers with boxes several people tall over
# groups and empty ground. The export sets it from the tallest people on the training part (camera_fit); a box
# taller than it still counts from DEFAULT_SCORE up, so a person nearer the camera than any in training is found
# as at the first setting. 1 (the default): no cap. Only where the graph runs at camera.detector_score: a
# quantized graph with its own threshold scores on another scale, so it runs with no cap
DEFAULT_TALLEST = 1.0
TALLEST_RANGE = (0.05, 1.0)
# motion beside the graph sees the frame at half size: a quarter of its background model's pixels, the same
# people found (docs/decisions/0008-motion-half-size.md, scripts/motion_scale.py)
MOTION_SCALE = 0.5
# the scales a manifest's camera.motion_scale may set: down to a quarter motion still finds about as many people
# beside the graph (docs/decisions/0012-camera-speed-preset.md); below it a walker is a few pixels of its model
MOTION_SCALE_RANGE = (0.25, 1.0)
CROP_SHAPE = (128, 64)              # (height, width) of a person crop: the bundle's sample shape
CROP_MARGIN = 0.15                  # each side of a person's box grows by this share before cropping
MARGIN_RANGE = (0, 2)
CROP_EVERY = 1                      # the training clip's crop stride (the sdk's; the device does not read it)

# the detector graph entry's own threshold: a quantized graph scores people lower than fp32, so its export
# matches it to the fp32 graph's people at camera.detector_score (sensorveil.export.person_detector.onnx_int8)
GRAPH_SCORE_KEY = "score"
ANCHORS_KEY = "anchors"             # the detector graph entry's field naming its anchors file (the third form)
ANCHORS_SUFFIX = ".npy"


def is_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float))


class CameraSettings(Declared):
    """What a camera bundle's frames go through, as the manifest's ``camera`` entry says (defaults filled in):
    the pre-processor it declares (registered in runtime.preprocessor.DECLARED_KINDS).

    ``detector_score`` is the threshold the loaded detector graph runs with: camera.detector_score, or the
    graph entry's own lower ``score`` once ``for_graph`` has bound it to the backend's graph."""

    OPTIONS = {"scene_still": "camera bundles that release a scene (camera paste {!r})".format(PASTE_CUT_OUT)}
    # the pipeline's background model is updated by the next frame's detection while ``restore`` pastes onto
    # it, so camera frames are prepared one at a time
    prepares_ahead = False

    __slots__ = ("frame", "detector", "detector_graph", "detector_score", "detector_every", "detector_tile_rows",
                 "detector_tallest", "motion_scale", "detector_person_class", "crop_shape", "paste", "margin",
                 "crop_every")

    def __init__(self, crop_shape=CROP_SHAPE, detector=DETECTOR_MOTION, detector_graph=None,
                 detector_score=DEFAULT_SCORE, detector_every=DEFAULT_EVERY, detector_tile_rows=DEFAULT_TILE_ROWS,
                 detector_tallest=DEFAULT_TALLEST, motion_scale=MOTION_SCALE, detector_person_class=COCO_PERSON,
                 paste=DEFAULT_PASTE, margin=CROP_MARGIN, crop_every=CROP_EVERY, frame=FRAME):
        self.frame, self.detector, self.detector_graph = frame, detector, detector_graph
        self.detector_score, self.detector_every = detector_score, detector_every
        self.detector_tile_rows, self.detector_tallest = detector_tile_rows, detector_tallest
        self.motion_scale, self.detector_person_class = motion_scale, detector_person_class
        # a crop shape is checked against the input's (check_manifest), so it is kept as given until then
        self.crop_shape = tuple(crop_shape) if isinstance(crop_shape, (list, tuple)) else crop_shape
        self.paste, self.margin, self.crop_every = paste, margin, crop_every

    # -- reading the entry -------------------------------------------------------------------------
    @classmethod
    def from_entry(cls, entry, where=ENTRY):
        """The entry's own fields, checked: for an entry given by hand (tests, tools) and as the first half of
        ``from_manifest``. Raises one ManifestError naming the field."""
        need_object(where, ENTRY, entry, ("frame", "detector", "crop_shape"))
        if entry["frame"] != FRAME:
            fail(where, "camera.frame", entry["frame"], repr(FRAME))
        if entry["detector"] not in DETECTORS:
            fail(where, "camera.detector", entry["detector"], "{!r} or {!r}".format(*DETECTORS))
        settings = cls(**{key: entry[key] for key in cls.__slots__ if key in entry})
        settings.check_fields(lambda field, value, expected: fail(where, field, value, expected))
        return settings

    @classmethod
    def from_manifest(cls, manifest, where):
        """The entry against the rest of the manifest, or None for a bundle without one."""
        if ENTRY not in manifest:
            return None
        settings = cls.from_entry(manifest[ENTRY], where)
        settings.check_manifest(manifest, lambda field, value, expected: fail(where, field, value, expected))
        return settings

    def check_fields(self, fail):
        """The learned detector's fields, each in the range where it still finds people (a motion-only
        entry's are never read); ``fail(field, value, expected)`` raises the manifest's one error."""
        if not self.learned:
            return
        if self.detector_graph != DETECTOR_GRAPH:
            fail("camera.detector_graph", self.detector_graph, repr(DETECTOR_GRAPH))
        if not is_number(self.detector_score) or not SCORE_RANGE[0] <= self.detector_score <= SCORE_RANGE[1]:
            fail("camera.detector_score", self.detector_score, "a number from {} to {}".format(*SCORE_RANGE))
        every = self.detector_every
        if isinstance(every, bool) or not isinstance(every, int) or not EVERY_RANGE[0] <= every <= EVERY_RANGE[1]:
            fail("camera.detector_every", every, "a whole number from {} to {}".format(*EVERY_RANGE))
        rows = self.detector_tile_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or not TILE_ROWS_RANGE[0] <= rows <= TILE_ROWS_RANGE[1]:
            fail("camera.detector_tile_rows", rows, "a whole number from {} to {}".format(*TILE_ROWS_RANGE))
        if not is_number(self.detector_tallest) or not TALLEST_RANGE[0] <= self.detector_tallest <= TALLEST_RANGE[1]:
            fail("camera.detector_tallest", self.detector_tallest,
                 "a share of the frame's height from {} to {}".format(*TALLEST_RANGE))
        if not is_number(self.motion_scale) or not MOTION_SCALE_RANGE[0] <= self.motion_scale <= MOTION_SCALE_RANGE[1]:
            fail("camera.motion_scale", self.motion_scale, "a number from {} to {}".format(*MOTION_SCALE_RANGE))
        if self.detector_person_class != COCO_PERSON:
            fail("camera.detector_person_class", self.detector_person_class, "{} (COCO's person)".format(COCO_PERSON))

    def check_manifest(self, manifest, fail):
        """The entry against the manifest it sits in: the detector graph in every artifact, crops of the input's
        sample shape, a paste mode that fits the bank, a margin in range."""
        if self.learned:
            self.check_detector_graphs(manifest, fail)
        if not isinstance(self.crop_shape, tuple) or list(self.crop_shape) != manifest["input"]["sample_shape"]:
            fail("camera.crop_shape", manifest[ENTRY]["crop_shape"],
                 "the input's sample_shape {}".format(manifest["input"]["sample_shape"]))
        self.check_paste(manifest, fail)
        if not is_number(self.margin) or not MARGIN_RANGE[0] <= self.margin <= MARGIN_RANGE[1]:
            fail("camera.margin", self.margin, "a number from {} to {}".format(*MARGIN_RANGE))

    def check_detector_graphs(self, manifest, fail):
        """Every artifact carries the learned detector's graph, and its entry's own fields are in range."""
        for backend, artifact in manifest["artifacts"].items():
            graphs = graphs_of(artifact)
            if DETECTOR_GRAPH not in graphs:
                fail("artifacts.{}.graphs".format(backend), sorted(graphs),
                     "a {!r} graph (camera.detector is {!r})".format(DETECTOR_GRAPH, DETECTOR_KIND))
            check_graph_entry(graphs[DETECTOR_GRAPH], manifest.get("files", {}),
                              "artifacts.{}.graphs.{}".format(backend, DETECTOR_GRAPH), fail, self.detector_score)

    def check_paste(self, manifest, fail):
        """A known paste mode, and the one the bank fits: a bank of cut-out people pasted as windows would paste
        their black surroundings, and a window mechanism's crops are no cut-outs; either mismatch is an edited
        file."""
        if self.paste not in PASTE_MODES:
            fail("camera.paste", self.paste, "{!r} (the default) or {!r}".format(*PASTE_MODES))
        stages = manifest.get("pipeline", [])
        cut_out = any(isinstance(stage, dict) and stage.get("cut_out") is True for stage in stages)
        if cut_out != self.cuts_out:
            expected = "{!r} for a bank of cut-out people".format(PASTE_CUT_OUT) if cut_out else \
                "{!r} for crops that are not cut-outs".format(PASTE_WINDOW)
            fail("camera.paste", manifest[ENTRY].get("paste"), expected)

    # -- what the device runs ----------------------------------------------------------------------
    @property
    def cuts_out(self):
        """Whether the release pastes cut-out people on the quiet scene (rather than whole windows)."""
        return self.paste == PASTE_CUT_OUT

    @property
    def learned(self):
        """Whether the learned detector (a bundle graph) finds the people, with motion beside it."""
        return self.detector == DETECTOR_KIND

    def for_graph(self, entry):
        """These settings as the loaded backend's detector graph runs them: its entry's own ``score``
        (checked by check_graph_entry) in place of camera.detector_score where it has one, and then no cap on
        tall boxes (DEFAULT_TALLEST)."""
        if not self.learned or entry is None or GRAPH_SCORE_KEY not in entry:
            return self
        bound = self.copy()
        bound.detector_score, bound.detector_tallest = entry[GRAPH_SCORE_KEY], DEFAULT_TALLEST
        return bound

    def for_graphs(self, bundle, backend):
        if not self.learned or self.detector_graph not in bundle.graph_names(backend):
            return self
        return self.for_graph(bundle.graph_artifact(backend, self.detector_graph))

    def takes(self, frame):
        """Camera frames: 8-bit grey or colour images (a frame of the bundle's sample shape passes through)."""
        return frame.data.dtype == np.uint8 and frame.data.ndim in (2, 3)

    def make(self, run_graph, scene_still=None):
        from sensorveil.runtime.camera.pipeline import person_crops_from_manifest  # it imports this module
        return person_crops_from_manifest(self, run_graph, scene_still)

    def stream_output(self, manifest):
        """"colour" where the bank's people also come in colour (its draw stage's ``bank_colour``): the camera
        release pastes them in colour."""
        return "colour" if any(stage.get("bank_colour") for stage in pipeline_of(manifest)) else None

    def check_options(self, options):
        if options.get("scene_still") is not None:
            options = dict(options, scene_still=self.checked_scene_still(options["scene_still"]))
        return options

    def checked_scene_still(self, still):
        """The operator's picture of the empty place, where a release of the quiet scene (cut-out paste) starts;
        on a window paste it would change nothing, so it is refused rather than silently ignored."""
        if not self.cuts_out:
            raise InputError("scene_still applies to {}; this bundle's camera paste is {!r}".format(
                self.OPTIONS["scene_still"], self.paste))
        still = np.asarray(still)
        if still.dtype != np.uint8 or still.ndim not in (2, 3):
            raise InputError("scene_still of {} {}; expected uint8 HxW or HxWx3 like the camera's frames".format(
                still.dtype, still.shape))
        return still.copy()   # the caller's array may change later; the released scene must not change with it

    def copy(self):
        return CameraSettings(**{key: getattr(self, key) for key in self.__slots__})

    def as_dict(self):
        """Every field with its default filled in, for reports."""
        return {key: list(value) if key == "crop_shape" else value
                for key, value in ((key, getattr(self, key)) for key in self.__slots__)}

    def __repr__(self):
        return "CameraSettings({})".format(", ".join(
            "{}={}".format(key, describe(getattr(self, key))) for key in self.__slots__))


def check_graph_entry(entry, files, path, fail, camera_score=DEFAULT_SCORE):
    """The detector graph entry's optional ``anchors``: a listed (so hashed and verified) .npy file; its
    optional ``score``: in SCORE_RANGE and no higher than ``camera_score`` (camera.detector_score), since it
    only ever lowers the threshold to find the people a quantized graph scores lower."""
    if GRAPH_SCORE_KEY in entry:
        score = entry[GRAPH_SCORE_KEY]
        if not is_number(score) or not SCORE_RANGE[0] <= score <= min(SCORE_RANGE[1], camera_score):
            fail(path + "." + GRAPH_SCORE_KEY, score, "a number from {} to camera.detector_score ({})".format(
                SCORE_RANGE[0], camera_score))
    if ANCHORS_KEY not in entry:
        return
    name = entry[ANCHORS_KEY]
    if not isinstance(name, str) or not name.endswith(ANCHORS_SUFFIX) or name not in files:
        fail(path + "." + ANCHORS_KEY, name, "a {} file listed in 'files' (so its sha256 is checked)".format(
            ANCHORS_SUFFIX))


__all__ = ["CameraSettings", "ManifestError", "check_graph_entry"]
