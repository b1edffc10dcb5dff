"""The path onto a board, as a board owner walks it (issue 54): keys that git ignores, the backend that
ran named, an Edge TPU compile that works with or without the compiler here, one FPS, no announced file
that was not written, and a preview without GUI support that says what to use instead."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sensorveil.cli import main

REPO = Path(__file__).resolve().parents[1]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
pytest.importorskip("cryptography", reason="keys generate needs the sign extra (cryptography)")


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@needs_git
def test_the_readme_key_folder_is_ignored_by_this_repository():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    assert subprocess.run(["git", "check-ignore", "-q", "keys/signer.key"], cwd=REPO).returncode == 0


@needs_git
def test_keys_generate_warns_when_git_would_commit_the_private_key(tmp_path, capsys):
    project = git_init(tmp_path / "project")
    assert main(["keys", "generate", "--out", str(project / "keys")]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "signer.key" in err and "keys/" in err and ".gitignore" in err


@needs_git
def test_keys_generate_is_quiet_where_git_ignores_the_key_or_there_is_no_git(tmp_path, capsys):
    project = git_init(tmp_path / "project")
    (project / ".gitignore").write_text("keys/\n")
    assert main(["keys", "generate", "--out", str(project / "keys")]) == 0
    assert "warning" not in capsys.readouterr().err
    outside = tmp_path / "not-a-repo" / "keys"
    assert main(["keys", "generate", "--out", str(outside)]) == 0
    assert "warning" not in capsys.readouterr().err
