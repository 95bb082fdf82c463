"""Two toolchains side by side in one run (--rvv-compare), through real compiles, QEMU and onnxruntime."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_rvv.toolchain.toolchain import find_toolchain

from .conftest import SUITES

VECTOR = "rv64gcv-zvl256b"
# An iree-compile that drops the vector extension from every target: a deliberate regression built from flags.
NO_VECTOR_WRAPPER = """#!/usr/bin/env bash
shopt -s extglob
real={real}
if [[ " $* " == *" --version "* ]]; then
  "$real" --version | sed 's/\\(compiler version .*\\)/\\1 (+v dropped)/'; exit
fi
args=()
for a in "$@"; do a="${{a//,+v/}}"; args+=("${{a//,+zvl+([0-9])b/}}"); done
exec "$real" "${{args[@]}}"
"""


def build_dir(path: Path, script: str | None = None) -> Path:
    """An IREE "build directory" whose bin/iree-compile is the installed wheel's binary (or a wrapper of it)."""
    (path / "bin").mkdir(parents=True)
    real = find_toolchain().iree_compile
    compiler = path / "bin" / "iree-compile"
    if script is None:
        compiler.symlink_to(real)
    else:
        compiler.write_text(script.format(real=real))
        compiler.chmod(0o755)
    return path


@pytest.fixture
def comparison_project(project):
    project.write(models=("mlp", "convs"), suite=False)
    (project.path / "performance").mkdir()
    shutil.copy(SUITES / "performance" / "test_toolchains.py", project.path / "performance")
    return project


def test_without_a_reference_the_comparisons_are_deselected(comparison_project):
    result = comparison_project.run("performance", "--rvv-models=mlp", f"--rvv-targets={VECTOR}")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["*1 deselected*"])


def test_a_deliberate_regression_fails_named_by_dispatch_and_the_reverse_passes(comparison_project, tmp_path):
    scalar = build_dir(tmp_path / "no-vector", NO_VECTOR_WRAPPER)
    wheel = build_dir(tmp_path / "wheel")
    repro = tmp_path / "repro"
    result = comparison_project.run("performance", "--rvv-models=mlp", f"--rvv-targets={VECTOR}",
                                    f"--rvv-iree-build={scalar}", f"--rvv-compare={wheel}", f"--rvv-repro={repro}",
                                    f"--rvv-report={tmp_path / 'report'}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "rvv: compare: reference IREE compiler version * (your IREE build *wheel)*",
        "*the toolchain under test adds work: mlp on rv64gcv-zvl256b",
        "*dispatch_*: was vectorized (* vector of * instructions), now scalar (0 vector of * instructions)",
        "dispatches whose executed instructions moved (reference -> under test), most added work first:",
        "disassembly of dispatch_* (reference -> under test, addresses normalized): *",
        f"reproducer: {repro}/mlp-{VECTOR}/README.md",
        "REGRESSED  mlp on rv64gcv-zvl256b: executed * -> * instructions *",
    ])
    diff = (repro / f"mlp-{VECTOR}" / "asm.diff").read_text()
    assert diff.count("\n") > 3
    report = (tmp_path / "report" / "comparison.md").read_text()
    assert "## mlp on rv64gcv-zvl256b: REGRESSED" in report
    assert "\n".join(f"  {line}" for line in diff.splitlines()) in report  # the whole diff, not the terminal's top

    reverse = comparison_project.run("performance", "--rvv-models=mlp", f"--rvv-targets={VECTOR}",
                                     f"--rvv-compare={scalar}")
    reverse.assert_outcomes(passed=1)
    reverse.stdout.fnmatch_lines(["*less work  mlp on rv64gcv-zvl256b: executed * -> * instructions (-*"])


def test_the_same_toolchain_twice_is_refused_in_one_line(comparison_project, tmp_path):
    result = comparison_project.run("performance", "--rvv-models=mlp", f"--rvv-compare={build_dir(tmp_path / 'w')}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rvv-compare */w: this is the toolchain under test itself (IREE compiler "
                                 "version *); name another release, wheel or build"])


