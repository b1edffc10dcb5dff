"""Bundles written by earlier releases keep loading and privatize exactly as they did.

The fixtures under tests/fixtures were exported by sensorveil 0.1.0 (manifest schema 1, before
mechanisms became pipelines of stages) from tiny digits runs; schema1-expected.npz holds the outputs
that release's runtime produced for six digits (PASS with seed 0)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sensorveil.runtime import Privatizer

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture(scope="module")
def expected():
    return np.load(FIXTURES / "schema1-expected.npz")


def test_schema1_prgan_bundle_loads_and_matches(expected):
    p = Privatizer.load(FIXTURES / "schema1-prgan-digits-onnx", backend="onnxruntime")
    assert p.manifest["schema_version"] == 1
    np.testing.assert_allclose(p(expected["x"]), expected["prgan"], atol=1e-5)


@pytest.mark.parametrize("output", ["index", "sample"])
def test_schema1_pass_bundle_loads_and_draws_the_same(expected, output):
    p = Privatizer.load(FIXTURES / "schema1-pass-digits-onnx", backend="onnxruntime", seed=0, output=output)
    np.testing.assert_array_equal(p(expected["x"]), expected[f"pass_{output}"])
    assert set(p.bytes_per_frame()) == {"index", "sample"}
