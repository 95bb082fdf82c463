"""ONNX node tests: selection, per-phase strict expected failures, summary, rewriting the lists."""

import shutil

import pytest

from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.conformance.batch import NodeBatches, plain_function
from pytest_rvv.conformance.node_tests import DEFAULT_SUBSET, node_tests, select
from pytest_rvv.run.recorded import OUTPUTS
from pytest_rvv.session import RvvSession

from .conftest import SUITES, USER_CACHE

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


def test_node_tests_compile_as_one_module_per_target_and_each_gives_what_it_gives_alone(tmp_path):
    """The selection's tests share one module per target (conformance/batch.py); each runs its own function of it,
    with bit-identical outputs to its own module's, and a listed compile failure compiles alone."""
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)}, tmp_path))
    tests = node_tests(session.store)
    names = ("test_abs", "test_matmul_2d", "test_softmax_axis_1", "test_conv_with_strides_padding")
    chosen = [tests[name] for name in names]
    batches = NodeBatches(session, chosen)
    target = BUILTIN_TARGETS["rv64gcv-zvl256b"]
    runner = session.runner(target)
    modules = set()
    for test in chosen:
        batched = batches.artifact(test, target, ())
        assert batched is not None and batched.model == test.name
        modules.add(batched.path)
        imported = session.compiler.import_onnx(test.name, test.model, None)
        alone = session.compiler.compile(test.name, imported, target)
        assert batched.function == alone.function and batched.path != alone.path
        inputs, expected = test.load("input"), test.load("output")
        shared = session.runs.run(OUTPUTS, batched, runner, inputs, len(expected), None).outputs
        own = session.runs.run(OUTPUTS, alone, runner, inputs, len(expected), None).outputs
        for a, b in zip(shared, own, strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), test.name
    assert len(modules) == 1
    assert batches.artifact(chosen[0], target, {"test_abs"}) is None  # listed as an import/compile failure: alone
    assert [m.test for m in batches.members(frozenset({"test_abs"}))] == [t.name for t in chosen[1:]]


def test_only_a_module_of_one_plain_function_joins_a_batch():
    plain = 'module {\n  func.func @test_x(%a: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {\n  }\n}\n'
    assert plain_function(plain) == plain.splitlines()[1] + "\n  }"
    helper = plain.replace("module {\n", "module {\n  func.func private @helper() {\n  }\n")
    resources = plain + '\n{-#\n  dialect_resources: {builtin: {w: "0x04000000"}}\n#-}\n'
    for other in (helper, resources, plain.replace("module {", 'module attributes {x = 1} {')):
        assert plain_function(other) is None


def test_targets_with_the_same_counts_share_one_summary_line(project):
    conformance_project(project)
    result = project.run("conformance", "--rvv-ops=test_abs,test_add", "--rvv-targets=host,aarch64,rv64gc")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*rvv ONNX conformance*", "aarch64, host, rv64gc: 2 tests each: 2 passed"])