@pytest.mark.parametrize(("spec", "line"), [
    ("iree-base-compiler==0.0.1", "ERROR: --rvv-compare iree-base-compiler==0.0.1: pip cannot install it: ERROR: "
                                  "No matching distribution found for iree-base-compiler==0.0.1"),
    ("iree base compiler!", "ERROR: --rvv-compare 'iree base compiler!': not a directory, a wheel or a pip "
                            "requirement (*)"),
    ("{tmp}", "ERROR: --rvv-compare {tmp}: no iree-compile in tools/, bin/, install/bin/; build the iree-compile "
              "target (or install) there first"),
])
def test_a_reference_that_cannot_be_had_is_one_line(comparison_project, tmp_path, spec, line):
    result = comparison_project.run("performance", "--rvv-models=mlp", f"--rvv-compare={spec.format(tmp=tmp_path)}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line.format(tmp=tmp_path)])


def test_two_real_releases_a_dispatch_table_and_a_reproducer_that_works_elsewhere(comparison_project, tmp_path):
    """iree-base-compiler 3.12.0 (from PyPI, installed once into the tools cache) vs the installed 3.13.0, on two
    convs whose code moved between them (a small model, so the reproducer recompiles and reruns in seconds)."""
    repro = tmp_path / "repro"
    result = comparison_project.run("performance", "--rvv-models=convs", f"--rvv-targets={VECTOR}",
                                    "--rvv-compare=iree-base-compiler==3.12.0", "--rvv-strict-baselines",
                                    f"--rvv-repro={repro}")
    result.assert_outcomes(failed=1)  # strict: any moved dispatch fails
    result.stdout.fnmatch_lines([
        "reference:  IREE compiler version 3.12.0*", "under test: IREE compiler version 3.13.0*",
        "dispatches whose executed instructions moved (reference -> under test), most added work first:",
        "  dispatch_*_conv_*: * -> * (+*); vector * -> *",
    ])
    table = result.outlines.index(
        "dispatches whose executed instructions moved (reference -> under test), most added work first:")
    name = result.outlines[table + 1].split(":")[0].strip()  # the one adding the most work
    copy = tmp_path / "elsewhere"
    shutil.copytree(repro / f"convs-{VECTOR}", copy)
    for side in ("reference", "under-test"):
        shutil.rmtree(copy / side)
    readme = (copy / "README.md").read_text()
    assert "bash compile.sh" in readme and "bash run.sh" in readme and f"bash dispatch.sh reference {name}" in readme
    env = stock_python_env(tmp_path / "stock-bin")  # "elsewhere": python3 is Debian's own, which has no numpy
    subprocess.run(["bash", "compile.sh"], cwd=copy, check=True, capture_output=True, env=env)
    run = subprocess.run(["bash", "run.sh"], cwd=copy, capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^reference: output_0\.npy max abs error vs onnxruntime \S+$", run.stdout, re.M)
    assert re.search(r"^under-test: output_0\.npy max abs error vs onnxruntime \S+$", run.stdout, re.M)
    assert run.stdout.endswith("all outputs agree with onnxruntime (atol=0.0001 rtol=0.001)\n")
    listings = [subprocess.run(["bash", "dispatch.sh", side, name], cwd=copy, check=True, capture_output=True,
                               text=True, env=env).stdout for side in ("reference", "under-test")]
    assert all(listings) and listings[0] != listings[1]

    output = copy / "under-test" / "output_0.npy"  # one output element off by 0.01: check.py (run.sh's last step)
    perturbed = np.load(output)
    perturbed.flat[5] += 0.01
    np.save(output, perturbed)
    check = subprocess.run(["python3", "check.py", "reference", "under-test"], cwd=copy, capture_output=True,
                           text=True, env=env, check=False)
    assert check.returncode == 1, check.stdout + check.stderr
    assert re.search(r"^under-test: output_0\.npy max abs error vs onnxruntime 0\.01, 1/192 elements beyond the "
                     r"tolerance$", check.stdout, re.M), check.stdout
    assert check.stderr == "disagrees with onnxruntime (atol=0.0001 rtol=0.001): under-test/output_0.npy\n"


def stock_python_env(folder: Path) -> dict[str, str]:
    """An environment whose ``python3`` is Debian's /usr/bin/python3 (no numpy there), as on a machine without
    pytest-rvv; pytest-rvv's virtual environment is neither on PATH nor otherwise visible."""
    stock = Path("/usr/bin/python3")
    if not stock.is_file():
        pytest.skip("no /usr/bin/python3 (not Debian)")
    folder.mkdir()
    (folder / "python3").symlink_to(stock)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([str(folder), *(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)])
    probe = subprocess.run(["python3", "-c", "import numpy"], env=env, capture_output=True, text=True, check=False)
    assert "No module named 'numpy'" in probe.stderr, "this check needs a python3 without numpy, as Debian's is"
    return env


def test_across_a_hal_version_change_each_side_runs_riscv64_code_in_its_own_runtime(comparison_project, tmp_path):
    """3.11.0 (HAL module version 6) vs 3.12.0 (7): no single runtime loads both. Each side gets its own (3.11.0's
    built from its commit, 3.12.0's the nearest that loads), both really run, and the dispatch table names changes."""
    from pytest_rvv.toolchain.environments import environment_of, toolchain_from_spec

    from .conftest import USER_TOOLS
    from .test_runtime_choice import B48, E4A, release_runtime

    own = {commit: release_runtime(commit) for commit in (B48, E4A)}
    env312 = environment_of(toolchain_from_spec("iree-base-compiler==3.12.0", USER_TOOLS))
    repro = tmp_path / "repro"
    result = comparison_project.run("performance", "--rvv-models=convs", "--rvv-targets=rv64gc," + VECTOR,
                                    f"--rvv-iree-build={env312}", "--rvv-compare=iree-base-compiler==3.11.0",
                                    "--rvv-compare-report-only", f"--rvv-repro={repro}", "-n", "2")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"rvv: riscv64 runtime {own[B48]}, built by pytest-rvv from IREE b48a5955* "
                                 "(nearest that loads)*",
                                 f"rvv: reference's riscv64 runtime {own[E4A]}, built by pytest-rvv from IREE e4a3b040*"
                                 " (the compiler's own commit)*"])
    for target in ("rv64gc", VECTOR):  # executed counts on both sides: both ran
        result.stdout.fnmatch_lines([f"*convs on {target}: executed * -> * instructions*"])


