"""What a newcomer tripped on, one test per fix, each run as a user runs it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sensorveil.cli import build_parser, main
from tests.conftest import WALKWAY

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def quick_cli_run(tmp_path_factory):
    """`sensorveil train` with every epoch flag at 1 and a utility threshold digits cannot meet."""
    out = tmp_path_factory.mktemp("runs") / "prgan-quick"
    result = subprocess.run(
        [sys.executable, "-m", "sensorveil", "train",
         "prgan", "--dataset", "digits", "--epochs", "1", "--classifier-epochs", "1", "--attacker-epochs", "1",
         "--set", "margin_fractions=0.2", "utility_threshold=0.999", "progress=false", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    return out, result


@pytest.mark.boots
@pytest.mark.trains
def test_train_epochs_flags_say_what_they_train_and_reach_the_classifiers(quick_cli_run):
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "epochs of the mechanism's own networks only" in help_text
    assert "epochs of the fixed D_y and D_z" in help_text and "--attacker-epochs" in help_text
    out, result = quick_cli_run
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["epochs"] == 1 and config["classifier_epochs"] == 1
    assert "epochs: mechanism networks 1 (--epochs), fixed D_y/D_z 1 (--classifier-epochs), " \
           "probing attackers 1 (--attacker-epochs)" in result.stdout


@pytest.mark.boots
@pytest.mark.trains
def test_train_warns_when_the_utility_threshold_is_not_met(quick_cli_run):
    _, result = quick_cli_run
    assert "warning: the utility threshold was not met: Acc(D_y) on 'parity' reached" in result.stderr
    assert "against 0.999" in result.stderr


@pytest.mark.exports
@pytest.mark.trains
def test_run_on_a_file_shows_progress(depth_bundle, capsys):
    if not WALKWAY.is_file():
        pytest.skip(f"walkway.avi not found at {WALKWAY} (set SENSORVEIL_SHARED)")
    assert main(["run", str(depth_bundle), "--source", str(WALKWAY), "--frames", "30"]) == 0
    err = capsys.readouterr().err
    assert "frames 30/30 (100%)" in err       # of --frames, as the clip holds more


@pytest.mark.exports
@pytest.mark.trains
def test_stream_fractions_are_explained_in_words(depth_bundle, capsys):
    assert main(["run", str(depth_bundle), "--source", "synthetic-depth:1", "--frames", "20"]) == 0
    out = capsys.readouterr().out
    assert "x the model's time (runtime_added_fraction: preprocess + postprocess" in out
    assert not any(line.split()[:1] == ["runtime_added_fraction"] for line in out.splitlines())


def test_evaluate_on_a_corrupt_manifest_names_the_file(tmp_path, capsys):
    bundle = tmp_path / "broken-bundle"
    bundle.mkdir()
    (bundle / "manifest.json").write_text('{"schema_version": 2, "mechanism": ')
    assert main(["evaluate", str(bundle)]) == 2
    err = capsys.readouterr().err
    assert f"{bundle / 'manifest.json'} is not valid JSON" in err and "Traceback" not in err


@pytest.mark.exports
@pytest.mark.trains
def test_empty_npy_source_is_one_clear_error(depth_bundle, tmp_path, capsys):
    empty = tmp_path / "empty.npy"
    np.save(empty, np.zeros((0, 424, 512), np.uint16))
    assert main(["run", str(depth_bundle), "--source", f"npy:{empty}"]) == 2
    err = capsys.readouterr().err
    assert "holds no frames; expected (N, ...) frames with N >= 1" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["devices", "check"], "devices check needs a bundle and a device"),
        (["run", "BUNDLE", "--source", "synthetic-depth", "--frames", "0"], "expected 1 or more"),
        (["train", "prgan", "--dataset", "digits", "--epochs", "-3"], "expected 1 or more"),
        (["benchmark", "/nonexistent-bundle"], "expected a bundle directory"),
        (
            ["preview", "BUNDLE", "--source", "synthetic-depth", "--web", "0", "--out", "x.mp4"],
            "does not take --headless or --out",
        ),
        (["preview", "BUNDLE", "--source", "synthetic-depth", "--no-raw"], "apply to the web preview"),
    ],
)
@pytest.mark.exports
@pytest.mark.trains
def test_usage_errors_exit_2_as_the_readme_promises(argv, expected, depth_bundle, capsys):
    argv = [str(depth_bundle) if arg == "BUNDLE" else arg for arg in argv]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    assert code == 2
    assert expected in capsys.readouterr().err


@pytest.mark.boots
def test_directories_the_readme_creates_are_ignored_by_git():
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    for created in (
        "bundles/prgan-wifi/manifest.json",
        "reports/prgan-wifi.json",
        "runs/x/run.json",
        "test-artifacts/preview.png",
    ):
        result = subprocess.run(["git", "check-ignore", "-q", created], cwd=REPO)
        assert result.returncode == 0, f"{created} is not ignored by git"
