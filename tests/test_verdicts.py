"""judge/'s rules return one verdict shape (judge/outcome.py): passed, failed with a message, an expected failure with
its reason, or skipped, with the record fields it leaves. Only fixtures.py turns one into pytest's outcome."""

from pathlib import Path

import numpy as np
import pytest

from pytest_rvv.judge.applicable import ApplicableBaselines
from pytest_rvv.judge.baselines import Baseline
from pytest_rvv.judge.checks import AGREEMENT, agreement_verdict
from pytest_rvv.judge.expectations import NEW_PASS, ExpectedNodeFailure, node_test_verdict
from pytest_rvv.judge.outcome import FAILED, PASSED, XFAILED
from pytest_rvv.judge.policy import ESTIMATOR_TOLERANCE_PERCENT, estimator_verdict, tolerances
from pytest_rvv.judge.verdict import judge
from pytest_rvv.measure.agreement import CheckedRun, compare
from pytest_rvv.measure.calibration import InstructionCalibration, InstructionTiming
from pytest_rvv.measure.performance import PerfResult
from pytest_rvv.model.model import Tolerance

LISTS = Path("baselines/conformance/rv64gc.toml")


def node(expected=None, strict=False, ran=True, failure=None):
    return node_test_verdict("test_add", "rv64gc", expected, LISTS, strict, ran, failure)


def test_a_node_test_failing_in_its_listed_phase_is_an_expected_failure():
    verdict = node(ExpectedNodeFailure("run", "crashes"), failure=("run", "iree-run-module crashed", "crashed\nat 1"))
    assert (verdict.outcome, verdict.message) == (XFAILED, "expected run failure: crashes")
    assert verdict.records == {"conformance": ("rv64gc", "test_add", "run", "iree-run-module crashed", True)}


def test_a_node_test_failing_elsewhere_is_a_new_failure_naming_its_listing():
    verdict = node(ExpectedNodeFailure("compile", "rejected"), failure=("mismatch", "differs", "differs\nat [0]"))
    assert verdict.outcome == FAILED
    assert verdict.message == (f"new mismatch failure (listed as an expected compile failure in {LISTS}): "
                               "differs\nat [0]")
    assert node(failure=("run", "crashed", "crashed")).message == "new run failure: crashed"


def test_a_listed_node_test_that_passes_is_an_improvement_and_fails_only_when_strict():
    listed = ExpectedNodeFailure("mismatch", "differs")
    lenient = node(listed)
    assert lenient.outcome == PASSED
    assert lenient.records["conformance"] == ("rv64gc", "test_add", None, NEW_PASS, True)
    assert lenient.records["improvements"] == [f"test_add now passes on rv64gc: remove it from [mismatch] in {LISTS} "
                                               "(or rerun with --update-baselines)"]
    strict = node(listed, strict=True)
    assert strict.outcome == FAILED and strict.message.startswith("unexpectedly passes (--rvv-strict-baselines): ")
    assert node(listed, ran=False).outcome == PASSED and "improvements" not in node(listed, ran=False).records
    assert node(ExpectedNodeFailure("compile", "rejected"), ran=False).records["conformance"][3] == NEW_PASS
    assert node().records == {"conformance": ("rv64gc", "test_add", None, "", True)}


def test_the_estimator_fails_beyond_its_tolerance():
    timing = InstructionTiming("spacemit-x60", "vfmacc.vv", "{d}, v1, v2", "32", "m1", 4.0, "rvv-bench")
    near = estimator_verdict(InstructionCalibration(timing, 4.0 * (1 + ESTIMATOR_TOLERANCE_PERCENT / 100), "mca 22"))
    assert near.outcome == PASSED and near.records["estimator"]["measured"] == 4.0
    far = estimator_verdict(InstructionCalibration(timing, 8.0, "mca 22"))
    assert far.outcome == FAILED and far.records["estimator"]["error_percent"] == 100.0
    assert far.message == ("spacemit-x60 vfmacc.vv-e32m1: estimated 8.00 cycles per instruction, measured 4.00 "
                           "(+100 %, allowed +-30 %; mca 22); rvv-bench")


