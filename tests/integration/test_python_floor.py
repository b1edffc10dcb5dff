"""What runs on the boards (the runtime, the device profiles and the CLI that drives them) must run on
their own Pythons, down to Jetson Nano's 3.6. vermin checks every construct statically; Python 3.6's
dataclasses come from the `dataclasses` backport that setup.cfg installs there."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ON_THE_BOARD = [
    "sensorveil/runtime",
    "sensorveil/devices",
    "sensorveil/benchmarks",
    "sensorveil/cli",
    "sensorveil/__init__.py",
    "sensorveil/__main__.py",
    "sensorveil/sdk/__init__.py", "sensorveil/sdk/threads.py",
    "sensorveil/sdk/mechanisms/__init__.py",
]


@pytest.mark.boots
def test_board_side_code_needs_nothing_newer_than_python_3_6():
    pytest.importorskip("vermin", reason="vermin is not installed (pip install '.[dev]')")
    # vermin has no __main__ module: its console script's entry point is vermin.main
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vermin; sys.exit(vermin.main())",
            "-t=3.6-",
            "--no-tips",
            "--violations",
            "--eval-annotations",
            "--backport",
            "dataclasses",
            *ON_THE_BOARD,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    assert result.returncode == 0, result.stdout


def test_the_floor_is_what_setup_cfg_promises():
    setup = (ROOT / "setup.cfg").read_text()
    assert "python_requires = >=3.6" in setup and 'dataclasses; python_version < "3.7"' in setup
