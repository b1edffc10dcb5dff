"""sensorveil export RUN_DIR --format ...: a validated (and optionally signed) bundle."""
import json
import multiprocessing

from sensorveil.cli.common import positive_int
from sensorveil.runtime import capabilities


def cmd_export(args) -> int:
    # torch, JAX (under litert-torch) and onnxruntime start thread pools during an export; a process forked
    # after that can deadlock on a lock a pool thread held, so any worker a library starts is spawned
    if multiprocessing.get_start_method(allow_none=True) is None:
        multiprocessing.set_start_method("spawn")
    from sensorveil.export import export_run
    out = export_run(args.run_dir, args.format, args.out, precision=args.precision,
                     include_samples=not args.index_only, target=args.target, calibration=args.calibration,
                     int8_check=not args.skip_int8_privacy_check, attacker_epochs=args.int8_attacker_epochs,
                     sign_key=args.sign, sensor_units=args.units == "sensor", serial=args.serial,
                     person_detector=args.person_detector, camera_speed=args.camera_speed, force=args.force)
    manifest = json.loads((out / "manifest.json").read_text())
    units = [stage for stage in manifest.get("pipeline", []) if "units" in stage]
    if units:
        print(f"units: {units[0]['units']} ({units[0]['units_note']})")
    for record in manifest.get("validation", []):
        print(f"validation {record['backend']} ({record.get('precision', '')}): {record['status']} "
              + validation_detail(record))
    edgetpu = manifest["artifacts"].get("edgetpu", {}).get("graphs", {})
    uncompiled = [entry["compile_command"] for entry in edgetpu.values() if not entry.get("compiled")]
    if uncompiled:
        print("not yet compiled for the Edge TPU; on an x86-64 Linux host with edgetpu_compiler run:\n  "
              + "\n  ".join(uncompiled)
              + "\n(it compiles, lists the compiled file in the manifest and re-signs with --sign KEY; no re-export)")
    print(f"bundle written to {out}" + (f", signed with {args.sign} (manifest.sig)" if args.sign else ""))
    return 0


def validation_detail(record: dict) -> str:
    if "shift" in record:
        return (f"(audit over {record['seeds']} seeds, int8 - fp32: neural attacker on the private attribute "
                f"{record['shift']['probing_acc_private']:+.3f}, utility {record['shift']['probing_acc_useful']:+.3f}; "
                "fails when any attacker family rises above the fp32 95% interval)")
    if "max_abs_diff" in record:
        return (f"(max |diff| {record['max_abs_diff']:.2e}, {record['relative_diff']:.2e} of the output range; "
                f"tolerance {record['tolerance']})")
    return f"({record.get('reason', '')})"


def add_parser(verbs) -> None:
    p = verbs.add_parser("export", help="turn a run into a validated bundle")
    p.add_argument("run_dir")
    p.add_argument("--format", default=None, choices=capabilities.formats(),
                   help="bundle format (default: the --target device's); each exports in: "
                   + capabilities.format_help() + " (sensorveil devices formats)")
    p.add_argument("--precision", default=None, choices=capabilities.PRECISION_ORDER,
                   help="default: the --target device's, else fp32")
    p.add_argument("--target", default=None, help="device profile (sensorveil devices list): picks format, "
                   "precision, ONNX opset, static shapes, Edge TPU compilation")
    p.add_argument("--calibration", type=int, default=None, help="int8: calibration samples from the training split")
    p.add_argument("--skip-int8-privacy-check", action="store_true",
                   help="int8: skip re-measuring the probing attack on the quantized bundle (not recommended)")
    p.add_argument("--int8-attacker-epochs", type=positive_int, default=None, metavar="N",
                   help="int8: training epochs of the privacy audit's neural attackers (default 20; fewer is "
                   "quicker and weaker)")
    p.add_argument("--out", required=True, help="bundle directory to write: absent, empty or an earlier bundle "
                   "(written beside it and renamed into place; never the run folder)")
    p.add_argument("--force", action="store_true",
                   help="let --out replace a folder or file that is not an earlier bundle (never the run folder)")
    p.add_argument("--index-only", action="store_true",
                   help="pass: leave the substitute samples out (the device emits bank indices only)")
    p.add_argument("--sign", default=None, metavar="KEY",
                   help="sign the manifest with this Ed25519 private key (PEM; `sensorveil keys generate`)")
    p.add_argument("--serial", type=positive_int, default=None, metavar="N",
                   help="with --sign: the bundle's rollback serial (default: the Unix time of signing); devices "
                   "that pin min_serial refuse bundles below theirs")
    p.add_argument("--units", default="sensor", choices=("sensor", "model"),
                   help="sensor (default): the normalization inside the graph where format and precision allow "
                   "(not int8, not multi-stage pipelines); model: the runtime normalizes in numpy")
    p.add_argument("--person-detector", default="ssdlite", choices=("ssdlite", "motion"),
                   help="camera bundles: ssdlite (default) ships the learned person detector (COCO SSDLite, "
                   "converted once; needs the detector extra, see docs/guides/camera.md; onnx and openvino formats) "
                   "beside motion; motion: the motion detector alone (misses people who stand)")
    p.add_argument("--camera-speed", default="recall", choices=("recall", "fast"),
                   help="camera bundles with the learned detector: recall (default) runs the graph every 3 frames "
                   "and motion at half size; fast runs it every 10, motion at a quarter and (onnx) the int8 graph "
                   "where it finds the fp32 graph's people: less CPU a frame, fewer people found, more so in a crowd "
                   "(docs/camera_speed.md)")
    p.set_defaults(func=cmd_export)
