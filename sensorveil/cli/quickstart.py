"""sensorveil quickstart: the main job on the embedded default dataset, or PASS on a camera clip."""
from pathlib import Path

from sensorveil.cli.common import positive_int


def cmd_quickstart(args) -> int:
    if args.camera:
        from sensorveil.quickstart import camera_quickstart
        camera_quickstart(Path(args.out), Path(args.camera), person_detector=args.person_detector,
                          camera_speed=args.camera_speed, bank=args.bank, full_size=args.full_size)
        return 0
    from sensorveil.quickstart import quickstart
    quickstart(Path(args.out), epochs=args.epochs)
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("quickstart", help="train PASS and PR-GAN on digits, export, audit and benchmark both bundles")
    p.add_argument("--out", default="sensorveil-out", help="where runs, bundles and reports go")
    p.add_argument("--epochs", type=positive_int, default=None, help="generator epochs (default: the config's)")
    p.add_argument("--camera", metavar="CLIP", default=None,
                   help="instead: PASS on the people of a still camera clip (e.g. ../shared/media/walkway.avi), "
                        "audited and previewed raw beside privatized")
    p.add_argument("--person-detector", default="ssdlite", choices=("ssdlite", "motion"),
                   help="with --camera: ssdlite (default) puts the learned person detector in the bundle beside "
                   "motion (needs the detector extra: docs/guides/camera.md); motion: the motion detector alone")
    p.add_argument("--camera-speed", default="recall", choices=("recall", "fast"),
                   help="with --camera: the bundle's detector settings (sensorveil export --camera-speed; "
                   "docs/guides/camera.md)")
    p.add_argument("--bank", default="rendered", choices=("rendered", "clip"),
                   help="with --camera: who the substitutes are: rendered (default) walkers sensorveil draws, no "
                   "real person; clip: the clip's own bystanders, shown at places and times they never were")
    p.add_argument("--full-size", action="store_true",
                   help="with --camera: work at the clip's own size; by default a clip wider than 640 px is "
                   "scaled to 640 wide (training, audits and preview cost about the frame's pixel count)")
    p.set_defaults(func=cmd_quickstart)
