"""The one console script, `sensorveil`. Each verb imports what it needs when it runs, so the
runtime verbs work on a device that has numpy and one backend library and nothing else."""
import argparse
import json
import sys
from pathlib import Path

from sensorveil import __version__
from sensorveil.runtime.errors import SensorveilError


def _write_json(data: dict, path) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
        print(f"wrote {path}")


def _print_mapping(title: str, data: dict) -> None:
    print(title)
    for key, value in data.items():
        if isinstance(value, float):
            value = f"{value:.4f}"
        if not isinstance(value, (dict, list)):
            print(f"  {key:28s} {value}")


# -- verbs -------------------------------------------------------------------------------
def cmd_quickstart(args) -> int:
    from sensorveil.quickstart import quickstart
    quickstart(Path(args.out), epochs=args.epochs)
    return 0


def cmd_train(args) -> int:
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.runs import read_run, train_run
    mechanism = mechanisms.get(args.mechanism)
    if args.hidden and not mechanism.multi_attribute:
        raise ValueError(f"--hidden applies to mechanisms that take several attributes (pass), not {args.mechanism}")
    settings = parse_settings(args.set)
    if args.substitutes is not None:
        settings["substitutes"] = args.substitutes
    out = train_run(args.mechanism, args.dataset, data_path=args.data_path, useful=args.useful, private=args.private,
                    out=args.out, epochs=args.epochs, seed=args.seed, hidden=args.hidden, settings=settings)
    run = read_run(out)
    _print_mapping(f"trained {args.mechanism} on {args.dataset} -> {out}", {**run["reference"], **run["metrics"]})
    if run.get("selection", {}).get("threshold_met") is False:
        print(f"warning: no setting kept the useful attribute at the utility threshold "
              f"({run['reference'].get('utility_threshold')}); the most useful one was kept. Train longer "
              "(--epochs) or lower the threshold (--set utility_threshold=...)", file=sys.stderr)
    return 0


def parse_settings(pairs) -> dict:
    """--set KEY=VALUE ... -> {KEY: "VALUE"}; the mechanism converts each to its setting's type."""
    settings = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--set takes KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


def cmd_evaluate(args) -> int:
    from sensorveil.sdk.assess import audit_path
    from sensorveil.sdk.audit import format_audit, write_report
    result = audit_path(args.path, backend=args.backend, seeds=args.seeds, attacker_epochs=args.attacker_epochs)
    title = (f"audit of {result['source']} ({result['mechanism']}"
             + (f", {result['backend']}" if "backend" in result else ", trained model") + ")")
    print(format_audit(result, title))
    if "protocol_acc_private" in result:
        print(f"  paper protocol (the defender's fixed classifiers): D_z {result['protocol_acc_private']:.1%}, "
              f"D_y {result['protocol_acc_useful']:.1%}")
    _write_json(result, args.json)
    if args.report:
        print(f"wrote {write_report(result, title, args.report)} (+ .png)")
    return 0


def cmd_export(args) -> int:
    from sensorveil.export import export_run
    out = export_run(args.run_dir, args.format, args.out, precision=args.precision,
                     include_samples=not args.index_only, target=args.target, calibration=args.calibration,
                     int8_check=not args.skip_int8_privacy_check, sign_key=args.sign)
    manifest = json.loads((out / "manifest.json").read_text())
    for record in manifest.get("validation", []):
        print(f"validation {record['backend']} ({record.get('precision', '')}): {record['status']} "
              + _validation_detail(record))
    edgetpu = manifest["artifacts"].get("edgetpu", {}).get("graphs", {})
    uncompiled = [entry["compile_command"] for entry in edgetpu.values() if not entry.get("compiled")]
    if uncompiled:
        print("not yet compiled for the Edge TPU; on an x86-64 Linux host with edgetpu_compiler run:\n  "
              + "\n  ".join(uncompiled) + "\nthen re-run the export there, or copy the compiled file in and re-export")
    print(f"bundle written to {out}" + (f", signed with {args.sign} (manifest.sig)" if args.sign else ""))
    return 0


def cmd_keys(args) -> int:
    from sensorveil.export.signing import generate_key_pair
    private_path, public_path = generate_key_pair(args.out)
    print(f"wrote {private_path} (private: sign with `sensorveil export ... --sign {private_path}`; keep it off "
          f"the devices)\nwrote {public_path} (public: give it to devices as trusted_keys=[...] or "
          "SENSORVEIL_TRUSTED_KEYS)")
    return 0


