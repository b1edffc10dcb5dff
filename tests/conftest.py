"""Shared fixtures: tiny but real trained runs and bundles, built once per test session."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("SENSORVEIL_SHARED", Path(__file__).resolve().parents[2] / "shared"))
UJI_ZIP = SHARED / "datasets" / "ujiindoorloc.zip"
VTEST = SHARED / "media" / "vtest.avi"        # a test card: throughput only
WALKWAY = SHARED / "media" / "walkway.avi"    # a real camera clip of people walking: the demo


def load_script(name: str):
    """scripts/NAME.py as a module, for tests of its helpers (scripts are not a package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name + "_script", Path(__file__).resolve().parents[1] / "scripts"
                                                  / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


# -- markers: a test that trains, exports or starts a process says so (setup.cfg's markers), and tests/unit has
# none of them, so `pytest tests/unit` stays the fast subset. The session fixtures train and export once per
# session, so a test that asks for one carries the marker too (alone, it pays for the training).
HEAVY = ("trains", "exports", "boots")
FIXTURE_MARKS = {"digits_run": ("trains",), "digits_bundle": ("trains", "exports"),
                 "depth_bundle": ("trains", "exports")}
UNIT = Path(__file__).parent / "unit"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    wrong = []
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        missing = sorted({m for name, needs in FIXTURE_MARKS.items() if name in getattr(item, "fixturenames", ())
                          for m in needs} - marks)
        if missing:
            wrong.append("{}: uses a session fixture that {} but is not marked {}".format(
                item.nodeid, "/".join(missing), ", ".join(missing)))
        if UNIT in Path(str(item.fspath)).parents and marks & set(HEAVY):
            wrong.append("{}: marked {} but in tests/unit (move it to tests/integration)".format(
                item.nodeid, ", ".join(sorted(marks & set(HEAVY)))))
    if wrong:
        raise pytest.UsageError("test markers:\n  " + "\n  ".join(wrong))


# -- the skip budget: under CI (SENSORVEIL_SKIP_BUDGET=1) a skip fails the run unless skips_allowed.txt
# names its reason, so a missing shared file or install step cannot leave CI green with tests unrun.
SKIPS_ALLOWED = Path(__file__).parent / "skips_allowed.txt"
_skipped = []


def allowed_skip_patterns() -> list:
    lines = [line.split(" | ")[0] for line in SKIPS_ALLOWED.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return [re.compile(pattern) for pattern in lines]


def pytest_runtest_logreport(report):
    # an expected failure (xfail) is reported as skipped but is no skip: it ran and is counted as xfailed
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get("SENSORVEIL_SKIP_BUDGET") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason))


def pytest_sessionfinish(session, exitstatus):
    patterns = allowed_skip_patterns()
    unlisted = [(node, reason) for node, reason in _skipped if not any(p.search(reason) for p in patterns)]
    if unlisted:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join("  {}: {}".format(node, reason) for node, reason in unlisted)
        message = "skip budget: {} skip(s) not on tests/skips_allowed.txt:\n{}".format(len(unlisted), lines)
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
