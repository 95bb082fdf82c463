"""pytest-rvv's fixtures: thin wrappers that hand the pipeline's checks to tests.

Registered by the plugin at configure time, so they are available wherever pytest-rvv is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from pytest_rvv.base.errors import ConfigError, RuntimeNotProvided, ToolMissing
from pytest_rvv.base.record import leave
from pytest_rvv.comparison.ab import ToolchainComparison, compare_toolchains
from pytest_rvv.comparison.repro import write_repro
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.conformance.batch import NodeBatches
from pytest_rvv.conformance.check import NodeTestFailure, run_node_test, tolerance_for
from pytest_rvv.conformance.node_tests import NodeTest
from pytest_rvv.conformance.report import NEW_PASS
from pytest_rvv.judge.applicable import applicable_baselines
from pytest_rvv.judge.baselines import PERF_BASELINES
from pytest_rvv.judge.expectations import load_node_lists, node_compiled_alone, node_lists_path
from pytest_rvv.judge.gate import GateResult
from pytest_rvv.judge.policy import ESTIMATOR_TOLERANCE_PERCENT, tolerances
from pytest_rvv.judge.snapshots import SnapshotVerdict, check_vectorization
from pytest_rvv.judge.verdict import judge
from pytest_rvv.measure.calibration import InstructionCalibration, InstructionTiming, calibrate
from pytest_rvv.measure.executed import ExecutedMeasurement, measure_executed
from pytest_rvv.measure.metrics import LANE_OCCUPANCY, silicon_metric
from pytest_rvv.measure.performance import PerfResult, calibration_point, measure_performance
from pytest_rvv.measure.static import analyze
from pytest_rvv.model.model import Model
from pytest_rvv.run.choice import TargetRefused
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import Cell, RvvSession

SESSION_KEY = pytest.StashKey[RvvSession]()
REFERENCE_KEY = pytest.StashKey[RvvSession]()  # the reference toolchain's session (--rvv-compare)


@pytest.fixture
def rvv_record(record_property: Any) -> Callable[..., None]:
    """Add fields to this test's record for the reports (pytest_rvv/base/record.py), e.g. ``agreement=(...)``."""
    return lambda **fields: leave(record_property, **fields)


@pytest.fixture
def rvv_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's snapshot, stored as one JSON file per test (model x target)."""
    return snapshot.use_extension(JSONSnapshotExtension)


def _judged(verdict: SnapshotVerdict, record_property: Any) -> GateResult:
    """Record a snapshot verdict for the reports, and fail the test when it says so."""
    leave(record_property, **verdict.records)
    if verdict.failure is not None:
        pytest.fail(verdict.failure, pytrace=False)
    assert verdict.gate is not None  # only a damaged snapshot has none, and it fails above
    return verdict.gate


@pytest.fixture
def rvv_vectorization(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, rvv_snapshot: SnapshotAssertion,
                      record_property: Any, request: pytest.FixtureRequest) -> Callable[[], GateResult]:
    """Run the static-analysis gate for this model x target against its snapshot."""

    def check() -> GateResult:
        analysis = analyze(rvv_session.artifact(rvv_model, rvv_target), rvv_session.store, rvv_session.stages)
        return _judged(check_vectorization(rvv_snapshot, analysis.snapshot(), rvv_target,
                                           max_share_drop=rvv_session.settings.max_vector_share_drop,
                                           strict=request.config.getoption("rvv_strict_baselines"),
                                           toolchain=rvv_session.toolchain.compiler_version,
                                           added_work=rvv_session.settings.added_work_percent), record_property)

    return check


@pytest.fixture
def rvv_executed(rvv_runner: Runner, rvv_cell: Callable[[], Cell],
                 tmp_path: Path) -> Callable[..., ExecutedMeasurement]:
    """Count what ``rvv_model`` executes on ``rvv_runner``'s target (QEMU + the rvv_counter plugin).

    Skips, with the reason, when the runner cannot count its runs (its capabilities say so), the emulator cannot
    load plugins or no C compiler can build it.
    """

    def measure(elements: bool = False) -> ExecutedMeasurement:
        if not (capabilities := rvv_runner.capabilities).counted:
            pytest.skip(f"executed counts need QEMU: {rvv_runner.target.name} runs {capabilities.where}")
        try:
            return measure_executed(rvv_cell(), tmp_path, elements=elements)
        except ToolMissing as exc:
            pytest.skip(str(exc))

    return measure


