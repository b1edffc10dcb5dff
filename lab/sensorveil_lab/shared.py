"""Where the lab finds the checkout and the shared files beside it (datasets, clips, papers): SENSORVEIL_SHARED,
else ../shared next to the checkout, as the README's set-up puts them."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]   # the checkout (lab/sensorveil_lab/ sits two folders down)
SHARED = Path(os.environ.get("SENSORVEIL_SHARED", REPO.parent / "shared"))
