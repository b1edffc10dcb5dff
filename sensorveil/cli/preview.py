"""sensorveil preview BUNDLE --source SOURCE: raw beside privatized, in a window, a video or a web page."""
from sensorveil.cli.common import (
    SCENE_STILL_HELP,
    UsageError,
    positive_int,
    print_stream_report,
    progress_for,
    scene_still_from,
)
from sensorveil.cli.run import backend_fields, backend_line


def cmd_preview(args) -> int:
    from sensorveil.runtime.sources import open_source
    from sensorveil.runtime.stream import load_for_stream
    if args.web is not None and (args.headless or args.out):
        raise UsageError("--web serves the preview as a page; it does not take --headless or --out")
    if args.web is None and (args.no_raw or args.loop):
        raise UsageError("--no-raw and --loop apply to the web preview (--web [HOST:]PORT)")
    privatizer = load_for_stream(args.bundle, backend=args.backend, threads=args.threads,
                                 scene_still=scene_still_from(args))
    print(backend_line(privatizer))
    if args.web is not None:
        from sensorveil.runtime.web_preview import serve
        open_source(args.source).close()   # a missing file or camera is one clear error before serving
        report = serve(privatizer, lambda: open_source(args.source), args.web, frames=args.frames,
                       raw=not args.no_raw, loop=args.loop)
        print_stream_report({**backend_fields(privatizer), **report})
        return 0
    from sensorveil.runtime.preview import preview
    with open_source(args.source) as source:
        report = preview(privatizer, source, out=args.out, headless=args.headless, frames=args.frames,
                         progress=progress_for(source, args.frames) if args.headless else None)
    print_stream_report({**backend_fields(privatizer), **report})
    if args.out:
        print(f"wrote {report['video']} ({report['frames_out']} frames, {report['video_size'][0]}x"
              f"{report['video_size'][1]}) and {report['contact_sheet']}")
    return 0


def add_parser(verbs) -> None:
    p = verbs.add_parser("preview", help="raw | privatized side by side: a window, a video, or a web page")
    p.add_argument("bundle")
    p.add_argument("--source", required=True, help="camera:N, video file or URL, kinect, k4a, depthdir:PATH, ...")
    p.add_argument("--headless", action="store_true", help="no window: write the view to --out")
    p.add_argument("--out", default=None, help="FILE.mp4 for the view (+ FILE.png contact sheet)")
    p.add_argument("--web", default=None, metavar="[HOST:]PORT",
                   help="serve the preview as a web page (MJPEG streams, live counters, the bundle's privacy "
                        "figures); a bare PORT binds 127.0.0.1, 0.0.0.0:PORT exposes it; port 0 picks a free one")
    p.add_argument("--no-raw", action="store_true",
                   help="web: never serve the raw view, only what leaves the device")
    p.add_argument("--loop", action="store_true", help="web: replay a video file from the start when it ends")
    p.add_argument("--frames", type=positive_int, default=None, help="stop after N frames")
    p.add_argument("--backend", default="auto")
    p.add_argument("--scene-still", default=None, metavar="IMAGE", help=SCENE_STILL_HELP)
    p.add_argument("--threads", type=positive_int, default=None,
                   help="CPU threads for the model (default: all cores but one, which reads and pre-processes "
                        "the next frames)")
    p.set_defaults(func=cmd_preview)
