"""The README and the guides a newcomer follows: every relative link resolves to a file of this checkout, lines
stay within the house's 120 columns, and the README's test command is the one `.ci/run` runs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs" / "guides").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")          # [text](target)
MAX_COLUMNS, MAX_README_LINES = 120, 160


def names(paths):
    return [str(path.relative_to(REPO)) for path in paths]


def test_the_guides_exist():
    guides = {path.name for path in DOCS[1:]}
    assert {"deploy-raspberry-pi.md", "deploy-jetson.md", "deploy-coral.md", "deploy-pi-ncs2.md", "mechanisms.md",
            "camera.md", "benchmarks.md", "security.md"} <= guides


@pytest.mark.parametrize("doc", DOCS, ids=names(DOCS))
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):    # a URL or an anchor
            continue
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or REPO not in path.parents:
            broken.append(target)
    assert not broken, f"{doc.relative_to(REPO)} links to files that do not exist in this checkout: {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=names(DOCS))
def test_lines_fit_120_columns(doc):
    long = [number for number, line in enumerate(doc.read_text().splitlines(), 1) if len(line) > MAX_COLUMNS]
    assert not long, f"{doc.relative_to(REPO)}: lines over {MAX_COLUMNS} characters: {long}"


def test_readme_stays_short():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/guides/"


def readme_commands():
    """The README's set-up commands, a command continued over lines (a trailing backslash) read as one line."""
    text = re.sub(r" \\\n\s*", " ", (REPO / "README.md").read_text())
    return [line for line in text.splitlines() if line.startswith("python3 -m venv ")]


def test_readme_test_command_is_the_one_ci_runs():
    """The README's second set-up command, with its venv as .ci/run's "$VENV" and without pip's -q (quiet output
    in CI only), must be .ci/run's command character for character."""
    ci_lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
                if line.startswith('python3 -m venv "$VENV"')]
    assert len(ci_lines) == 1, ".ci/run should create its venv and run the tests in one line"
    ci = re.sub(r'"\$VENV(/[^"]*)?"', r".venv-test\1", ci_lines[0]).replace("/bin/pip install -q ", "/bin/pip install ")
    assert ci in readme_commands(), f"README.md lacks .ci/run's test command: {ci}"


def test_the_two_readme_commands_use_separate_venvs():
    venvs = [line.split()[3] for line in readme_commands()]
    assert len(venvs) == 2 and venvs[0] != venvs[1], f"README set-up commands and their venvs: {venvs}"
