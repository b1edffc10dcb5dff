"""Device profiles (data files) and detection. Imports nothing from sdk, export, runtime or torch.

    from sensorveil.devices import load_profile, list_profiles, detect
    load_profile("coral-usb")["backend"]     # 'edgetpu'
    detect()                                  # profiles matching this machine, best first

Each profile in ``profiles/NAME.json`` names its backend, format and precision, input
constraints, the Python and library versions it needs, its set-up script (``setup/NAME.sh``),
the operator list its static check uses (``operators/*.json``, each with its source) and
published reference throughput figures, used only for labelled estimates.
"""
import json
from functools import lru_cache
from pathlib import Path

from sensorveil.devices.detect import detect, detection_evidence

HERE = Path(__file__).resolve().parent
PROFILE_DIR = HERE / "profiles"
SETUP_DIR = HERE / "setup"
OPERATOR_DIR = HERE / "operators"


class UnknownDeviceError(ValueError):
    """A device name that has no profile."""


def list_profiles() -> "list[str]":
    return sorted(path.stem for path in PROFILE_DIR.glob("*.json"))


@lru_cache(maxsize=None)
def _read_profile(name: str) -> dict:
    path = PROFILE_DIR / f"{name}.json"
    if not path.is_file():
        raise UnknownDeviceError(f"unknown device {name!r}; expected one of: {', '.join(list_profiles())}")
    return json.loads(path.read_text())


def load_profile(name: str) -> dict:
    return dict(_read_profile(name))


def setup_script(name: str) -> Path:
    """The set-up script of a profile, as a path inside the installed package."""
    return HERE / load_profile(name)["setup_script"]


def operator_list(name: str) -> "dict | None":
    """The operator data file a profile's static check uses, or None (no restriction)."""
    file = load_profile(name).get("operators")
    return json.loads((OPERATOR_DIR / file).read_text()) if file else None


def profiles_for_backend(backend: str) -> "list[str]":
    return [name for name in list_profiles() if load_profile(name)["backend"] == backend]


__all__ = ["list_profiles", "load_profile", "setup_script", "operator_list", "profiles_for_backend", "detect",
           "detection_evidence", "UnknownDeviceError"]