def _validation_detail(record: dict) -> str:
    if "shift" in record:
        return (f"(audit over {record['seeds']} seeds, int8 - fp32: neural attacker on the private attribute "
                f"{record['shift']['probing_acc_private']:+.3f}, utility {record['shift']['probing_acc_useful']:+.3f}; "
                "fails when any attacker family rises above the fp32 95% interval)")
    if "max_abs_diff" in record:
        return (f"(max |diff| {record['max_abs_diff']:.2e}, {record['relative_diff']:.2e} of the output range; "
                f"tolerance {record['tolerance']})")
    return f"({record.get('reason', '')})"


def cmd_benchmark(args) -> int:
    from sensorveil.benchmarks.bench import benchmark_bundle
    from sensorveil.benchmarks.report import format_table, write_report
    from sensorveil.benchmarks.stream_bench import format_estimates
    result = benchmark_bundle(args.bundle, backend=args.backend, iters=args.frames, source=args.source,
                              stream_frames=args.frames)
    print(format_table(result["rows"]))
    for skipped in result.get("skipped", []):
        print(f"skipped {skipped['backend']}: {skipped['reason']}")
    print(f"matmul peak of this CPU: {result['matmul_peak_gflops']:.1f} GFLOP/s")
    print(format_estimates(result))
    if args.json:
        stem = Path(args.json).with_suffix("")
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        write_report(result, json_path=args.json)
        # measured rows and the ESTIMATES table stay apart in the Markdown report
        measured = {key: value for key, value in result.items() if key != "estimates"}
        write_report(measured, markdown_path=f"{stem}.md", plot_path=f"{stem}.png")
        with open(f"{stem}.md", "a", encoding="utf-8") as markdown:
            markdown.write("\n" + format_estimates(result))
        print(f"wrote {args.json}, {stem}.md, {stem}.png")
    return 0


def cmd_devices(args) -> int:
    from sensorveil import devices
    if args.action == "list":
        for name in devices.list_profiles():
            profile = devices.load_profile(name)
            print(f"{name:18s} {profile['backend']:12s} {profile['precision']:5s} {profile['description']}")
        return 0
    if args.action == "detect":
        evidence = devices.detection_evidence()
        _print_mapping("evidence", {key: (", ".join(value) if isinstance(value, list) else value) or "-"
                                    for key, value in evidence.items()})
        matches = devices.detect(evidence)
        for match in matches:
            print(f"detected {match['name']} (by {', '.join(match['matched_by'])}); "
                  f"set-up script: {devices.setup_script(match['name'])}")
        if not matches:
            print("no device profile matches this machine")
        return 0
    if not args.bundle or not args.device:
        raise SystemExit("error: sensorveil devices check BUNDLE --device NAME")
    from sensorveil.export.device_check import check_bundle
    report = check_bundle(args.bundle, args.device)
    print(f"{args.device}: {report['file']} ({report['backend']}, {report['precision']}), "
          f"{sum(report['operator_counts'].values())} operators of {len(report['operator_counts'])} types")
    for problem in report["problems"]:
        print(f"  problem: {problem}")
    if report.get("note"):
        print(f"  note: {report['note']}")
    print("compatible" if report["compatible"] else "NOT compatible")
    _write_json(report, args.json)
    return 0 if report["compatible"] else 1


def _print_stream_report(report: dict) -> None:
    _print_mapping(f"stream {report['source']}", report)
    for stage, figures in report.get("stages_ms", {}).items():
        print(f"  {stage + '_ms (mean/p50/p95)':28s} {figures['mean']:.3f} / {figures['p50']:.3f} / {figures['p95']:.3f}")
    for error in report.get("errors", []):
        print(f"  bad frame: {error}")


def cmd_run(args) -> int:
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.preprocess import is_depth_spec
    from sensorveil.runtime.sinks import open_sink
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import run_stream
    privatizer = Privatizer.load(args.bundle, backend=args.backend)
    print(f"bundle signature: {privatizer.signature['status']} ({privatizer.signature['detail']})")
    spec = privatizer.output_spec
    with open_source(args.source) as source:
        sink = open_sink(args.sink, fps=source.fps, value_range=(spec.low, spec.high), depth=is_depth_spec(spec))
        try:
            report = run_stream(privatizer, source, sink, frames=args.frames, depth_output=args.depth_output)
        finally:
            if sink is not None:
                sink.close()
    _print_stream_report(report)
    _write_json(report, args.json)
    return stream_exit_code(report, args.max_bad_share)


