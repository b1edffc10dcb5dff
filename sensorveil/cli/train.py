"""sensorveil train MECHANISM --dataset NAME: train a privatizing mechanism and print its figures."""
import sys

from sensorveil.cli.common import parse_settings, positive_int, print_mapping

# the datasets `train` takes, spelled out: the parser is built on boards whose Python (3.6) cannot import
# the trainer's dataset registry; tests/integration/test_cli_and_bench.py checks this list against the registry
DATASET_NAMES = ("digits", "ujiindoorloc", "synthetic-depth", "npz", "motionsense", "adult", "walkway")


def cmd_train(args) -> int:
    from sensorveil.sdk import mechanisms
    from sensorveil.sdk.runs import read_run, train_run
    mechanism = mechanisms.get(args.mechanism)
    if args.hidden and not mechanism.multi_attribute:
        raise ValueError(f"--hidden applies to mechanisms that take several attributes (pass), not {args.mechanism}")
    settings = parse_settings(args.set)
    if args.substitutes is not None:
        settings["substitutes"] = args.substitutes
    if args.classifier_epochs is not None:   # a mechanism without fixed classifiers names its valid settings
        settings["classifier_epochs"] = args.classifier_epochs
    out = train_run(args.mechanism, args.dataset, data_path=args.data_path, useful=args.useful, private=args.private,
                    out=args.out, epochs=args.epochs, seed=args.seed, hidden=args.hidden, settings=settings,
                    attacker_epochs=args.attacker_epochs, dataset_options=dataset_options(args.dataset_option))
    run = read_run(out)
    print_mapping(f"trained {args.mechanism} on {args.dataset} -> {out}", {**run.reference, **run.metrics})
    print("  " + epochs_line(run, args.attacker_epochs))
    warning = threshold_warning(run)
    if warning:
        print(f"sensorveil train: warning: {warning}", file=sys.stderr)
    return 0


def dataset_options(pairs) -> dict:
    """--dataset-option KEY=VALUE ... -> {KEY: "VALUE"}; the dataset registry converts each to its loader's type."""
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--dataset-option takes KEY=VALUE (e.g. test_split=validation), got {pair!r}")
        options[key.strip()] = value.strip()
    return options


def epochs_line(run, attacker_epochs: int) -> str:
    """What each network was trained for (``run``: the run's RunRecord): --epochs is the mechanism's own networks
    only. No annotations import here: the CLI's parser is built on the boards' Python 3.6."""
    config = run.config or {}
    if config.get("epochs") is None and "rounds" in config:   # federated mechanisms: --epochs sets the rounds
        parts = [f"federated rounds {config['rounds']} (--epochs)"]
    else:
        parts = [f"mechanism networks {config.get('epochs', 'default')} (--epochs)"]
    if "classifier_epochs" in config:
        parts.append(f"fixed D_y/D_z {config['classifier_epochs']} (--classifier-epochs)")
    parts.append(f"probing attackers {attacker_epochs} (--attacker-epochs)")
    return "epochs: " + ", ".join(parts)


def threshold_warning(run) -> "str | None":
    """PR-GAN section 6.4 keeps the most private setting that holds the utility threshold; when none
    does, the run keeps the most useful one and its figures are not at the promised utility."""
    selection = run.selection or {}
    if selection.get("threshold_met") is not False:
        return None
    threshold = (run.reference or {}).get("utility_threshold", (run.config or {}).get("utility_threshold"))
    sweep, chosen = selection.get("sweep") or [], selection.get("chosen")
    achieved = sweep[chosen].get("val_acc_useful") if isinstance(chosen, int) and chosen < len(sweep) else None
    reached = f"reached {achieved:.3f}" if isinstance(achieved, float) else "was not reached"
    useful = run.useful if isinstance(run.useful, str) else ", ".join(run.useful)
    return (f"the utility threshold was not met: Acc(D_y) on '{useful}' "
            f"{reached} against {threshold} on the held-out split; the run keeps the most useful setting, so "
            "its privacy figures are for a mechanism below the utility you asked for (more --epochs, more data, "
            "or --set utility_threshold=LOWER)")


def mechanism_names() -> tuple:
    from sensorveil.sdk import mechanisms  # the registry's names, read without importing torch
    return mechanisms.names()


def add_parser(verbs) -> None:
    p = verbs.add_parser("train", help="train a privatizing mechanism on a dataset")
    p.add_argument("mechanism", help=f"one of: {', '.join(mechanism_names())}")
    p.add_argument("--dataset", required=True, help=f"one of: {', '.join(DATASET_NAMES)}")
    p.add_argument("--data-path", default=None, help="path to the dataset's files (ujiindoorloc zip, npz)")
    p.add_argument("--dataset-option", nargs="+", default=None, metavar="KEY=VALUE",
                   help="options of the dataset's loader (e.g. ujiindoorloc: test_split=validation trains on "
                        "trainingData.csv and scores on validationData.csv; max_rows=N); recorded in run.json")
    p.add_argument("--private", nargs="+", default=None, help="private attribute(s) to hide")
    p.add_argument("--useful", nargs="+", default=None, help="useful attribute(s) to keep")
    p.add_argument("--out", default=None, help="run directory (default runs/MECHANISM-DATASET)")
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="epochs of the mechanism's own networks only (PR-GAN: each generator of the margin "
                        "sweep; PASS: f and g); default: the mechanism's. The fixed classifiers and the "
                        "attackers have their own flags below")
    p.add_argument("--classifier-epochs", type=positive_int, default=None,
                   help="PR-GAN and its baselines: epochs of the fixed D_y and D_z (default 20)")
    p.add_argument("--attacker-epochs", type=positive_int, default=20,
                   help="epochs of each probing attacker that scores the run (default 20; fewer is faster "
                        "but a weaker attacker makes privacy look better than it is)")
    p.add_argument("--seed", type=int, default=0, help="training seed (the deployed mechanism draws its own)")
    p.add_argument("--hidden", nargs="+", default=None,
                   help="pass: hidden useful attribute(s), never seen in training, scored in mNAG (eq. 14)")
    p.add_argument("--substitutes", type=int, default=None,
                   help="pass: substitute bank size (default 4096, capped at the training split)")
    p.add_argument("--set", nargs="+", default=None, metavar="KEY=VALUE",
                   help="mechanism settings (fields of its config, e.g. --set tau=0.05 for pass); "
                        "an unknown key names the valid ones")
    p.set_defaults(func=cmd_train)
