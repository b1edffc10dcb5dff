"""What each board would reach running the camera bundle's learned person detector: ESTIMATES from each
board's published figure for a similar detector, scaled by FLOPs; nothing here is measured on a board.

    python scripts/board_estimates.py                  # writes docs/board_estimates.{md,json}
    python scripts/board_estimates.py --render-only    # re-renders the page from the JSON

The published figures are the board profiles' ``reference_throughput`` entries of kind ``detector``
(sensorveil/devices/profiles/*.json): an SSD-MobileNet-V2 COCO detector at 300x300, each with its runtime,
precision, source and the published model's FLOPs (with their source). For each board:

* implied FLOP/s = published calls/s x the published model's FLOPs per call;
* our detector's calls/s = implied FLOP/s / our detector's FLOPs per call (``onnx_flops(...)["total"]``,
  2 x multiply-accumulates, of the cached SSDLite-MobileNetV2 ONNX cut before its non-maximum suppression);
* ms per call = 1000 / calls/s;
* the camera pipeline's ceiling from the detector alone = calls/s x detector_every / graph runs per detection
  (the pipeline runs the detector every Nth frame, ``EXPORT_EVERY``, the manifest's ``camera.detector_every``;
  each time on every tile of ``learned.detector_tiles``: 2 on a 4:3 frame with one tile row, 8 with the two
  rows the export fits to a camera of small people, ``camera.detector_tile_rows``).

This assumes the board sustains on our graph the FLOP/s it sustained on the published one. Boards without
a published detector figure are listed as such, never filled in.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sensorveil.devices import list_profiles, load_profile
from sensorveil_lab.provenance import page_header, portable, provenance, require_clean

REPO = Path(__file__).resolve().parents[1]

DETECTOR_KIND = "detector"    # reference_throughput entries of this kind are the published detector figures
# The same architecture as ours counted the way the published model's FLOPs were counted: a cross-check of
# how much the two counts' conventions alone move the estimate.
SAME_COUNT = {"model": "ssdlite_mobilenet_v2 (COCO, 300x300)", "gflops": 1.525,
              "source": "Open Model Zoo, models/public/ssdlite_mobilenet_v2/README.md, Specification table, "
                        "https://github.com/openvinotoolkit/open_model_zoo/blob/master/models/public/"
                        "ssdlite_mobilenet_v2/README.md"}
LABEL = "ESTIMATE from published figures, not measured"


def detector_reference(profile: dict) -> "dict | None":
    """The profile's published detector figure (its first reference_throughput entry of kind detector)."""
    for entry in profile.get("reference_throughput", []):
        if entry.get("kind") == DETECTOR_KIND:
            return entry
    return None


def tile_runs() -> dict:
    """tile rows -> the graph's runs per detection on a 4:3 frame (640x480), as the runtime tiles it."""
    from sensorveil.runtime.camera.learned import TILE_ROWS_RANGE, detector_tiles
    return {rows: len(detector_tiles(480, 640, rows)) for rows in range(TILE_ROWS_RANGE[0], TILE_ROWS_RANGE[1] + 1)}


def estimate(profiles: "list[dict]", detector_flops: float, every: int) -> dict:
    """Rows for the boards with a published detector figure; the other boards' names and notes."""
    runs = tile_runs()
    rows, missing = [], []
    for profile in profiles:
        ref = detector_reference(profile)
        if ref is None:
            missing.append({"board": profile["name"], "note": profile.get("reference_throughput_note", "")})
            continue
        implied = ref["fps"] * ref["model_gflops"] * 1e9
        calls = implied / detector_flops
        rows.append({"board": profile["name"], "label": LABEL, "published_model": ref["model"],
                     "published_ms": ref.get("latency_ms", 1000.0 / ref["fps"]), "published_fps": ref["fps"],
                     "runtime": ref.get("runtime", ""), "precision": ref.get("precision", ""),
                     "connection": ref.get("connection"), "host": ref.get("host"),
                     "published_model_gflops": ref["model_gflops"], "implied_gflops_per_s": implied / 1e9,
                     "detector_gflops": detector_flops / 1e9, "est_calls_per_s": calls,
                     "est_ms_per_call": 1000.0 / calls, "detector_every": every,
                     "graph_runs": runs, "est_pipeline_ceiling_fps": calls * every / runs[1],
                     "est_pipeline_ceiling_fps_two_rows": calls * every / runs[2],
                     "source": ref["source"], "model_gflops_source": ref.get("model_gflops_source", "")})
    return {"rows": rows, "missing": missing}


def find_detector() -> "Path | None":
    """The cached detector ONNX (the newest, if several conversions are cached), or None."""
    from sensorveil.export.person_detector import cache_dir
    found = sorted(cache_dir().glob("ssdlite-*/detector.onnx"), key=lambda path: path.stat().st_mtime)
    return found[-1] if found else None


def compute(detector: Path, every: int) -> dict:
    from sensorveil.costs.onnx_counts import onnx_flops
    counted = onnx_flops(str(detector))
    if counted["unresolved"]:
        raise SystemExit(f"FLOPs of {detector} are a lower bound ({len(counted['unresolved'])} nodes unresolved)")
    result = estimate([load_profile(name) for name in list_profiles()], counted["total"], every)
    result["detector"] = {"path": str(detector), "flops": counted["total"], "every": every,
                          "counted": "onnx_flops total: 2 x MACs of Conv/ConvTranspose/Gemm/MatMul, batch 1"}
    result["same_count"] = {**SAME_COUNT, "factor": counted["total"] / (SAME_COUNT["gflops"] * 1e9)}
    return result


def runs_text(result: dict) -> str:
    runs = result["rows"][0]["graph_runs"] if result["rows"] else {}
    return ", ".join(f"{count} runs with {rows} tile row{'s' if int(rows) > 1 else ''}" for rows, count in runs.items())


