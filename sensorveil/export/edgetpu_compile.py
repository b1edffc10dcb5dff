"""The Edge TPU compile, at export or afterwards: ``edgetpu_compiler`` on a bundle's int8 model.

At export (tflite_export.py) the compiler runs when it is on PATH and the compiled model is listed in
the manifest. Without it the bundle records that the model is not compiled and the one command that
finishes the job later, on an x86-64 Linux host with the compiler: ``sensorveil devices compile BUNDLE
[--sign KEY]`` (``compile_bundle``), which compiles a copy of the bundle beside it, lists the compiled
file in the manifest, marks the graph compiled, re-signs a signed bundle and renames the copy into place.
Compiling into a bundle by hand instead adds a file the manifest does not list, which the runtime refuses.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sensorveil.runtime.bundle import MANIFEST_NAME, SIGNATURE_NAME, file_record, open_bundle, read_manifest

COMPILER = "edgetpu_compiler"
EDGETPU_SUFFIX = "_edgetpu.tflite"
HEARTBEAT_S = 20.0    # a line at least this often while the compiler works: no silence over 30 s
NOT_INSTALLED = (f"{COMPILER} is not on PATH here; it ships for x86-64 Debian/Ubuntu only (sudo apt-get install "
                 "edgetpu-compiler from Coral's apt repository: docs/guides/deploy-coral.md, step 1)")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def compiler_available() -> bool:
    return shutil.which(COMPILER) is not None


def next_step(bundle_dir) -> str:
    """The command that compiles an exported bundle later, as the manifest records and the export prints it."""
    return f"sensorveil devices compile {shlex.quote(str(bundle_dir))}"


def compiled_name(model_file: str) -> str:
    """model_int8.tflite -> model_int8_edgetpu.tflite, as edgetpu_compiler names its output."""
    return model_file[:-len(".tflite")] + EDGETPU_SUFFIX


def run_compiler(out_dir: Path, model_file: str, log=_stderr) -> "tuple[str, str]":
    """``edgetpu_compiler -s -o OUT OUT/MODEL``: (the compiled file's name, the compiler's summary). A line
    every HEARTBEAT_S seconds while it works; its own log file is removed (it is not part of a bundle)."""
    out_dir = Path(out_dir)
    command = [COMPILER, "-s", "-o", str(out_dir), str(out_dir / model_file)]
    log(f"edgetpu_compiler: compiling {model_file}")
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, universal_newlines=True)
        while True:
            try:
                process.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                log(f"edgetpu_compiler: still compiling {model_file} ({time.monotonic() - started:.0f} s)")
        output.seek(0)
        text = output.read()
    if process.returncode != 0:
        raise RuntimeError(f"edgetpu_compiler failed on {model_file} (exit {process.returncode}): {text[-2000:]}")
    compiled = compiled_name(model_file)
    if not (out_dir / compiled).is_file():
        raise RuntimeError(f"edgetpu_compiler exited 0 but wrote no {compiled} in {out_dir}: {text[-2000:]}")
    (out_dir / (compiled[:-len(".tflite")] + ".log")).unlink(missing_ok=True)
    log(f"edgetpu_compiler: wrote {compiled} in {time.monotonic() - started:.0f} s")
    return compiled, text[-2000:]


def compiled_entry(model_file: str, compiled: str, output: str) -> dict:
    return {"file": compiled, "compiled": True, "compiled_from": model_file, "compiler_output": output}


def uncompiled_entry(model_file: str, bundle_dir) -> dict:
    return {"file": model_file, "compiled": False, "compile_command": next_step(bundle_dir),
            "note": NOT_INSTALLED + "; the command compiles it there, lists the compiled file in the manifest and "
                    "re-signs a signed bundle (--sign KEY)"}


def compile_bundle(bundle_dir, sign_key=None, serial: "int | None" = None, log=_stderr) -> Path:
    """Compile every uncompiled Edge TPU graph of an exported bundle; returns the bundle's path.

    The bundle is verified first, compiled in a copy beside it, its manifest updated (the compiled file
    listed with its sha256, the graph marked compiled), verified again, re-signed with ``sign_key`` when
    given (required for a signed bundle: the new manifest voids the old signature), then renamed into
    place. A compiled file someone wrote into the bundle by hand (unlisted, so refused) is replaced."""
    from sensorveil.export.signing import load_private_key, sign_bundle
    bundle_dir = Path(bundle_dir)
    manifest = read_manifest(bundle_dir)
    pending = _pending_graphs(bundle_dir, manifest)
    if not pending:
        log(f"{bundle_dir}: every Edge TPU graph is compiled already")
        return bundle_dir
    if (bundle_dir / SIGNATURE_NAME).exists() and sign_key is None:
        raise ValueError(f"{bundle_dir} is signed, and compiling changes its manifest, which voids the signature: "
                         "add --sign KEY (the signer.key it was signed with, or another key the devices trust)")
    key = load_private_key(sign_key) if sign_key is not None else None   # a wrong key fails before any work
    if not compiler_available():
        raise ValueError(f"{NOT_INSTALLED}; run `{next_step(bundle_dir)}` on such a host")
    staging = Path(tempfile.mkdtemp(prefix=f".{bundle_dir.name}.compiling-", dir=str(bundle_dir.parent)))
    try:
        work = staging / bundle_dir.name
        stray = {compiled_name(entry["file"]) for entry in pending.values()}
        shutil.copytree(bundle_dir, work, ignore=lambda _, names: [name for name in names if name in stray or
                                                                    name.endswith("_edgetpu.log")])
        (work / SIGNATURE_NAME).unlink(missing_ok=True)
        open_bundle(work)     # every listed file as exported: never compile a tampered model
        for graph, entry in pending.items():
            compiled, output = run_compiler(work, entry["file"], log)
            manifest["artifacts"]["edgetpu"]["graphs"][graph] = compiled_entry(entry["file"], compiled, output)
            manifest["files"][compiled] = file_record(work / compiled)
        for record in manifest.get("validation", []):
            if record.get("backend") == "edgetpu" and record.get("status") == "skipped":
                record["reason"] = "compiled by `sensorveil devices compile`; no Edge TPU here to run it on"
        (work / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2))
        open_bundle(work)
        if key is not None:
            sign_bundle(work, key, serial=serial)
        _swap_into_place(work, bundle_dir, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"{bundle_dir}: compiled for the Edge TPU ({', '.join(sorted(pending))})"
        + (", re-signed (manifest.sig)" if key is not None else ""))
    return bundle_dir


def _pending_graphs(bundle_dir: Path, manifest: dict) -> dict:
    artifact = manifest.get("artifacts", {}).get("edgetpu")
    if artifact is None or "graphs" not in artifact:
        raise ValueError(f"{bundle_dir} has no Edge TPU artifact to compile; export it for the board with "
                         "--target coral-usb (or coral-devboard)")
    return {graph: entry for graph, entry in artifact["graphs"].items() if not entry.get("compiled")}


def _swap_into_place(work: Path, bundle_dir: Path, staging: Path) -> None:
    """The compiled copy takes the bundle's name; the old bundle goes only once the new one is there."""
    old = staging / (bundle_dir.name + ".uncompiled")
    bundle_dir.rename(old)
    try:
        work.rename(bundle_dir)
    except OSError:
        old.rename(bundle_dir)
        raise