def test_a_path_the_reference_compiler_lacks_is_one_line_and_the_side_under_test_still_runs(comparison_project):
    """IREE 3.11.0 has no --iree-llvmcpu-enable-inner-tiled (3.13.0 has): the reference cannot run the inner-tiled
    twin, which the header says once; the cell under test compiles, runs and passes with the note. (A matmul alone:
    3.13.0's inner-tiled path cannot compile the mlp, whose bias add it fails to legalize.)"""
    comparison_project.write(models=("gemm",), suite=False)
    (comparison_project.path / "performance").mkdir(exist_ok=True)
    shutil.copy(SUITES / "performance" / "test_toolchains.py", comparison_project.path / "performance")
    shutil.copytree(SUITES / "correctness", comparison_project.path / "correctness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    result = comparison_project.run("performance", "correctness", "--rvv-models=gemm",
                                    "--rvv-targets=rv64gcv-zvl256b-inner", "--rvv-compare=iree-base-compiler==3.11.0",
                                    "--rvv-compare-report-only")
    result.stdout.fnmatch_lines(["rvv: rv64gcv-zvl256b-inner: the inner-tiled path needs "
                                 "--iree-llvmcpu-enable-inner-tiled, which iree-compile 3.11.0 does not have: "
                                 "it could not run"])
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["PASSED *test_matches_onnxruntime*gemm-rv64gcv-zvl256b-inner*"])
    result.stdout.fnmatch_lines(["PASSED *test_toolchain_under_test_adds_no_work*gemm-rv64gcv-zvl256b-inner*"])


def test_a_report_only_comparison_colours_the_grid_by_the_comparison_and_ranks_by_added_work(comparison_project,
                                                                                              tmp_path):
    """--rvv-compare-report-only passes every test, so the grid's outcome alone would be all green: each compared
    cell carries its comparison verdict and its colour, the sections come most added work first, and a chart ranks
    the dispatches by the instructions they add."""
    import html as html_module
    import re as re_module

    scalar = build_dir(tmp_path / "no-vector", NO_VECTOR_WRAPPER)
    wheel = build_dir(tmp_path / "wheel")
    report = tmp_path / "report"
    result = comparison_project.run("performance", "--rvv-models=mlp,convs", f"--rvv-targets=rv64gc,{VECTOR}",
                                    f"--rvv-iree-build={scalar}", f"--rvv-compare={wheel}", "--rvv-compare-report-only",
                                    f"--rvv-report={report}")
    result.assert_outcomes(passed=4)
    page = (report / "index.html").read_text()
    cells = re_module.findall(r'<td class="cell (\w[\w-]*)" data-verdict="passed" data-compared="([^"]+)"', page)
    # the scalar target's code does not change; whether its run-time noise reads as churn or same, it is green
    assert sorted(cells)[:2] == [("failed", "REGRESSED"), ("failed", "REGRESSED")]
    assert {colour for colour, status in sorted(cells)[2:]} == {"passed"}
    sections = re_module.findall(r"<h3[^>]*>(\w+) on ([\w-]+): ([\w ]+?)(?: \(|</h3>)", html_module.unescape(
        page.split("<h2>Toolchain comparison</h2>")[1].split("<h2>")[0]))
    assert [status for _, _, status in sections][:2] == ["REGRESSED", "REGRESSED"]
    assert {status for _, _, status in sections[2:]} <= {"same", "churn"}
    assert "Toolchain comparison: the dispatches that execute more, most added work first" in page


def test_with_a_wall_time_asked_both_sides_of_a_model_cell_are_traced_and_their_dram_traffic_compared(
        comparison_project, tmp_path):
    """--rvv-wall-time on a model cell (as the kernel suite's cells always): both toolchains' runs go through the X60's
    modelled caches, and the comparison says one call's DRAM bytes before and after; without it, nothing is traced."""
    scalar = build_dir(tmp_path / "no-vector", NO_VECTOR_WRAPPER)
    wheel = build_dir(tmp_path / "wheel")
    args = ("performance", "--rvv-models=mlp", f"--rvv-targets={VECTOR}", f"--rvv-iree-build={scalar}",
            f"--rvv-compare={wheel}", "--rvv-compare-report-only")
    traced = comparison_project.run(*args, "--rvv-wall-time=x60:1", f"--rvv-report={tmp_path / 'traced'}")
    traced.assert_outcomes(passed=1)
    assert "one call's modelled DRAM traffic on spacemit-x60's caches: " in (
        tmp_path / "traced" / "comparison.md").read_text()
    plain = comparison_project.run(*args, f"--rvv-report={tmp_path / 'plain'}")
    plain.assert_outcomes(passed=1)
    assert "DRAM" not in (tmp_path / "plain" / "comparison.md").read_text()