def test_a_disagreement_fails_in_the_agreement_phase_with_its_repro():
    wrong = compare([np.ones(4)], [np.zeros(4)], Tolerance(atol=0, rtol=0))
    verdict = agreement_verdict(CheckedRun("mlp", "host", wrong, " in the counted run", "iree-run-module ..."))
    assert (verdict.outcome, verdict.phase) == (FAILED, AGREEMENT)
    assert verdict.message.startswith("mlp on host disagrees with onnxruntime in the counted run\n")
    assert verdict.message.endswith("\nrepro: iree-run-module ...")
    right = compare([np.zeros(4)], [np.zeros(4)], Tolerance())
    assert agreement_verdict(CheckedRun("mlp", "host", right)).outcome == PASSED
    assert agreement_verdict(None).outcome == PASSED  # no run disagreed


def test_performance_without_a_portable_baseline_passes_unless_strict(tmp_path):
    from pytest_rvv.config.machine import this_machine
    from pytest_rvv.config.targets import BUILTIN_TARGETS

    none = ApplicableBaselines(None, tmp_path / "p.json", None, tmp_path / "m.json", ())
    now = PerfResult("mlp", "rv64gc", {"iree_compile": "x"}, {"module_bytes": 10})
    here = this_machine("box", "qemu")
    lenient = judge(none, now, BUILTIN_TARGETS["rv64gc"], tolerances(None, False), here).decision
    assert lenient.outcome == PASSED and lenient.records["notes"][0].startswith("baseline needed: ")
    strict = judge(none, now, BUILTIN_TARGETS["rv64gc"], tolerances(None, False), here, strict=True).decision
    assert strict.message == f"no performance baseline {tmp_path / 'p.json'}: record one with --update-baselines"
    recorded = ApplicableBaselines(Baseline("mlp", "rv64gc", {"iree_compile": "x"}, {"module_bytes": 9}),
                                   tmp_path / "p.json", None, tmp_path / "m.json", ())
    bigger = judge(recorded, now, BUILTIN_TARGETS["rv64gc"], tolerances(None, False), here).decision
    assert bigger.outcome == FAILED and bigger.message.startswith("performance regression: mlp on rv64gc\n")
    assert bigger.records["perf_rows"] == [("module_bytes", 9, 10, "REGRESSED")]


@pytest.mark.parametrize(("work", "passes"), [(1000, True), (400, True), (1001, False)])
def test_a_slower_emulated_run_fails_only_when_it_executes_more_work(tmp_path, work, passes):
    """Under QEMU the dispatches' work is counted exactly: a time beyond its limit with the same or less work is the
    machine's or the emulator's (an A/B that vectorized mlp once measured its 0.1 s run +61 % CPU under load), with
    more work it is the code's."""
    from pytest_rvv.config.machine import this_machine
    from pytest_rvv.config.targets import BUILTIN_TARGETS

    here, target = this_machine("box", "qemu"), BUILTIN_TARGETS["rv64gcv-zvl256b"]
    baselines = ApplicableBaselines(
        Baseline("mlp", target.name, {"iree_compile": "x"}, {"executed_dispatch_instructions": 1000}),
        tmp_path / "p.json", Baseline("mlp", target.name, {"iree_compile": "x"}, {"cpu_s_min": 1.0}),
        tmp_path / "m.json", ())
    now = PerfResult("mlp", target.name, {"iree_compile": "x"},
                     {"executed_dispatch_instructions": work, "cpu_s_min": 2.0})
    verdict = judge(baselines, now, target, tolerances(None, False), here)
    (time,) = [r for r in verdict.machine_bound if r.metric == "cpu_s_min"]
    assert (time.status == "REGRESSED") is not passes
    if work < 1000:
        assert time.note.startswith("less executed work (1000 -> 400 instructions)")


def test_a_disagreement_listed_as_an_expected_agreement_failure_is_xfailed(project):
    """The suites hand check_agreement's verdict to rvv_judge: a disagreement fails in the agreement phase, which the
    expected failures of that phase accept (and no other failure)."""
    project.write()
    pyproject = project.path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\ntolerance = { atol = 0.0, rtol = 0.0 }\n")
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "expected-failures.toml").write_text(
        '[host]\nmlp = { phase = "agreement", reason = "exact outputs differ" }\n')
    result = project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=host")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["XFAIL correctness/test_agreement.py::test_matches_onnxruntime[[]mlp-host[]]*"])


