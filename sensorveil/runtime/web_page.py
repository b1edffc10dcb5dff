"""The web preview's page and the bundle's audited figures it shows.

The page's HTML, CSS and JS live in ``web/preview.html`` (package data), read with
``pkgutil.get_data``, which works on every Python the boards run (3.6 and up). ``{{name}}``
marks where a value goes; every value is escaped here before it is put in.
"""
import html
import json
import pkgutil
import re

from sensorveil.runtime.stream import STAGES
from sensorveil.runtime.web_feed import COUNTER_KEYS, PANEL_PX, LiveFeed

BOUNDARY = "sensorveil-frame"
PAGE_FILE = "web/preview.html"
_FIELD = re.compile(r"\{\{(\w+)\}\}")

FIGURES = (   # manifest metrics key, label; a missing key is left out of the page
    ("probing_acc_private", "probing attacker on the private attribute"),
    ("tree_acc_private", "tree attacker on the private attribute"),
    ("random_star", "Random* (best guess from the prior)"),
    ("protocol_acc_private", "fixed D_z on privatized output (paper protocol)"),
    ("original_acc_private", "fixed D_z on raw data"),
    ("probing_acc_useful", "utility probe on the useful attribute"),
    ("protocol_acc_useful", "fixed D_y on privatized output (paper protocol)"),
    ("utility_threshold", "utility threshold Acc(D_y)"),
)


def privacy_figures(manifest: dict) -> dict:
    """What the page and /api/bundle show: the manifest's measured figures, never recomputed here."""
    mechanism = manifest.get("mechanism", {})
    metrics = manifest.get("metrics", {}) or {}
    figures = [{"key": key, "label": label, "value": metrics[key]} for key, label in FIGURES
               if isinstance(metrics.get(key), (int, float))]
    validation = [{key: record.get(key) for key in ("backend", "graph", "precision", "status")}
                  for record in manifest.get("validation", [])]
    return {"mechanism": mechanism.get("name"), "kind": mechanism.get("kind"),
            "useful": mechanism.get("useful"), "private": mechanism.get("private"),
            "dataset": (manifest.get("dataset") or {}).get("name"), "figures": figures,
            "threshold_met": metrics.get("threshold_met"), "validation": validation}


def page_template() -> str:
    data = pkgutil.get_data("sensorveil.runtime", PAGE_FILE)
    if data is None:   # a loader that cannot read package data: an install without the page file
        raise FileNotFoundError(f"sensorveil.runtime/{PAGE_FILE} is missing from this installation")
    return data.decode("utf-8")


def fill(template: str, values: dict) -> str:
    """Put each ``{{name}}``'s value in; a name without a value is an error, not an empty string."""
    return _FIELD.sub(lambda match: str(values[match.group(1)]), template)


def _percent(value) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, (int, float)) else "-"


def _figure_rows(figures: dict) -> str:
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(f['label'])}</td><td class=num>{_percent(f['value'])}</td></tr>"
                   for f in figures["figures"])
    signature = figures.get("signature") or {}
    rows += f"<tr><td>bundle signature</td><td class=num>{esc(str(signature.get('status', '-')))}</td></tr>"
    met = figures["threshold_met"]
    if met is not None:
        rows += f"<tr><td>utility threshold met</td><td class=num>{'yes' if met else 'NO'}</td></tr>"
    return rows


def render_page(figures: dict, feed: LiveFeed) -> str:
    """One self-contained page (no external scripts or fonts: boards are often offline)."""
    esc = html.escape
    attrs = lambda value: ", ".join(value) if isinstance(value, list) else str(value)  # noqa: E731
    rows = _figure_rows(figures)
    checks = "".join(f"<li>{esc(str(r['backend']))} {esc(str(r['precision']))}: {esc(str(r['status']))}</li>"
                     for r in figures["validation"]) or "<li>none recorded</li>"
    stage_rows = "".join(f"<tr><td>{stage} ms (p50)</td><td class=num id=stage-{stage}>-</td></tr>"
                         for stage in STAGES)
    counter_rows = "".join(f"<tr><td>{key.replace('_', ' ')}</td><td class=num id=count-{key}>-</td></tr>"
                           for key in ("fps",) + COUNTER_KEYS)
    return fill(page_template(), dict(
        mechanism=esc(str(figures["mechanism"])), dataset=esc(str(figures["dataset"])),
        useful=esc(attrs(figures["useful"])), private=esc(attrs(figures["private"])),
        figure_rows=rows or "<tr><td colspan=2>the manifest records no privacy figures</td></tr>",
        checks=checks, counter_rows=counter_rows, stage_rows=stage_rows, boundary=BOUNDARY, panel=PANEL_PX,
        raw_display="" if feed.raw_enabled else "none",
        raw_src='src="stream/raw.mjpg"' if feed.raw_enabled else "", off_display="none" if feed.raw_enabled else "",
        initial=json.dumps({"raw_enabled": feed.raw_enabled, "raw_locked": feed.raw_locked})))