def stream_exit_code(report: dict, max_bad_share: float) -> int:
    """1 when nothing left the device, or when more than ``max_bad_share`` of the frames were bad or
    dropped: a service manager must see a stream that silently delivers nothing as failed."""
    delivered = report["frames_out"] - report.get("undelivered", 0)
    lost = report["bad"] + report["dropped"]
    share = lost / max(1, report["frames_out"] + report["bad"] + report["dropped"] - report.get("undelivered", 0))
    if delivered <= 0:
        print("sensorveil run: error: no privatized frame was delivered" + (
            f" (first error: {report['errors'][0]})" if report.get("errors") else ""), file=sys.stderr)
        return 1
    if share > max_bad_share:
        print(f"sensorveil run: error: {share:.0%} of the frames were bad or dropped (limit {max_bad_share:.0%}, "
              "--max-bad-share)", file=sys.stderr)
        return 1
    return 0


def cmd_preview(args) -> int:
    from sensorveil.runtime import Privatizer
    from sensorveil.runtime.preview import preview
    from sensorveil.runtime.sources import open_source
    privatizer = Privatizer.load(args.bundle, backend=args.backend)
    with open_source(args.source) as source:
        report = preview(privatizer, source, out=args.out, headless=args.headless, frames=args.frames)
    _print_stream_report(report)
    if args.out:
        print(f"wrote {report['video']} ({report['frames_out']} frames, {report['video_size'][0]}x"
              f"{report['video_size'][1]}) and {report['contact_sheet']}")
    return 0