@pytest.fixture
def rvv_executed_vectorization(rvv_executed: Callable[..., ExecutedMeasurement], rvv_session: RvvSession,
                               rvv_model: Model, rvv_target: Target, rvv_snapshot: SnapshotAssertion,
                               record_property: Any, request: pytest.FixtureRequest) -> Callable[[], GateResult]:
    """The vectorization gate on executed counts per dispatch, against an executed-counts snapshot."""

    def check() -> GateResult:
        # the report shows lane occupancy per dispatch: count elements too (same counts, ~1.4-3x the run time)
        lanes = bool(request.config.getoption("rvv_report")) and rvv_target.arch == RISCV64 and rvv_target.has_vector
        measurement = rvv_executed(elements=lanes)
        if "lanes" in measurement.attribution:
            leave(record_property, lanes={"model": rvv_model.name, "target": rvv_target.name,
                                          "toolchain": {"iree_compile": rvv_session.toolchain.compiler_version},
                                          **measurement.attribution["lanes"]})
            record_property(f"rvv.{LANE_OCCUPANCY}", measurement.attribution["lanes"]["total"]["occupancy_percent"])
        current = measurement.snapshot(rvv_model.name, rvv_target.name)
        return _judged(check_vectorization(rvv_snapshot, current, rvv_target,
                                           max_share_drop=rvv_session.settings.max_vector_share_drop,
                                           strict=request.config.getoption("rvv_strict_baselines"), kind="executed",
                                           toolchain=rvv_session.toolchain.compiler_version,
                                           added_work=rvv_session.settings.added_work_percent), record_property)

    return check


@pytest.fixture
def rvv_performance(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, record_property: Any,
                    request: pytest.FixtureRequest) -> Callable[[], PerfResult]:
    """Measure ``rvv_model`` on ``rvv_target`` and judge it against the baselines that apply here.

    Portable metrics against the committed baseline, machine-bound ones against this machine's
    (information only when there is none). Fails with one table on a regression; an improvement
    passes and is listed (fails with --rvv-strict-baselines, like any difference).
    """

    def check() -> PerfResult:
        settings = rvv_session.settings
        try:
            cell = rvv_session.resolve(rvv_model, rvv_target)  # without a runtime here: compile-side metrics only
        except TargetRefused as exc:
            pytest.skip(str(exc))  # the machine that ran the bundle refused this target
        machine = cell.machine
        recording = request.config.getoption("update_baselines")
        try:
            applicable = applicable_baselines(settings.root / PERF_BASELINES, machine, rvv_target.name, rvv_model.name)
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        # fresh timed runs only where time is gated (a baseline of this machine), recorded, or asked for
        timed = recording or applicable.machine is not None or settings.perf_repeat_given
        result = measure_performance(cell, settings.perf_repeat, timed)
        if cell.elsewhere:  # a board's, or the machine of a bundle's results
            result.board = machine.as_json()
        if cell.runner is not None and (core := cell.runner.capabilities.core) is not None:
            estimate = (applicable.portable or {}).get("metrics", {}).get(silicon_metric(core.name))
            result.calibration = calibration_point(result, core, estimate)  # every silicon run calibrates
        leave(record_property, performance=result.as_json())
        for metric, value in sorted(result.metrics.items()):  # JUnit XML <property> elements CI systems show
            record_property(f"rvv.{metric}", value)
        if recording:
            return result
        strict = request.config.getoption("rvv_strict_baselines")
        try:
            limits = tolerances(settings.tolerances, under_xdist=hasattr(request.config, "workerinput"))
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        verdict = judge(applicable, result, rvv_target, limits, machine, strict=strict,
                        added_work=settings.added_work_percent)
        leave(record_property, perf_rows=[(r.metric, r.baseline, r.now, r.status) for r in verdict.rows],
              notes=list(verdict.notes), improvements=list(verdict.improvements))
        if applicable.portable is None and strict and verdict.has_portable:
            pytest.fail(f"no performance baseline {applicable.portable_path}: record one with --update-baselines",
                        pytrace=False)
        if verdict.regressed or (strict and verdict.differs):
            what = "performance regression" if verdict.regressed else "differs from its baseline (strict)"
            pytest.fail(f"{what}: {rvv_model.name} on {rvv_target.name}\n{verdict.render()}", pytrace=False)
        return result

    return check


