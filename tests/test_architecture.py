"""The package keeps its layers (docs/architecture.md): imports run only downward, and no modules import each other
in a loop. import-linter holds the layers (the contract in pyproject.toml, run by .ci/run); these tests show that it
does, and that it catches an import running back up."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's verdict on the pytest_rvv package found in ``package_parent``, with the project's contract."""
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")], cwd=package_parent,
                          env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


def test_the_package_keeps_its_layers():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_an_import_running_back_up_breaks_the_contract(tmp_path):
    copy = tmp_path / "pytest_rvv"
    shutil.copytree(ROOT / "pytest_rvv", copy, ignore=shutil.ignore_patterns("__pycache__"))
    store = copy / "base" / "store.py"
    store.write_text(store.read_text() + "\nfrom pytest_rvv.report import html  # noqa: E402  (deliberately upward)\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    assert "BROKEN" in result.stdout
    assert "pytest_rvv.base.store -> pytest_rvv.report.html" in result.stdout


def test_no_modules_import_each_other_in_a_loop():
    graph = grimp.build_graph("pytest_rvv")
    modules = sorted(graph.modules)
    loops = []
    for module in modules:
        for other in graph.find_modules_directly_imported_by(module):
            if other != module and graph.chain_exists(importer=other, imported=module):
                loops.append(f"{module} <-> {other}")
    assert not loops, loops