# -- parser ------------------------------------------------------------------------------
def _mechanism_names() -> tuple:
    from sensorveil.sdk import mechanisms   # the registry's names, read without importing torch
    return mechanisms.names()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sensorveil", description="Privacy at the sensor: train, export, run, benchmark and preview privatizing mechanisms.")
    parser.add_argument("--version", action="version", version=f"sensorveil {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")   # required=: Python 3.7+, checked in main

    p = verbs.add_parser("quickstart", help="train PR-GAN on digits, attack it, export, run and benchmark it")
    p.add_argument("--out", default="sensorveil-out", help="where runs, bundles and reports go")
    p.add_argument("--epochs", type=int, default=None, help="generator epochs (default: the config's)")
    p.set_defaults(func=cmd_quickstart)

    p = verbs.add_parser("train", help="train a privatizing mechanism on a dataset")
    p.add_argument("mechanism", help=f"one of: {', '.join(_mechanism_names())}")
    p.add_argument("--dataset", required=True, help="digits, ujiindoorloc, synthetic-depth or npz")
    p.add_argument("--data-path", default=None, help="path to the dataset's files (ujiindoorloc zip, npz)")
    p.add_argument("--private", nargs="+", default=None, help="private attribute(s) to hide")
    p.add_argument("--useful", nargs="+", default=None, help="useful attribute(s) to keep")
    p.add_argument("--out", default=None, help="run directory (default runs/MECHANISM-DATASET)")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0, help="training seed (the deployed mechanism draws its own)")
    p.add_argument("--hidden", nargs="+", default=None,
                   help="pass: hidden useful attribute(s), never seen in training, scored in mNAG (eq. 14)")
    p.add_argument("--substitutes", type=int, default=None,
                   help="pass: substitute bank size (default 4096, capped at the training split)")
    p.add_argument("--set", nargs="+", default=None, metavar="KEY=VALUE",
                   help="mechanism settings (fields of its config, e.g. --set tau=0.05 for pass); "
                        "an unknown key names the valid ones")
    p.set_defaults(func=cmd_train)

    p = verbs.add_parser("evaluate", help="audit a run or a bundle: attackers of several families, over seeds, "
                                          "with 95%% intervals")
    p.add_argument("path", help="RUN_DIR or BUNDLE")
    p.add_argument("--backend", default="auto", help="runtime backend for a bundle")
    p.add_argument("--json", default=None, help="also write the figures to this JSON file")
    p.add_argument("--attacker-epochs", type=int, default=20, help="training epochs of each neural attacker")
    p.add_argument("--seeds", type=int, default=3, help="repeats of every attacker (the 95%% intervals need >= 2)")
    p.add_argument("--report", default=None, metavar="FILE.md", help="also write a markdown report and its plot")
    p.set_defaults(func=cmd_evaluate)

    p = verbs.add_parser("export", help="turn a run into a validated bundle")
    p.add_argument("run_dir")
    p.add_argument("--format", default=None, choices=("onnx", "tflite", "openvino", "tensorrt"),
                   help="bundle format (default: the --target device's)")
    p.add_argument("--precision", default=None, choices=("fp32", "fp16", "int8"),
                   help="default: the --target device's, else fp32")
    p.add_argument("--target", default=None, help="device profile (sensorveil devices list): picks format, "
                   "precision, ONNX opset, static shapes, Edge TPU compilation")
    p.add_argument("--calibration", type=int, default=None, help="int8: calibration samples from the training split")
    p.add_argument("--skip-int8-privacy-check", action="store_true",
                   help="int8: skip re-measuring the probing attack on the quantized bundle (not recommended)")
    p.add_argument("--out", required=True, help="bundle directory to write")
    p.add_argument("--index-only", action="store_true",
                   help="pass: leave the substitute samples out (the device emits bank indices only)")
    p.add_argument("--sign", default=None, metavar="KEY",
                   help="sign the manifest with this Ed25519 private key (PEM; `sensorveil keys generate`)")
    p.set_defaults(func=cmd_export)

    p = verbs.add_parser("keys", help="an Ed25519 key pair for signing bundles")
    p.add_argument("action", choices=("generate",))
    p.add_argument("--out", required=True, help="folder for signer.key (private, mode 0600) and signer.pub")
    p.set_defaults(func=cmd_keys)

    p = verbs.add_parser("benchmark", help="FLOPs, latency and FPS of a bundle per backend")
    p.add_argument("bundle")
    p.add_argument("--backend", default="all", help="a backend name or 'all' the bundle carries")
    p.add_argument("--frames", type=int, default=500, help="timed iterations (and stream frames with --source)")
    p.add_argument("--source", default=None, help="also measure end-to-end stream FPS on this source "
                   "(camera:N, video file, kinect, k4a, depthdir:PATH, npy:PATH, synthetic-depth)")
    p.add_argument("--json", default=None, help="write JSON (+ .md table and .png plot beside it)")
    p.set_defaults(func=cmd_benchmark)

    p = verbs.add_parser("devices", help="device profiles: list, detect this machine, check a bundle's operators")
    p.add_argument("action", nargs="?", default="list", choices=("list", "detect", "check"))
    p.add_argument("bundle", nargs="?", default=None, help="check: the bundle directory")
    p.add_argument("--device", default=None, help="check: a profile name from `sensorveil devices list`")
    p.add_argument("--json", default=None, help="check: also write the report to this JSON file")
    p.set_defaults(func=cmd_devices)

    p = verbs.add_parser("run", help="privatize a sensor stream and send the output to a sink")
    p.add_argument("bundle")
    p.add_argument("--source", required=True, help="camera:N, video file or URL, kinect, k4a[:N|:FILE.mkv], "
                   "depthdir:PATH, npy:PATH or synthetic-depth")
    p.add_argument("--sink", default=None, help="video:FILE.mp4, png:DIR, npz:DIR or udp://HOST:PORT (default: none)")
    p.add_argument("--frames", type=int, default=None, help="stop after N frames (default: until the source ends)")
    p.add_argument("--backend", default="auto")
    p.add_argument("--depth-output", default="patch", choices=("patch", "frame"),
                   help="depth: emit the privatized 180x180 patch, or a full frame with only the patch valid")
    p.add_argument("--json", default=None, help="write the stream report to this JSON file")
    p.add_argument("--max-bad-share", type=float, default=0.5,
                   help="exit 1 when more than this share of frames was bad or dropped (default 0.5)")
    p.set_defaults(func=cmd_run)

    p = verbs.add_parser("preview", help="raw | privatized | difference side by side, live or to a video")
    p.add_argument("bundle")
    p.add_argument("--source", required=True, help="camera:N, video file or URL, kinect, k4a, depthdir:PATH, ...")
    p.add_argument("--headless", action="store_true", help="no window: write the view to --out")
    p.add_argument("--out", default=None, help="FILE.mp4 for the view (+ FILE.png contact sheet)")
    p.add_argument("--frames", type=int, default=None, help="stop after N frames")
    p.add_argument("--backend", default="auto")
    p.set_defaults(func=cmd_preview)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.error("a VERB is required (see sensorveil --help)")
    try:
        return args.func(args)
    except (SensorveilError, ValueError, FileNotFoundError, FileExistsError) as error:
        print(f"sensorveil {args.verb}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
