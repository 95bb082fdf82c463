"""ONNX node tests: selection, per-phase strict expected failures, summary, rewriting the lists."""

import shutil

import pytest

from pytest_rvv.conformance.node_tests import DEFAULT_SUBSET, select

from .conftest import SUITES

ARGS = ("conformance", "--rvv-ops=test_abs,test_slice", "--rvv-targets=host")


def conformance_project(project):
    project.write(suite=False)
    shutil.copytree(SUITES / "conformance", project.path / "conformance", ignore=shutil.ignore_patterns("__pycache__"))
    return project


def test_selection_by_names_and_globs():
    names = ["test_abs", "test_add", "test_add_bcast", "test_conv_with_strides_padding", "test_basic_conv_with_padding"]
    assert select(names, "test_add") == ["test_add"]
    assert select(names, "add*") == ["test_add", "test_add_bcast"]
    assert select(names, "conv*,test_abs") == ["test_conv_with_strides_padding", "test_abs"]
    assert select(names, "all") == names
    assert select(names, None) == [n for n in DEFAULT_SUBSET if n in names]


def test_new_failures_fail_with_their_phase_and_update_lists_them(project):
    conformance_project(project)
    first = project.run(*ARGS)
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(["new compile failure: iree-compile rejected model 'test_slice' for target 'host': "
                                "model.mlir:*: error: *"])
    project.run(*ARGS, "--update-baselines").stdout.fnmatch_lines(
        ["*/baselines/conformance/host.toml: 1 expected failures (1 added, 0 removed)"])
    listing = (project.path / "baselines" / "conformance" / "host.toml").read_text()
    assert "[compile]\ntest_slice = " in listing
    again = project.run(*ARGS)
    again.assert_outcomes(passed=1, xfailed=1)
    again.stdout.fnmatch_lines(["host: 2 tests: 1 passed, 1 expected compile failure"])


def test_a_listed_test_that_now_passes_is_an_improvement_unless_strict(project):
    conformance_project(project)
    (project.path / "baselines" / "conformance").mkdir(parents=True)
    (project.path / "baselines" / "conformance" / "host.toml").write_text('[mismatch]\ntest_abs = "was wrong"\n')
    result = project.run(*ARGS)
    result.assert_outcomes(passed=1, failed=1)  # test_slice is a new compile failure (not listed)
    result.stdout.fnmatch_lines(["host: 2 tests: * 1 new pass (listed)*",
                                 "new passes are improvements: record them with --update-baselines*"])
    strict = project.run(*ARGS, "--rvv-strict-baselines")
    strict.stdout.fnmatch_lines(["unexpectedly passes (--rvv-strict-baselines): test_abs now passes on host: remove "
                                 "it from [[]mismatch[]] in */host.toml (or rerun with --update-baselines)"])


@pytest.mark.parametrize(("listing", "message"), [
    ('[run]\ntest_slice = "crashed once"\n',
     "new compile failure (listed as an expected run failure in */host.toml): iree-compile rejected*"),
])
def test_expected_failures_are_strict_and_kept_apart_by_phase(project, listing, message):
    conformance_project(project)
    (project.path / "baselines" / "conformance").mkdir(parents=True)
    (project.path / "baselines" / "conformance" / "host.toml").write_text(listing)
    result = project.run(*ARGS)
    result.stdout.fnmatch_lines([message])


def test_riscv64_without_runtime_compiles_only(project, without_riscv64_runtime):
    conformance_project(project)
    result = project.run("conformance", "--rvv-ops=test_abs", "--rvv-targets=rv64gcv-zvl256b")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["rv64gcv-zvl256b: 1 tests: 1 compiled only"])


def test_per_test_tolerance_override_can_turn_a_pass_into_a_mismatch(project):
    conformance_project(project)
    (project.path / "baselines" / "conformance").mkdir(parents=True)
    (project.path / "baselines" / "conformance" / "tolerances.toml").write_text(
        "test_softmax_axis_1 = { atol = -1.0, rtol = 0.0 }\n")  # nothing can be within a negative tolerance
    result = project.run("conformance", "--rvv-ops=test_softmax_axis_1,test_abs", "--rvv-targets=host")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["new mismatch failure: tolerance atol=-1 rtol=0; output 0 *"])