def test_an_error_of_ours_reaches_pytest_with_only_the_frame_that_raised():
    """Its report is one line and an expected failure's its reason, yet pytest formats the traceback before any hook
    sees the report, reading and parsing the source file of every frame: a warm rerun of the default suites went from
    14.7-16.3 to 11.2-12.0 s here once only the raising frame is left (the exception itself is the same object)."""
    from pytest_rvv.base.errors import CompileFailed
    from pytest_rvv.plugin import _last_frame

    def compile_it():
        raise CompileFailed("iree-compile rejected model 'm' for target 't': boom")

    def cell():
        compile_it()

    with pytest.raises(CompileFailed) as caught:
        cell()
    assert len(caught.traceback) == 3
    cut = _last_frame(caught)
    assert cut.value is caught.value and cut.type is CompileFailed
    assert [entry.name for entry in cut.traceback] == ["compile_it"]


def dram_verdict(tmp_path, recorded: int, now: int, compiler: str = "x", added_work: float = 5.0, strict=False):
    """One dispatch's modelled DRAM bytes in the baseline and now, everything else equal."""
    from pytest_rvv.config.machine import this_machine
    from pytest_rvv.config.targets import BUILTIN_TARGETS

    def traffic(dram):
        return {"spacemit-x60": {"dispatch_0_matmul": {"dram_bytes": dram, "at_load": 0},
                                 "dispatch_1_pack": {"dram_bytes": 64_000, "at_load": 1}}}

    baseline = Baseline("mm", "rv64gcv-zvl256b", {"iree_compile": "x"}, {"module_bytes": 10},
                        traffic={"spacemit-x60": {"dispatch_0_matmul": recorded}})
    now_result = PerfResult("mm", "rv64gcv-zvl256b", {"iree_compile": compiler}, {"module_bytes": 10},
                            traffic=traffic(now))
    applicable = ApplicableBaselines(baseline, tmp_path / "p.json", None, tmp_path / "m.json", ())
    return judge(applicable, now_result, BUILTIN_TARGETS["rv64gcv-zvl256b"], tolerances(None, False),
                 this_machine("box", "qemu"), strict=strict, added_work=added_work)


def test_a_dispatch_whose_modelled_dram_traffic_doubles_is_named_and_fails_though_no_metric_moved(tmp_path):
    doubled = dram_verdict(tmp_path, 1_200_000, 2_400_000)
    assert doubled.decision.outcome == FAILED
    assert "dispatch_0_matmul: DRAM traffic 1.2 MB -> 2.4 MB (+100 %)" in doubled.decision.message
    assert doubled.decision.records["perf_rows"] == [("module_bytes", 10, 10, "ok")]  # no metric moved
    upgraded = dram_verdict(tmp_path, 1_200_000, 2_400_000, compiler="y")  # after an upgrade too: added work
    assert upgraded.decision.outcome == FAILED and upgraded.traffic.regressions


def test_dram_traffic_that_moves_less_than_half_again_passes_and_beyond_the_noise_is_named(tmp_path):
    """The modelled figures move with the memory layout: a fresh clone elsewhere moved one dispatch +4 %."""
    quiet = dram_verdict(tmp_path, 1_200_000, 1_210_000)  # +0.8 %: the noise, not named
    assert quiet.decision.outcome == PASSED and not any("DRAM" in n for n in quiet.decision.records["notes"])
    grown = dram_verdict(tmp_path, 1_200_000, 1_248_000, strict=True)  # +4 %: named, passes even when strict
    assert grown.decision.outcome == PASSED
    assert any("below the +50 % that fails: dispatch_0_matmul: DRAM traffic 1.2 MB -> 1.25 MB (+4 %)" in n
               for n in grown.decision.records["notes"])
    less = dram_verdict(tmp_path, 1_200_000, 600_000)
    assert less.decision.outcome == PASSED and "DRAM traffic 1.2 MB -> 600 kB" in less.decision.records[
        "improvements"][0]
    assert dram_verdict(tmp_path, 1_200_000, 600_000, strict=True).decision.outcome == FAILED
