"""The correctness suite run by pytest on small models, through the real tools."""

import pytest

from pytest_rvv.base.store import Store
from pytest_rvv.base.wheels import fetch_from_wheel
from pytest_rvv.toolchain.runtimes import AARCH64_WHEEL_PLATFORM

from .conftest import USER_CACHE

RISCV64_SKIP = ("no riscv64 IREE runtime: build one with `bash scripts/setup.sh runtime` (from IREE's source: a git "
                "clone at the compiler's commit, or PYTEST_RVV_IREE_SRC=DIR|TARBALL), or pass "
                "--rvv-runtime-riscv64=PATH")


def test_riscv64_compiles_and_execution_skips_with_one_line_reason(project, without_riscv64_runtime):
    project.write()
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gcv-zvl256b,host")
    result.assert_outcomes(passed=3, skipped=1)
    result.stdout.fnmatch_lines([
        "PASSED correctness/test_compile.py::test_compiles[[]mlp-rv64gcv-zvl256b[]]",
        f"SKIPPED [[]1[]] correctness/test_agreement.py:*: {RISCV64_SKIP}*",
    ])


def test_supplied_riscv64_runtime_that_does_not_exist_is_a_usage_error(project, tmp_path):
    project.write()
    result = project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=rv64gc",
                         f"--rvv-runtime-riscv64={tmp_path}/nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --rvv-runtime-riscv64 {tmp_path}/nope: no such file; give the path*"])


def test_unexpected_pass_of_an_expected_failure_fails_until_removed(project):
    project.write()
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "expected-failures.toml").write_text(
        '[host]\nmlp = { phase = "agreement", reason = "was wrong once" }\n')
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=host")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["FAILED correctness/test_agreement.py::test_matches_onnxruntime[[]mlp-host[]]*"])
    result.stdout.fnmatch_lines(["[[]XPASS(strict)[]] expected agreement failure on host: was wrong once"])


def test_expected_compile_failure_is_xfailed_with_the_compiler_error(project):
    project.write(models=("strings",))
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "expected-failures.toml").write_text(
        '[aarch64]\nstrings = { phase = "compile", reason = "StringNormalizer is not supported" }\n')
    result = project.run("correctness", "--rvv-models=strings", "--rvv-targets=aarch64")
    result.assert_outcomes(xfailed=2)


def test_unsupported_operator_fails_with_the_compilers_first_error(project):
    project.write(models=("strings",))
    result = project.run("correctness/test_compile.py", "--rvv-models=strings", "--rvv-targets=rv64gc")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "CompileFailed: iree-compile rejected model 'strings' for target 'rv64gc': *failed to legalize operation*"
        "onnx.StringNormalizer*",
    ])


def test_expected_failure_file_with_bad_phase_names_file_and_entry(project):
    project.write()
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "expected-failures.toml").write_text(
        '[host]\nmlp = { phase = "link", reason = "x" }\n')
    result = project.run("correctness", "--rvv-models=mlp")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */baselines/expected-failures.toml: [[]host[]] mlp: phase must be one of "
                                 "compile, run, agreement, got 'link'"])


@pytest.mark.parametrize(("content", "message"), [
    (None, "*ModelError: */mlp.onnx: model file not found*"),
    (b"this is not protobuf \x00\xff", "*ModelError: */mlp.onnx: not a valid ONNX model (DecodeError); re-export*"),
])
def test_missing_or_corrupt_onnx_file_is_one_line_naming_it(project, content, message):
    project.write()
    model = project.path / "mlp.onnx"
    model.unlink()
    if content is not None:
        model.write_bytes(content)
    result = project.run("correctness/test_compile.py", "--rvv-models=mlp", "--rvv-targets=host")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])


def test_two_xdist_workers_share_one_cache_entry_per_compile(project, tmp_path):
    project.write()
    cache = tmp_path / "cache"
    # the compile and the agreement test need the same module; with -n 2 they run in two workers
    result = project.run("correctness", "-n", "2", "--rvv-models=mlp", "--rvv-targets=host",
                         f"--rvv-cache-dir={cache}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*2 workers*"])
    assert len(list(cache.glob("imports/*/*/model.mlir"))) == 1
    modules = sorted(p.parent for p in cache.glob("compile/*/*/module.vmfb"))
    assert len(modules) == 2  # the model's module and the runtime probe's
    assert not list(cache.rglob("*.build")), "no half-built entry may remain"


def test_corrupt_compile_cache_entry_is_rebuilt(project, tmp_path):
    project.write()
    cache = tmp_path / "cache"
    args = ("correctness/test_compile.py", "--rvv-models=mlp", "--rvv-targets=host", f"--rvv-cache-dir={cache}")
    project.run(*args).assert_outcomes(passed=1)
    [module] = cache.glob("compile/*/*/module.vmfb")
    module.write_bytes(b"garbage")
    project.run(*args).assert_outcomes(passed=1)
    [rebuilt] = cache.glob("compile/*/*/module.vmfb")
    assert rebuilt.read_bytes()[:8] != b"garbage"


def test_missing_emulator_is_one_line_naming_it_and_the_fix(project, tmp_path):
    project.write()
    result = project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=aarch64",
                         f"--rvv-qemu-dir={tmp_path}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"ToolMissing: --rvv-qemu-dir {tmp_path}: no qemu-aarch64 there"])


def test_runtime_from_another_iree_release_is_reported_as_a_mismatch(project):
    old = fetch_from_wheel(Store(USER_CACHE), "iree-base-runtime==3.0.0",
                           {"iree-run-module": "iree/_runtime_libs/iree-run-module"},
                           platform=AARCH64_WHEEL_PLATFORM, python_version="3.11", executable=("iree-run-module",))
    project.write()
    result = project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=aarch64",
                         f"--rvv-runtime-aarch64={old.file('iree-run-module')}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "RuntimeMismatch: user-supplied */iree-run-module cannot load modules from IREE compiler version 3.13.0*: "
        "*required module features * are not available in this runtime configuration*; "
        "use a runtime built from the same IREE release",
    ])


def test_disagreement_prints_error_figures_worst_positions_and_repro(project):
    project.write()
    pyproject = project.path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\ntolerance = { atol = 0.0, rtol = 0.0 }\n")
    result = project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=host")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E * mlp on host disagrees with onnxruntime",
        "E * tolerance atol=0 rtol=0",
        "E * output 0 [[]4, 8[]]: max abs err *, max rel err *, */32 elements mismatch (*%)",
        "E * worst: [[]*[]] got * want *",
        "E * repro: */iree-run-module --device=local-sync --module=*/module.vmfb --function=mlp --input=@*",
    ])


def test_update_baselines_rewrites_the_expected_failure_list_from_the_run(project):
    project.write(models=("mlp", "strings"))
    (project.path / "baselines").mkdir()
    listing = project.path / "baselines" / "expected-failures.toml"
    listing.write_text('[host]\nmlp = { phase = "agreement", reason = "was wrong once" }\n')
    result = project.run("correctness", "--rvv-models=mlp,strings", "--rvv-targets=host", "--update-baselines")
    result.stdout.fnmatch_lines(["*expected failure removed (passes now): [[]host[]] mlp",
                                 "*expected failure recorded: [[]host[]] strings (compile: iree-compile rejected*"])
    text = listing.read_text()
    assert "mlp" not in text and '"strings" = { phase = "compile"' in text
    again = project.run("correctness", "--rvv-models=mlp,strings", "--rvv-targets=host")
    again.assert_outcomes(passed=2, xfailed=2)
