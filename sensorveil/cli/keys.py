"""sensorveil keys generate --out DIR: an Ed25519 key pair for signing bundles."""
import shutil
import subprocess
import sys
from pathlib import Path


def cmd_keys(args) -> int:
    from sensorveil.export.signing import generate_key_pair
    private_path, public_path = generate_key_pair(args.out)
    print(f"wrote {private_path} (private: sign with `sensorveil export ... --sign {private_path}`; keep it off "
          f"the devices)\nwrote {public_path} (public: give it to devices as trusted_keys=[...] or "
          "SENSORVEIL_TRUSTED_KEYS)")
    warning = unignored_in_git(private_path)
    if warning:
        print(f"sensorveil keys: warning: {warning}", file=sys.stderr)
    return 0


def unignored_in_git(path) -> "str | None":
    """Why a private key at ``path`` could be committed: it lies inside a git work tree that does not
    ignore it (one `git add .` away from a public repository); None when it is ignored, outside any
    work tree, or git is not installed."""
    path = Path(path).resolve()
    if shutil.which("git") is None:
        return None
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=str(path.parent),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True)
    if top.returncode != 0:
        return None
    ignored = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=str(path.parent),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if ignored.returncode == 0:
        return None
    root = Path(top.stdout.strip())
    try:
        folder = path.parent.relative_to(root).as_posix() + "/"
    except ValueError:
        folder = str(path.parent) + "/"
    return (f"the private key {path} is inside the git work tree {root}, which does not ignore it: a `git add` "
            f"would commit it; add `{folder}` to {root / '.gitignore'}")


def add_parser(verbs) -> None:
    p = verbs.add_parser("keys", help="an Ed25519 key pair for signing bundles")
    p.add_argument("action", choices=("generate",))
    p.add_argument("--out", required=True, help="folder for signer.key (private, mode 0600) and signer.pub; "
                   "keys/ is ignored by this repository's git")
    p.set_defaults(func=cmd_keys)