@pytest.fixture(scope="session")
def rvv_node_batches(rvv_session: RvvSession, request: pytest.FixtureRequest) -> NodeBatches:
    """The node tests this session collected (after -k, shards, ...), compiled together per target."""
    chosen: dict[str, NodeTest] = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        test = callspec.params.get("rvv_node_test") if callspec is not None else None
        if isinstance(test, NodeTest):
            chosen.setdefault(test.name, test)
    return NodeBatches(rvv_session, list(chosen.values()))


@pytest.fixture
def rvv_conformance(rvv_session: RvvSession, rvv_node_test: NodeTest, rvv_target: Target,
                    rvv_node_batches: NodeBatches, tmp_path: Path,
                    record_property: Any, request: pytest.FixtureRequest) -> Callable[[], None]:
    """Run one ONNX node test on ``rvv_target`` against its strict, per-phase expected failures."""

    def check() -> None:
        path = node_lists_path(rvv_session.settings.root, rvv_target.name)
        strict = request.config.getoption("rvv_strict_baselines")
        try:
            lists = load_node_lists(path)
            expected = lists.get(rvv_node_test.name)
            tolerance = tolerance_for(rvv_session.settings.root, rvv_node_test.name)
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            runner: Runner | None = rvv_session.runner(rvv_target)
        except RuntimeNotProvided:
            runner = None  # compile only
        failure: NodeTestFailure | None = None
        try:
            ran = run_node_test(rvv_session, rvv_node_test, rvv_target, runner, tmp_path, tolerance,
                                rvv_node_batches, node_compiled_alone(lists))
        except ValueError as exc:
            reason = f"{rvv_node_test.name}: {exc}; iree-run-module takes tensors only"
            ran = None
        except NodeTestFailure as exc:
            failure, ran, reason = exc, None, ""
        # Decide outside the except blocks: a failure reads once, without chained tracebacks.
        if ran is None and failure is None:
            pytest.skip(reason)
        if failure is not None:
            leave(record_property, conformance=(rvv_target.name, rvv_node_test.name, failure.phase,
                                                failure.first_line, True))
            if expected is not None and expected.phase == failure.phase:
                pytest.xfail(f"expected {failure.phase} failure: {expected.reason}")
            listed = f" (listed as an expected {expected.phase} failure in {path})" if expected else ""
            details = "".join(f"\n{line}" for line in failure.message.strip().splitlines()[1:12])
            pytest.fail(f"new {failure.phase} failure{listed}: {failure.first_line}{details}", pytrace=False)
        listed_pass = expected is not None and (ran or expected.phase in ("import", "compile"))
        leave(record_property, conformance=(rvv_target.name, rvv_node_test.name, None,
                                            NEW_PASS if listed_pass else "", ran))
        if listed_pass:
            message = (f"{rvv_node_test.name} now passes on {rvv_target.name}: remove it from [{expected.phase}] "
                       f"in {path} (or rerun with --update-baselines)")
            if strict:
                pytest.fail(f"unexpectedly passes (--rvv-strict-baselines): {message}", pytrace=False)
            leave(record_property, improvements=[message])

    return check


