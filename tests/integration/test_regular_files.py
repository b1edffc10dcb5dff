"""Regular files only wherever a path is read: trusted keys (trusted_keys=[...],
SENSORVEIL_TRUSTED_KEYS, a keys folder), depthdir: entries, --scene-still, and manifest.json / manifest.sig
reached through links. Each is refused in bounded time with one error; a FIFO is never opened to be read.
The FIFO cases run in a child process with a timeout, so a regression hangs the child, not the suite."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sensorveil.runtime import BundleError, Privatizer

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "schema1-prgan-digits-onnx"


def child(code: str, *args: str, env=None, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with this tree first; a wait on a FIFO ends as TimeoutExpired."""
    environment = {key: value for key, value in os.environ.items() if key != "SENSORVEIL_TRUSTED_KEYS"}
    environment.update(env or {})
    environment["PYTHONPATH"] = str(ROOT) + os.pathsep + environment.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code, *args], env=environment, capture_output=True, text=True,
                          timeout=timeout)


LOAD = ("import sys\nfrom sensorveil.runtime import BundleError, Privatizer\n"
        "keys = sys.argv[2:] or None\n"
        "try:\n    Privatizer.load(sys.argv[1], trusted_keys=keys)\n    print('loaded')\n"
        "except BundleError as error:\n    print(type(error).__name__, error)\n")


@pytest.fixture()
def keys(tmp_path):
    from sensorveil.export.signing import generate_key_pair
    return generate_key_pair(tmp_path / "keys")      # (signer.key, signer.pub)


@pytest.mark.parametrize("how", ["argument", "setting", "folder"])
@pytest.mark.boots
def test_a_fifo_as_trusted_key_is_refused_not_waited_on(tmp_path, how):
    folder = tmp_path / "trusted"
    folder.mkdir()
    fifo = folder / "device.pub"
    os.mkfifo(fifo)
    args, env = ((str(fifo),), None) if how == "argument" else \
        ((), {"SENSORVEIL_TRUSTED_KEYS": str(fifo if how == "setting" else folder)})
    done = child(LOAD, str(FIXTURE), *args, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TrustError") and f"{fifo} is a FIFO" in done.stdout, done.stdout
    assert len(done.stdout.strip().splitlines()) == 1


@pytest.mark.boots
def test_a_fifo_among_depth_frames_is_refused_not_waited_on(tmp_path):
    import cv2
    frames = tmp_path / "depth"
    frames.mkdir()
    cv2.imwrite(str(frames / "0000.png"), np.full((8, 8), 1000, np.uint16))
    os.mkfifo(frames / "0001.png")
    code = ("import sys\nfrom sensorveil.runtime.errors import InputError\n"
            "from sensorveil.runtime.sources import parse_source\n"
            "try:\n    source = parse_source(sys.argv[1])\n    source.open()\n    print([f.index for f in source])\n"
            "except InputError as error:\n    print('InputError', error)\n")
    done = child(code, f"depthdir:{frames}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("InputError") and "0001.png is a FIFO" in done.stdout, done.stdout


@pytest.mark.boots
def test_a_depth_frame_swapped_for_a_fifo_after_open_is_a_bad_frame(tmp_path):
    import cv2
    frames = tmp_path / "depth"
    frames.mkdir()
    for index in range(2):
        cv2.imwrite(str(frames / f"{index:04d}.png"), np.full((8, 8), 1000, np.uint16))
    code = ("import os, sys\nfrom sensorveil.runtime.sources import BadFrame, parse_source\n"
            "source = parse_source('depthdir:' + sys.argv[1])\nsource.open()\nprint(source.read().data.shape)\n"
            "os.unlink(sys.argv[1] + '/0001.png')\nos.mkfifo(sys.argv[1] + '/0001.png')\n"   # after the check
            "try:\n    source.read()\nexcept BadFrame as error:\n    print('BadFrame', error)\n")
    done = child(code, str(frames))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "(8, 8)" and lines[1].startswith("BadFrame") and "0001.png is a FIFO" in lines[1], lines


@pytest.mark.boots
def test_a_fifo_as_scene_still_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "still.png"
    os.mkfifo(fifo)
    code = ("import sys\nfrom sensorveil.cli import main\n"
            "sys.exit(main(['run', sys.argv[1], '--source', 'synthetic-depth', '--frames', '1', "
            "'--scene-still', sys.argv[2]]))\n")
    done = child(code, str(FIXTURE), str(fifo))
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip().splitlines()
    assert len(error) == 1 and f"--scene-still {fifo} is a FIFO" in error[0], done.stderr


def signed_copy(tmp_path, key_file) -> Path:
    from sensorveil.export.signing import load_private_key, sign_bundle
    bundle = tmp_path / "signed"
    shutil.copytree(FIXTURE, bundle)
    sign_bundle(bundle, load_private_key(key_file))
    return bundle


@pytest.mark.parametrize("name", ["manifest.json", "manifest.sig"])
def test_a_manifest_or_signature_reached_through_a_link_is_refused(tmp_path, keys, name):
    bundle = signed_copy(tmp_path, keys[0])
    assert Privatizer.load(bundle, trusted_keys=[keys[1]]).signature["status"] == "trusted"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(str(bundle / name), str(outside / name))
    os.symlink(outside / name, bundle / name)
    with pytest.raises(BundleError, match=f"{name} is a symbolic link"):
        Privatizer.load(bundle, trusted_keys=[keys[1]])
    with pytest.raises(BundleError, match=f"{name} is a symbolic link"):
        Privatizer.load(bundle)


def test_a_manifest_linked_from_another_bundle_does_not_speak_for_this_one(tmp_path, keys):
    """A folder of someone else's files whose manifest.json and manifest.sig link to a trusted bundle's."""
    trusted = signed_copy(tmp_path, keys[0])
    impostor = tmp_path / "impostor"
    impostor.mkdir()
    for name in json.loads((trusted / "manifest.json").read_text())["files"]:
        os.link(trusted / name, impostor / name)    # same bytes: only the links differ
    for name in ("manifest.json", "manifest.sig"):
        os.symlink(trusted / name, impostor / name)
    with pytest.raises(BundleError, match="symbolic link"):
        Privatizer.load(impostor, trusted_keys=[keys[1]])
