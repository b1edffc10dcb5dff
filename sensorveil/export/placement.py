"""Where an export writes: a new folder beside ``--out``, renamed into place once the bundle is whole.

Nothing a user owns is overwritten or deleted without being asked (DESIGN.md, rules of the house):

- ``--out`` may be absent, an empty folder or an earlier bundle (``manifest.json`` and only the files it
  lists, its signature and TensorRT's ``engines/``); anything else is refused unless ``force`` is given;
- ``--out`` is never the run folder itself, nor a folder that holds it (not even with ``force``);
- the bundle is written into ``.<name>.export-<random>`` beside ``--out`` and renamed into place only after
  it was validated (and signed): a failed export leaves the earlier bundle as it was;
- an export holds a lock (``.<name>.export-lock`` beside ``--out``, ``fcntl.flock``, released by the kernel
  if the process dies) for its whole run, so two exports into one ``--out`` cannot both succeed or remove
  each other's work: the second is refused at once.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from sensorveil.runtime.bundle import ENGINE_CACHE_DIR, MANIFEST_NAME, SIGNATURE_NAME

try:
    import fcntl
except ImportError:          # Windows: the lock is the lock file's existence (O_EXCL)
    fcntl = None


class OutError(ValueError):
    """``--out`` cannot take the bundle (it holds other things, is the run folder, another export holds it)."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_out(out: Path, run_dir: Path, force: bool = False) -> None:
    """One OutError saying why ``out`` cannot receive this export, before any work is done."""
    target, run = Path(os.path.realpath(out)), Path(os.path.realpath(run_dir))
    if _inside(run, target):
        what = "the run folder itself" if target == run else f"a folder that holds the run folder {run}"
        raise OutError(f"--out {out} is {what}; expected a bundle folder outside the run (the export would "
                       "replace the run it reads)")
    if not os.path.lexists(str(out)):
        return
    if os.path.islink(str(out)):
        if force:
            return
        raise OutError(f"--out {out} is a symbolic link; expected a folder, an earlier bundle or nothing "
                       "(--force replaces the link, not what it points to)")
    if not out.is_dir():
        if force:
            return
        raise OutError(f"--out {out} is a file, not a bundle folder; expected a folder, an earlier bundle or "
                       "nothing (--force replaces it)")
    stray = not_bundle_entries(out)
    if stray and not force:
        shown = ", ".join(stray[:3]) + (f" and {len(stray) - 3} more" if len(stray) > 3 else "")
        raise OutError(f"--out {out} holds {shown}, which no earlier bundle lists; expected an empty folder or "
                       "an earlier bundle (move them away, pick another --out, or pass --force to replace it all)")


def not_bundle_entries(folder: Path) -> list:
    """The entries of ``folder`` that an earlier bundle would not hold; [] for an empty folder or a bundle."""
    entries = sorted(os.listdir(str(folder)))
    if not entries:
        return []
    listed = set()
    manifest_path = folder / MANIFEST_NAME
    if manifest_path.is_file() and not manifest_path.is_symlink() and manifest_path.stat().st_size < 16 << 20:
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError):
            manifest = None
        if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict):
            listed = {name for name in manifest["files"] if isinstance(name, str)} | {MANIFEST_NAME, SIGNATURE_NAME}
    if not listed:
        return entries
    stray = []
    for current, folders, names in os.walk(str(folder)):
        relative = os.path.relpath(current, str(folder)).replace(os.sep, "/")
        prefix = "" if relative == "." else relative + "/"
        if not prefix and ENGINE_CACHE_DIR in folders:
            folders.remove(ENGINE_CACHE_DIR)        # the device's engine cache of an earlier bundle
        links = [name for name in folders if os.path.islink(os.path.join(current, name))]
        stray += [prefix + name for name in sorted(names + links) if prefix + name not in listed]
    return stray


@contextlib.contextmanager
def export_lock(out: Path):
    """Held for a whole export into ``out``; an OutError at once when another export holds it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out.parent / f".{out.name}.export-lock"
    busy = OutError(f"another export into {out} is running (it holds {path}); wait for it to end, or pick "
                    "another --out")
    if fcntl is None:
        try:
            descriptor = os.open(str(path), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            raise busy from None
        try:
            yield
        finally:
            os.close(descriptor)
            os.unlink(str(path))
        return
    while True:
        descriptor = os.open(str(path), os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            raise busy from None
        # the holder before us may have removed the file after we opened it: then our lock is on a file
        # nobody else will open, so take the lock again on the file that is there now
        try:
            same = os.path.samestat(os.fstat(descriptor), os.stat(str(path)))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(descriptor)
    try:
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode("ascii"))
        yield
    finally:
        os.unlink(str(path))          # before the lock is released: the next export makes a new file
        os.close(descriptor)


def staging_folder(out: Path) -> Path:
    """A new, empty folder beside ``out`` (same file system, so the final rename is atomic)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=str(out.parent)))


def move_into_place(staging: Path, out: Path) -> None:
    """``staging`` becomes ``out``; what was at ``out`` (checked by ``check_out``) is removed only once the
    new bundle stands in its place, and put back if the rename fails."""
    if not os.path.lexists(str(out)):
        os.rename(str(staging), str(out))
        return
    previous = Path(tempfile.mkdtemp(prefix=f".{out.name}.previous-", dir=str(out.parent)))
    aside = previous / "bundle"
    os.rename(str(out), str(aside))
    try:
        os.rename(str(staging), str(out))
    except BaseException:
        os.rename(str(aside), str(out))
        shutil.rmtree(previous, ignore_errors=True)
        raise
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(previous, ignore_errors=True)
    else:
        aside.unlink()
        previous.rmdir()