@pytest.fixture
def rvv_toolchain_comparison(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, record_property: Any,
                             request: pytest.FixtureRequest) -> Callable[[], ToolchainComparison]:
    """Compare the toolchain under test with the reference (``--rvv-compare``) on this model x target.

    Fails, with the dispatch-level table, when the toolchain under test adds executed work beyond
    ``--rvv-added-work`` (exact with ``--rvv-strict-baselines``), unless
    ``--rvv-compare-report-only``; then writes a reproducer folder (``--rvv-repro=DIR``, else
    under the cache) and names it.
    """

    def check() -> ToolchainComparison:
        reference = request.config.stash[REFERENCE_KEY]
        settings = rvv_session.settings
        strict = request.config.getoption("rvv_strict_baselines")
        try:
            limits = tolerances(settings.tolerances, under_xdist=hasattr(request.config, "workerinput"))
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        comparison = compare_toolchains(rvv_session, reference, rvv_model, rvv_target, settings.perf_repeat,
                                        limits, settings.added_work_percent, strict, settings.max_vector_share_drop)
        record = comparison.summary()
        if request.config.getoption("rvv_report"):  # the report file holds every change and the whole asm diff
            record["detail"] = comparison.render(asm_lines=1 << 30)
        leave(record_property, comparison=record)
        failures = comparison.regressions
        if failures and not request.config.getoption("rvv_compare_report_only"):
            where = Path(request.config.getoption("rvv_repro") or settings.cache_dir / "repro")
            readme = write_repro(where / f"{rvv_model.name}-{rvv_target.name}", comparison, rvv_session, reference,
                                 rvv_model, rvv_target)
            pytest.fail(f"the toolchain under test adds work: {rvv_model.name} on {rvv_target.name}\n"
                        + "\n".join(f"  {line}" for line in failures) + f"\n{comparison.render()}\n"
                        f"reproducer: {readme}", pytrace=False)
        return comparison

    return check


@pytest.fixture
def rvv_instruction_calibration(rvv_session: RvvSession, record_property: Any
                                ) -> Callable[[InstructionTiming], InstructionCalibration]:
    """Hold the silicon estimator against one published per-instruction measurement (measure/calibration.py): fails
    when its cycles per instruction differ by more than ``ESTIMATOR_TOLERANCE_PERCENT``."""

    def check(timing: InstructionTiming) -> InstructionCalibration:
        try:
            (found,) = calibrate((timing,), rvv_session.store)
        except ToolMissing as exc:
            pytest.skip(str(exc))
        leave(record_property, estimator=found.as_json())
        if abs(found.error_percent) > ESTIMATOR_TOLERANCE_PERCENT:
            pytest.fail(f"{timing.core} {timing.name}: estimated {found.estimated:.2f} cycles per instruction, "
                        f"measured {timing.cycles:.2f} ({found.error_percent:+.0f} %, allowed "
                        f"+-{ESTIMATOR_TOLERANCE_PERCENT:g} %; {found.llvm_mca}); {timing.source}", pytrace=False)
        return found

    return check


@pytest.fixture(scope="session")
def rvv_session(request: pytest.FixtureRequest) -> RvvSession:
    """The pytest-rvv pipeline for this session (settings, cache, compiler, runners)."""
    return request.config.stash[SESSION_KEY]


@pytest.fixture
def rvv_runner(rvv_session: RvvSession, rvv_target: Target) -> Runner:
    """A checked runner for ``rvv_target`` (chosen by run/choice.py); skips when no runtime can exist without the
    user, or the machine that ran a bundle refused the target."""
    try:
        return rvv_session.runner(rvv_target)
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))


@pytest.fixture
def rvv_cell(rvv_session: RvvSession, rvv_model: Model, rvv_runner: Runner) -> Callable[[], Cell]:
    """``rvv_model`` on ``rvv_runner``'s target, resolved once by the session into a Cell when the test calls it:
    the runner is chosen and checked before the test (it skips with ``rvv_runner``), compiling happens in the test
    (a compile failure is the test's outcome, which expected failures apply to)."""
    return lambda: rvv_session.cell(rvv_model, rvv_runner.target, rvv_runner)
