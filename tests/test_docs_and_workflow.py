"""The repository checks its own CI file and its documentation (.ci/run and `tox -e lint` run both): the workflow
passes actionlint (runner labels in .github/actionlint.yaml, shellcheck on its run: steps) and the docs build with
`mkdocs build --strict`; these tests show that they do, and that each check catches what it is there for. The README
stays a page of commands whose links lead into docs/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent  # the dev extra installs actionlint, shellcheck and mkdocs beside pytest


def actionlint(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "actionlint"), f"-shellcheck={BIN / 'shellcheck'}", "-pyflakes=", "-oneline"],
                          cwd=project, capture_output=True, text=True, timeout=120)


def mkdocs_build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(site)], cwd=project,
                          capture_output=True, text=True, timeout=300)


def test_the_workflow_passes_actionlint():
    result = actionlint(ROOT)
    assert result.returncode == 0 and not result.stdout, result.stdout + result.stderr


def test_actionlint_fails_an_action_on_node20_a_riscv_runner_it_was_not_told_of_and_an_unquoted_variable(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / ".github", project / ".github")
    subprocess.run(["git", "init", "-q", str(project)], check=True)  # actionlint finds the project by its .git
    workflow = project / ".github" / "workflows" / "pytest-rvv.yml"
    text = workflow.read_text()
    assert "actions/cache@v6" in text and '--rvv-targets="$TARGETS"' in text
    workflow.write_text(text.replace("actions/cache@v6", "actions/cache@v4", 1)
                        .replace('--rvv-targets="$TARGETS"', "--rvv-targets=$TARGETS", 1))
    (project / ".github" / "actionlint.yaml").unlink()
    found = actionlint(project)
    assert found.returncode == 1
    assert 'runtime "node20" is deprecated' in found.stdout and "actions/cache@v4" in found.stdout
    assert 'label "ubuntu-24.04-riscv" is unknown' in found.stdout
    assert "SC2086" in found.stdout  # shellcheck runs on the run: steps
    assert len(found.stdout.splitlines()) == 3, found.stdout


def test_the_docs_build_strictly(tmp_path):
    result = mkdocs_build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "upgrade" / "index.html").is_file()


def test_a_broken_link_or_anchor_in_the_docs_fails_the_build(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project)
    guide = project / "docs" / "upgrade.md"
    guide.write_text(guide.read_text().replace("(reference.md#runtimes)", "(reference.md#runtime)", 1))
    result = mkdocs_build(project, tmp_path / "site")
    assert result.returncode == 1
    assert "link 'reference.md#runtime', but the doc 'reference.md' does not contain an anchor" in result.stderr


def test_the_readme_is_the_two_commands_a_screen_and_links_into_the_docs():
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= 250
    assert lines[2:6] == [
        "```sh",
        "bash scripts/setup.sh && .venv/bin/pytest suites/ -n auto      # set up, then run the regression suites",
        "bash scripts/setup.sh && .venv/bin/pytest tests/ -n auto       # set up, then run pytest-rvv's own tests",
        "```"]
    links = re.findall(r"\]\(([^)#:]+)(?:#([^)]+))?\)", readme)
    assert {"docs/upgrade.md", "docs/models-and-targets.md", "docs/kernels.md", "docs/boards.md", "docs/ci.md",
            "docs/checks.md", "docs/reference.md"} <= {path for path, _ in links}
    for path, anchor in links:
        target = ROOT / path
        assert target.is_file(), path
        if anchor:
            slugs = {re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", heading.strip().lower()))
                     for heading in re.findall(r"^#{1,6} (.+)$", target.read_text(), flags=re.M)}
            assert anchor in slugs, f"{path}#{anchor}"
