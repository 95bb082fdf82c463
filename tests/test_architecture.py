"""The package keeps its layers (docs/architecture.md): imports run only downward, and no modules import each other
in a loop. import-linter holds the layers (the contract in pyproject.toml, run by .ci/run); these tests show that it
does, and that it catches an import running back up. Settings are read once: only config/settings.py reads the
process environment, and every variable pytest-rvv names is declared there."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

from pytest_rvv.config.settings import DECLARED, OPTIONS, VARIABLES

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


# Reads of the environment outside config/settings.py, each with its reason: pytest-xdist's own variables, read where
# xdist is asked about (they are not pytest-rvv's settings). Passing the environment through to a child process
# ({**os.environ, ...}) is no read.
NOT_SETTINGS = {
    ("run/choice.py", '"PYTEST_XDIST_WORKER"'): "pytest-xdist's: which worker this process is (its board)",
    ("measure/silicon.py", '"PYTEST_XDIST_WORKER_COUNT"'): "pytest-xdist's: how many workers share the machine",
}
READ = re.compile(r"\b(?:environ\.get|getenv|environ\.setdefault|environ\.pop)\(\s*([^,)]*)|\benviron\[\s*([^\]]*)\]")


def environment_reads(package: Path) -> list[tuple[str, str]]:
    """(module, what it reads) for every read of the process environment in ``package`` but config/settings.py's."""
    return [(str(module.relative_to(package)), (m.group(1) or m.group(2)).strip())
            for module in sorted(package.rglob("*.py")) if module.relative_to(package) != Path("config/settings.py")
            for m in READ.finditer(module.read_text())]


def test_only_the_settings_read_the_environment():
    """Every other module is handed its setting (Settings, a NamedSource) or asks config/settings.environment()."""
    reads = environment_reads(ROOT / "pytest_rvv")
    assert [r for r in reads if r not in NOT_SETTINGS] == []
    assert sorted(reads) == sorted(NOT_SETTINGS)  # each exception is still needed


def test_a_direct_read_of_a_variable_breaks_the_rule(tmp_path):
    copy = tmp_path / "pytest_rvv"
    shutil.copytree(ROOT / "pytest_rvv", copy, ignore=shutil.ignore_patterns("__pycache__"))
    for module, line in (("toolchain/choice.py", "SOURCE = os.environ.get(SOURCE_ENV)"),
                         ("base/tools.py", 'TOOLS = os.getenv("PYTEST_RVV_TOOLS_DIR")'),
                         ("report/results.py", 'SUMMARY = os.environ["GITHUB_STEP_SUMMARY"]')):
        (copy / module).write_text((copy / module).read_text() + f"\n{line}\n")
    assert sorted(set(environment_reads(copy)) - set(NOT_SETTINGS)) == [
        ("base/tools.py", '"PYTEST_RVV_TOOLS_DIR"'), ("report/results.py", '"GITHUB_STEP_SUMMARY"'),
        ("toolchain/choice.py", "SOURCE_ENV")]


def test_every_variable_pytest_rvv_names_is_declared_once_in_the_settings():
    names = [o.env for o in OPTIONS if o.env] + [v.name for v in VARIABLES]
    assert len(names) == len(set(names)), names
    named = {name for module in (ROOT / "pytest_rvv").rglob("*.py")
             for name in re.findall(r"\bPYTEST_RVV_[A-Z0-9_]+", module.read_text())}
    assert named - DECLARED == set()
    assert all(v.help and v.default for v in VARIABLES)
