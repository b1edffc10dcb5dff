"""The deploy guides, executed: each guide's bash blocks run as written, off the board, so a guide
and its scripts cannot drift apart. What cannot run here is swapped, never the commands themselves: `scp`
copies into a stand-in home, the board's runtime Python (`~/.sensorveil/bin/...`) is this interpreter, the
camera is synthetic-depth, 300 frames are 20, an int8 export's privacy audit trains its attackers 1 epoch,
and the Edge TPU compiler is a stand-in that copies the model. Lines that install system or workstation
packages (sudo, curl, the .venv's pip) are left out; the set-up scripts are run by their own test below."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GUIDES = REPO / "docs" / "guides"
INSTALL_LINE = re.compile(r"^(echo \"deb |curl |sudo |\s*\| sudo |\.venv/bin/pip )")
SUBSTITUTIONS = (("camera:0 300", "synthetic-depth 20"), ("camera:0", "synthetic-depth"),
                 ("--frames 300", "--frames 20"))
FAKE_COMPILER = """#!/bin/sh
out=""; model=""
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift 2;; -s) shift;; *) model=$1; shift;; esac; done
cp "$model" "$out/$(basename "$model" .tflite)_edgetpu.tflite" && echo "compiled (stand-in copy)"
"""


def guide_blocks(name: str) -> "list[tuple[str, str]]":
    """(the section heading, the block's text) of each ```bash block of docs/guides/NAME.md, in order."""
    heading, blocks, block = "", [], None
    for line in (GUIDES / f"{name}.md").read_text().splitlines():
        if block is not None:
            if line.startswith("```"):
                blocks.append((heading, "\n".join(block)))
                block = None
            else:
                block.append(line)
        elif line.startswith("## "):
            heading = line[3:]
        elif line.startswith("```bash"):
            block = []
    return blocks


def logical_lines(text: str) -> "list[str]":
    """Lines with their backslash continuations joined."""
    return [line for line in re.sub(r"\\\n\s*", " ", text).splitlines() if line.strip()]


def runnable(line: str) -> str:
    for old, new in SUBSTITUTIONS:
        line = line.replace(old, new)
    if line.startswith("sensorveil export") and ("int8" in line or "coral" in line):
        command, _, comment = line.partition("  #")
        line = command.rstrip() + " --int8-attacker-epochs 1" + (f"  #{comment}" if comment else "")
    return line


def guide_script(name: str, workstation: Path, board: Path) -> str:
    """The guide's blocks as one bash script: workstation blocks in the clone, board blocks in ~/sensorveil."""
    parts = ["set -euo pipefail"]
    for heading, text in guide_blocks(name):
        if "devices/setup/" in text:
            continue                               # the set-up script: test_setup_script_in_a_clean_home
        on_board = any(words in heading.lower() for words in ("on the board", "device benchmark"))
        on_board = on_board or "SENSORVEIL_TRUSTED" in text
        on_board = on_board and "scp " not in text
        lines = [runnable(line) for line in logical_lines(text) if not INSTALL_LINE.match(line)]
        parts += [f"cd {board if on_board else workstation}", *lines]
    return "\n".join(parts) + "\n"


def shims(tmp: Path, home: Path) -> Path:
    """`sensorveil` and the board's runtime Python as this interpreter; scp as a copy into ``home``."""
    bin_dir, runtime = tmp / "bin", home / ".sensorveil" / "bin"
    for folder in (bin_dir, runtime):
        folder.mkdir(parents=True)
        (folder / "sensorveil").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m sensorveil "$@"\n')
    (runtime / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "scp").write_text('#!/bin/sh\n[ "$1" = -r ] && shift\nfor last; do :; done\n'
                                 'dest="$HOME/${last#*:}"\nwhile [ $# -gt 1 ]; do cp -r "$1" "$dest"; shift; done\n')
    for path in [*bin_dir.iterdir(), *runtime.iterdir()]:
        path.chmod(0o755)
    return bin_dir


def run_guide(name: str, digits_run: Path, tmp_path: Path, compiler: bool = False) -> "tuple[Path, str]":
    workstation, home = tmp_path / "clone", tmp_path / "home"
    board = home / "sensorveil"
    board.mkdir(parents=True)
    (board / "scripts").symlink_to(REPO / "scripts")
    shutil.copytree(digits_run, workstation / "runs" / "prgan-digits")   # the README's worked example's run
    bin_dir = shims(tmp_path, home)
    if compiler:
        (bin_dir / "edgetpu_compiler").write_text(FAKE_COMPILER)
        (bin_dir / "edgetpu_compiler").chmod(0o755)
    env = {**os.environ, "HOME": str(home), "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("SENSORVEIL_TRUSTED_KEYS", None)
    script = guide_script(name, workstation, board)
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{name}'s commands failed:\n{script}\n{output[-4000:]}"
    return board, " ".join(output.split())


@pytest.mark.guides
@pytest.mark.boots
@pytest.mark.trains
def test_the_raspberry_pi_guide_runs_as_written(digits_run, tmp_path):
    pytest.importorskip("cryptography", reason="the guide signs its bundle (the sign extra)")
    pytest.importorskip("ai_edge_litert", reason="the guide's LiteRT alternative needs the export-tflite extra")
    board, output = run_guide("deploy-raspberry-pi", digits_run, tmp_path)
    assert "bundle signature: trusted" in output and "backend: onnxruntime (auto: running on the CPU)" in output
    assert json.loads((board / "run.json").read_text())["backend"] == "onnxruntime"
    assert list((board / "reports").glob("*.md"))


@pytest.mark.guides
@pytest.mark.boots
@pytest.mark.trains
def test_the_coral_guide_runs_as_written(digits_run, tmp_path):
    pytest.importorskip("cryptography", reason="the guide signs its bundle (the sign extra)")
    pytest.importorskip("ai_edge_litert", reason="the Coral export needs the export-tflite extra")
    board, output = run_guide("deploy-coral", digits_run, tmp_path, compiler=True)
    manifest = json.loads((board / "coral" / "manifest.json").read_text())
    assert manifest["artifacts"]["edgetpu"]["graphs"]["model"]["compiled"] is True    # the compiler ran at export
    assert "bundle signature: trusted" in output
    assert "backend: litert (auto: edgetpu: no Coral Edge TPU detected; running on the CPU)" in output
    report = next((board / "reports").glob("*.md")).read_text()
    assert "Not run: edgetpu" in report


def test_the_guides_use_the_readme_run_and_generate_the_key_they_sign_with():
    readme = (REPO / "README.md").read_text()
    run_dir = re.search(r"sensorveil train prgan .*--out (\S+)", readme).group(1)
    for guide in sorted(GUIDES.glob("deploy-*.md")):
        text = guide.read_text()
        exported = re.findall(r"^sensorveil export (\S+)", text, re.MULTILINE)
        assert exported and set(exported) == {run_dir}, f"{guide.name} exports {set(exported)}, README: {run_dir}"
        if "--sign keys/signer.key" in text:
            assert "sensorveil keys generate --out keys/" in text, f"{guide.name} signs with a key it never makes"


@pytest.mark.parametrize("name", ["deploy-raspberry-pi", "deploy-coral"])
def test_board_commands_use_the_python_their_set_up_script_installs_into(name):
    """rpi5-cpu.sh and coral-usb.sh install into ~/.sensorveil (PEP 668): the guide's board commands use it."""
    script = {"deploy-raspberry-pi": "rpi5-cpu.sh", "deploy-coral": "coral-usb.sh"}[name]
    text = (REPO / "sensorveil" / "devices" / "setup" / script).read_text()
    assert 'python3 -m venv' in text and "--user" not in text and "$HOME/.sensorveil" in text
    for heading, block in guide_blocks(name):
        for line in logical_lines(block):
            if re.match(r"(PYTHON=\S+ )?\S*(python3 -m )?sensorveil (run|benchmark)|.*device_benchmark\.sh", line):
                assert "~/.sensorveil/bin/" in line, f"{name}: {line!r} does not use the script's environment"


@pytest.mark.guides
@pytest.mark.boots
def test_setup_script_in_a_clean_home(tmp_path):
    """rpi5-cpu.sh as a board owner runs it, in an empty home, with pip from this machine's index."""
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "SENSORVEIL_VENV": str(home / ".sensorveil")}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(["bash", str(REPO / "sensorveil" / "devices" / "setup" / "rpi5-cpu.sh")], env=env,
                            capture_output=True, text=True, timeout=900)
    if result.returncode != 0 and "No matching distribution" in result.stdout + result.stderr:
        pytest.skip("no package index reachable for the set-up script's wheels")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    runtime = home / ".sensorveil" / "bin" / "python3"
    check = subprocess.run([str(runtime), "-c", "import sensorveil.runtime, cv2, cryptography, onnxruntime; "
                            "import sys; print('torch' in sys.modules)"], capture_output=True, text=True)
    assert check.stdout.strip() == "False", check.stderr
    assert f"the runtime's Python: {runtime}" in result.stdout
