"""Shared fixtures: tiny but real trained runs and bundles, built once per test session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", Path(__file__).resolve().parents[2] / "shared"))
UJI_ZIP = SHARED / "datasets" / "ujiindoorloc.zip"
VTEST = SHARED / "media" / "vtest.avi"        # a test card: throughput only
WALKWAY = SHARED / "media" / "walkway.avi"    # a real camera clip of people walking: the demo


def tiny_config(**overrides):
    """Seconds-long PR-GAN settings: enough to exercise every code path, not to reach paper figures."""
    from sensorveil.sdk.mechanisms.prgan import PRGANConfig
    settings = dict(epochs=2, classifier_epochs=2, margin_fractions=(0.2,), utility_threshold=0.9, progress=False)
    settings.update(overrides)
    return PRGANConfig(**settings)


def tiny_run(out: Path, dataset: str, **kwargs) -> Path:
    from sensorveil.sdk.runs import train_run
    return train_run("prgan", dataset, out=out, config=tiny_config(), attacker_epochs=1, **kwargs)


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory) -> Path:
    return tiny_run(tmp_path_factory.mktemp("runs") / "prgan-digits", "digits")


@pytest.fixture(scope="session")
def digits_bundle(digits_run, tmp_path_factory) -> Path:
    from sensorveil.export import export_run
    return export_run(digits_run, "onnx", tmp_path_factory.mktemp("bundles") / "prgan-digits")


@pytest.fixture(scope="session")
def depth_bundle(tmp_path_factory) -> Path:
    from sensorveil.export import export_run
    run = tiny_run(tmp_path_factory.mktemp("runs") / "prgan-depth", "synthetic-depth",
                   dataset_options={"n_identities": 3, "samples_per_class": 8})
    return export_run(run, "onnx", tmp_path_factory.mktemp("bundles") / "prgan-depth")


@pytest.fixture(scope="session")
def uji_zip() -> Path:
    if not UJI_ZIP.is_file():
        pytest.skip(f"UJIIndoorLoc zip not found at {UJI_ZIP} (set SENSORVEIL_SHARED)")
    return UJI_ZIP