def render(result: dict) -> str:
    detector, every = result["detector"], result["detector"]["every"]
    lines = ["# Boards running the learned person detector: estimates from published figures", "",
             page_header(result["provenance"]), "",
             f"**These are estimates from published figures, not measurements.** No board was run for this page. "
             f"Each board's published time for an SSD-MobileNet-V2 COCO detector at 300x300 is scaled by FLOPs "
             f"to the camera bundle's detector (SSDLite-MobileNetV2, 300x300, cut before its non-maximum "
             f"suppression): {detector['flops'] / 1e9:.3f} GFLOP per call ({detector['counted']}). The camera "
             f"pipeline runs the detector on 1 frame in {every} (camera.detector_every = {every}), each time once "
             f"per tile: {runs_text(result)} on a 4:3 frame. So the detector alone caps the pipeline at {every} x "
             "its calls/s / its runs: the last two columns (camera.detector_tile_rows 1, then 2; the export "
             "fits it to the camera, docs/detector_fit.md).", "",
             "| Board | Published ms | Published calls/s | Implied GFLOP/s | Est. ms | Est. calls/s "
             "| Ceiling fps | 2 rows |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for number, row in enumerate(result["rows"], 1):
        lines.append(f"| {row['board']} [{number}] | {row['published_ms']:.1f} | {row['published_fps']:.1f} | "
                     f"{row['implied_gflops_per_s']:.1f} | {row['est_ms_per_call']:.1f} | "
                     f"{row['est_calls_per_s']:.1f} | {row['est_pipeline_ceiling_fps']:.0f} | "
                     f"{row['est_pipeline_ceiling_fps_two_rows']:.0f} |")
    lines += ["", "Published figures (each the board profile's `reference_throughput` entry of kind `detector`):", ""]
    for number, row in enumerate(result["rows"], 1):
        setting = "; ".join(f"{key}: {row[key]}" for key in ("runtime", "precision", "connection", "host")
                            if row.get(key))
        lines.append(f"{number}. {row['board']}: {row['published_model']}, {row['published_ms']:.1f} ms per call "
                     f"({setting}). Source: {row['source']}.")
    for gflops, source in sorted({(row["published_model_gflops"], row["model_gflops_source"])
                                  for row in result["rows"]}):
        boards = ", ".join(row["board"] for row in result["rows"]
                           if (row["published_model_gflops"], row["model_gflops_source"]) == (gflops, source))
        lines += ["", f"The published model's FLOPs ({boards}): {gflops} GFLOP per call; source: {source}."]
    same = result["same_count"]
    lines += ["", "How to read it:", "",
              "- Implied GFLOP/s = published calls/s x the published model's GFLOP per call; est. calls/s = "
              "implied GFLOP/s / our detector's GFLOP per call; est. ms = 1000 / est. calls/s; ceiling "
              f"fps = est. calls/s x {every} / graph runs per detection (a 16:9 frame with two tile rows takes 10).",
              "- Scaling by FLOPs assumes the board runs our graph as efficiently per FLOP as the published one, "
              "with the same runtime and precision as the source used (listed above, which is not always what "
              "the board's sensorveil profile exports). SSDLite's depthwise-separable heads are fewer FLOPs than "
              "SSD's full convolutions; an accelerator need not run them proportionally faster.",
              f"- The two FLOP counts come from different tools. Counted the way the published model was "
              f"counted, the same architecture ({same['model']}) is {same['gflops']} GFLOP per call "
              f"({same['source']}); "
              f"with that count every estimate above would be {same['factor']:.2f} x as many calls/s.",
              "- The published times cover what their source timed (the inference call); the ceiling leaves out "
              "capture, decoding, pre-processing, box decoding and non-maximum suppression, the motion detector "
              "and the privatizer. It is an upper bound from the detector alone, not the pipeline's frame rate.",
              "- Measure on the board instead: `scripts/device_benchmark.sh BUNDLE camera:0 300` (docs/guides/"
              "benchmarks.md)."]
    if result["missing"]:
        lines += ["", "Boards without a published detector figure (no estimate; none invented):", ""]
        lines += [f"- {entry['board']}: " + (entry["note"] or "its profile has no published detector figure")
                  for entry in result["missing"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from sensorveil.export.person_detector import EXPORT_EVERY
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=EXPORT_EVERY,
                        help=f"the pipeline runs the detector every Nth frame (default {EXPORT_EVERY}, export's)")
    parser.add_argument("--detector", type=Path, help="the detector ONNX (default: the cached conversion)")
    parser.add_argument("--docs", type=Path, default=REPO / "docs")
    parser.add_argument("--render-only", action="store_true", help="re-render the page from the JSON")
    parser.add_argument("--allow-dirty", action="store_true")
    args = parser.parse_args(argv)
    json_path, page_path = args.docs / "board_estimates.json", args.docs / "board_estimates.md"
    if args.render_only:
        page_path.write_text(render(json.loads(json_path.read_text())))
        print(f"wrote {page_path}")
        return 0
    require_clean(args.allow_dirty)
    detector = args.detector or find_detector()
    if detector is None or not Path(detector).is_file():
        raise SystemExit("no cached person detector ONNX: export a camera bundle with --person-detector ssdlite "
                         "once (sensorveil/export/person_detector/), or pass --detector PATH")
    result = {"provenance": provenance(allow_dirty=args.allow_dirty), **compute(Path(detector), args.every)}
    cache = str(Path(detector).resolve().parent.parent)
    result["detector"]["path"] = portable(result["detector"]["path"], folders={cache: "<person-detector cache>"})
    json_path.write_text(json.dumps(result, indent=2) + "\n")
    page_path.write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
