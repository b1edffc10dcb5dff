"""Which device profile does this machine match? Evidence first, then the match.

Evidence comes from files and tools every board has: /proc/device-tree/model (Raspberry Pi,
Jetson, Coral Dev Board), /etc/nv_tegra_release (Jetson), USB vendor:product ids from sysfs
or `lsusb` (NCS2 03e7:2485 / 03e7:f63b, Coral USB 1a6e:089a / 18d1:9302), `nvidia-smi -L`
(discrete NVIDIA GPUs) and the CPU architecture.
"""
import platform
import shutil
import subprocess
from pathlib import Path

DEVICE_TREE_MODEL = Path("/proc/device-tree/model")
TEGRA_RELEASE = Path("/etc/nv_tegra_release")
USB_SYSFS = Path("/sys/bus/usb/devices")
# An accelerator plugged in says more about where inference runs than the host board does.
PRIORITY = ("usb_ids", "device_tree_model", "nvidia_smi", "machine")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace").replace("\x00", "").strip()
    except OSError:
        return ""


def usb_ids() -> "list[str]":
    """vendor:product of every USB device, from sysfs (no tools needed), else from lsusb."""
    ids = []
    if USB_SYSFS.is_dir():
        for device in USB_SYSFS.iterdir():
            vendor, product = _read_text(device / "idVendor"), _read_text(device / "idProduct")
            if vendor and product:
                ids.append(f"{vendor}:{product}".lower())
    if not ids and shutil.which("lsusb"):
        out = _run(["lsusb"])
        ids = [word.lower() for line in out.splitlines() for word in line.split() if len(word) == 9 and word[4] == ":"]
    return sorted(set(ids))


def _run(command: "list[str]") -> str:
    try:
        return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def nvidia_gpus() -> "list[str]":
    if not shutil.which("nvidia-smi"):
        return []
    return [line.strip() for line in _run(["nvidia-smi", "-L"]).splitlines() if line.startswith("GPU")]


def detection_evidence() -> dict:
    return {"device_tree_model": _read_text(DEVICE_TREE_MODEL), "tegra_release": _read_text(TEGRA_RELEASE),
            "usb_ids": usb_ids(), "nvidia_smi": nvidia_gpus(), "machine": platform.machine()}


def _matches(rules: dict, evidence: dict) -> "list[str]":
    """The evidence keys a profile's detection rules are satisfied by (empty: no match)."""
    hits = []
    model = evidence["device_tree_model"]
    if any(pattern in model for pattern in rules.get("device_tree_model", ())):
        if not rules.get("tegra_release") or evidence["tegra_release"] or "Jetson" in model or "Orin" in model:
            hits.append("device_tree_model")
    if set(rules.get("usb_ids", ())) & set(evidence["usb_ids"]):
        hits.append("usb_ids")
    if rules.get("nvidia_smi") and evidence["nvidia_smi"] and not evidence["tegra_release"]:
        hits.append("nvidia_smi")
    if evidence["machine"] in rules.get("machine", ()):
        hits.append("machine")
    return hits


def detect(evidence: "dict | None" = None) -> "list[dict]":
    """Profiles this machine matches, best first: [{'name', 'matched_by'}]. A Raspberry Pi with
    an NCS2 plugged in matches rpi*-ncs2 only when the stick is present (both rules must hold)."""
    from sensorveil.devices import list_profiles, load_profile
    evidence = evidence if evidence is not None else detection_evidence()
    found = []
    for name in list_profiles():
        rules = load_profile(name).get("detect", {})
        hits = _matches(rules, evidence)
        required = [key for key in ("device_tree_model", "usb_ids") if key in rules]
        if hits and all(key in hits for key in required):
            found.append({"name": name, "matched_by": hits})
    return sorted(found, key=lambda match: min(PRIORITY.index(key) for key in match["matched_by"]))
