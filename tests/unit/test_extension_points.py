"""The extension points are abstract bases: what a new implementation must provide fails at once when it
is missing, and every optional ability is a method with a default, asked the same way of every stage."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from sensorveil.runtime.backends.base import Backend, IOSignature, Port, io_signature_of
from sensorveil.runtime.preprocessor import Preprocessor, name_of
from sensorveil.runtime.stages import Stage


def test_a_mechanism_without_its_bundle_cannot_be_made():
    from sensorveil.sdk.mechanisms.base import Mechanism

    class Half(Mechanism):
        name = "half"

        def train(self, request):
            return {}

        def graphs(self, run_dir, run):
            return {}

    assert inspect.isabstract(Mechanism) and inspect.isabstract(Half)
    with pytest.raises(TypeError, match="bundle"):
        Half()


def test_every_registered_mechanism_implements_the_whole_interface():
    from sensorveil.sdk import mechanisms
    for name in mechanisms.names():
        assert not inspect.isabstract(type(mechanisms.get(name))), name


def test_a_numpy_stage_gets_every_optional_ability_by_default():
    class Double(Stage):
        kind = "double"

        def __call__(self, batch, rng):
            return 2 * batch

    stage = Double({}, None)
    assert stage.apply(np.ones(3), None, known=[1, 2, 3], keys=["a", "b", "c"]).tolist() == [2, 2, 2]
    assert stage.output_mode() == "sample" and stage.conditioned_on() is None
    assert stage.needs_draw(["a"]) is None and stage.describe() == {} and stage.bytes_per_frame(4) is None
    assert inspect.isabstract(Stage)


def test_a_backend_reports_names_and_shapes_as_its_documentation_says():
    signature = io_signature_of([("x", [None, 64])], [("y", (None, 10))])
    assert signature == IOSignature([Port("x", (None, 64))], [Port("y", (None, 10))])
    inputs, outputs = signature          # what the Privatizer's check unpacks
    assert inputs[0].shape == (None, 64) and outputs[0].name == "y"
    assert inspect.isabstract(Backend) and inspect.isabstract(Preprocessor)


def test_a_report_names_no_preprocessor_before_one_is_chosen():
    assert name_of(None) is None


def test_a_declared_preprocessor_is_registered_by_its_manifest_entry_and_defaults_in_one_place():
    """The camera entry is one registered kind: parsed once into CameraSettings, every absent key read as the
    default its settings module names, and an option only it takes refused on a bundle that declares none."""
    from sensorveil.runtime.camera import settings
    from sensorveil.runtime.errors import InputError
    from sensorveil.runtime.preprocessor import DECLARED_KINDS, Declared, check_declared_options, declared_class
    assert inspect.isabstract(Declared) and declared_class("camera") is settings.CameraSettings
    assert set(DECLARED_KINDS) == {settings.ENTRY}
    manifest = {"input": {"sample_shape": [128, 64]}, "artifacts": {}, "pipeline": [{"kind": "model"}],
                "camera": {"frame": settings.FRAME, "detector": settings.DETECTOR_MOTION, "crop_shape": [128, 64]}}
    parsed = settings.CameraSettings.from_manifest(manifest, "bundle")
    assert (parsed.paste, parsed.margin, parsed.detector_score, parsed.detector_every, parsed.motion_scale) == (
        settings.PASTE_WINDOW, settings.CROP_MARGIN, settings.DEFAULT_SCORE, settings.DEFAULT_EVERY,
        settings.MOTION_SCALE)
    assert parsed.crop_shape == settings.CROP_SHAPE and not parsed.prepares_ahead
    with pytest.raises(InputError, match="scene_still applies to camera bundles"):
        check_declared_options(None, {"scene_still": np.zeros((4, 4), np.uint8)})
    with pytest.raises(InputError, match="this bundle's camera paste is 'window'"):
        check_declared_options(parsed, {"scene_still": np.zeros((4, 4), np.uint8)})
