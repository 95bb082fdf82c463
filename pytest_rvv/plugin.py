"""pytest hooks and fixtures of pytest-rvv (registered through the ``pytest11`` entry point).

Thin by design: options become Settings, Settings become an RvvSession, and tests asking for
``rvv_model`` / ``rvv_target`` are parametrized over the selected models and targets.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from pytest_rvv.analyze.gate import GateResult
from pytest_rvv.analyze.static import analyze
from pytest_rvv.conformance.check import NodeTestFailure, lists_path, load_lists, run_node_test, tolerance_for
from pytest_rvv.conformance.node_tests import NodeTest, node_tests, select
from pytest_rvv.conformance.report import CONFORMANCE_PROPERTY, ConformanceTracker
from pytest_rvv.errors import ConfigError, RuntimeNotProvided, RvvError, ToolMissing
from pytest_rvv.expectations import ExpectedFailureUpdater, load_expected_failures, phase_of
from pytest_rvv.model.model import Model
from pytest_rvv.perf.baseline import baseline_path, load_baseline
from pytest_rvv.perf.measure import PerfResult, measure_performance
from pytest_rvv.perf.policy import compare, table, tolerances
from pytest_rvv.perf.report import PERF_NOTE, PERF_PROPERTY, PerformanceCollector
from pytest_rvv.profile.measure import ExecutedMeasurement, measure_executed
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession
from pytest_rvv.settings import OPTIONS, Option, Settings, read_pyproject_table
from pytest_rvv.snapshots import check_vectorization
from pytest_rvv.summary import VectorizationSummary
from pytest_rvv.targets import Target

SESSION_KEY = pytest.StashKey[RvvSession]()
PERF_BASELINES = Path("baselines") / "performance"
CHECK_PROPERTY = "rvv_check_outcome"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rvv", "pytest-rvv: IREE on RISC-V regression testing")
    for option in OPTIONS:
        env = f" [env: {option.env}]" if option.env else ""
        group.addoption(option.flag, dest=option.dest, default=None, metavar=option.metavar,
                        help=f"{option.help}{env} [ini: {option.ini}; pyproject [tool.pytest_rvv] {option.key}]")
        parser.addini(option.ini, help=f"pytest-rvv: {option.help}", default=None)
    group.addoption("--update-baselines", action="store_true", default=False,
                    help="rewrite the vectorization snapshots (as --snapshot-update does) from this run; "
                         "use after a deliberate toolchain or flag change")
    group.addoption("--rvv-report", default=None, metavar="DIR",
                    help="write the performance results as JSON, Markdown (Table 1) and PNG plots into DIR")
    group.addoption("--rvv-strict-baselines", action="store_true", default=False,
                    help="fail, instead of passing with a note, when a snapshot has not been recorded yet (CI)")


def _settings(config: pytest.Config) -> Settings:
    root = config.rootpath
    inipath = config.inipath
    ini_dir = inipath.parent if inipath else root
    pyproject = inipath if inipath and inipath.name == "pyproject.toml" else root / "pyproject.toml"

    def lookup(option: Option) -> tuple[Any, Path] | None:
        cli = config.getoption(option.dest)
        if cli not in (None, ""):
            return cli, config.invocation_params.dir
        ini = config.getini(option.ini)
        return (ini, ini_dir) if ini not in (None, "", []) else None

    return Settings.resolve(lookup, read_pyproject_table(pyproject), ini_dir)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rvv_check(name): the pytest-rvv check a test performs "
                                       "(compile or agreement), used to apply expected failures")
    config.addinivalue_line("markers", "slow: a model or test that takes long under emulation")
    config.addinivalue_line("markers", "rvv_archs(*archs): parametrize only over targets of these "
                                       "architectures (riscv64, aarch64, host)")
    if config.getoption("update_baselines"):
        config.option.update_snapshots = True  # syrupy's --snapshot-update
    try:
        settings = _settings(config)
        expected = load_expected_failures(settings.expected_failures, settings.known_targets,
                                          sorted(settings.every_model_name))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = RvvSession(settings, expected)
    known_ids = {f"{m}-{t}" for m in settings.every_model_name for t in settings.known_targets}
    config.pluginmanager.register(VectorizationSummary(config.rootpath, known_ids), "rvv-vectorization-summary")
    config.pluginmanager.register(PerformanceCollector(config, settings.root / PERF_BASELINES), "rvv-performance")
    config.pluginmanager.register(ExpectedFailureUpdater(settings.expected_failures, expected, CHECK_PROPERTY),
                                  "rvv-expected-failures")
    config.pluginmanager.register(ConformanceTracker(config, settings.root), "rvv-conformance")


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash[SESSION_KEY]
    settings = session.settings
    try:
        compiler = session.toolchain.compiler_version
    except ToolMissing as exc:
        compiler = str(exc)
    runtime = str(settings.runtime_riscv64) if settings.runtime_riscv64 else "none (riscv64 execution tests skip)"
    targets = ", ".join(t.name for t in settings.targets)
    models = ", ".join(m.name for m in settings.models)
    return [
        f"rvv: targets {targets}; models {models}",
        f"rvv: {compiler}; cache {settings.cache_dir}; riscv64 runtime {runtime}",
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    settings = metafunc.config.stash[SESSION_KEY].settings
    if "rvv_model" in metafunc.fixturenames:
        metafunc.parametrize(
            "rvv_model",
            [pytest.param(m, id=m.name, marks=[getattr(pytest.mark, mark) for mark in m.marks])
             for m in settings.models],
        )
    if "rvv_node_test" in metafunc.fixturenames:
        session = metafunc.config.stash[SESSION_KEY]
        tests = node_tests(session.store)
        chosen = select(list(tests), settings.ops)
        metafunc.parametrize("rvv_node_test", [tests[n] for n in chosen], ids=chosen)
    if "rvv_target" in metafunc.fixturenames:
        archs = metafunc.definition.get_closest_marker("rvv_archs")
        targets = [t for t in settings.targets if archs is None or t.arch in archs.args]
        metafunc.parametrize("rvv_target", targets, ids=[t.name for t in targets])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply strict expected failures to the tests whose check they affect."""
    expected = config.stash[SESSION_KEY].expected_failures
    for item in items:
        marker = item.get_closest_marker("rvv_check")
        params = getattr(item, "callspec", None)
        if marker is None or params is None or not marker.args:
            continue
        model, target = params.params.get("rvv_model"), params.params.get("rvv_target")
        if not isinstance(model, Model) or not isinstance(target, Target):
            continue
        entry = expected.get((target.name, model.name))
        if entry is not None and entry.applies_to(marker.args[0]):
            item.add_marker(pytest.mark.xfail(
                strict=True, raises=entry.raises,
                reason=f"expected {entry.phase} failure on {target.name}: {entry.reason}",
            ))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Show pytest-rvv errors as their one-line message plus details, not as a traceback."""
    report = yield
    excinfo = call.excinfo
    _record_check_outcome(item, report, excinfo)
    if report.failed and excinfo is not None and isinstance(excinfo.value, RvvError):
        details = getattr(excinfo.value, "details", "") or getattr(excinfo.value, "log", "")
        report.longrepr = f"{type(excinfo.value).__name__}: {excinfo.value}" + (f"\n{details}" if details else "")
    return report


def _record_check_outcome(item: pytest.Item, report: pytest.TestReport, excinfo: Any) -> None:
    """Attach (target, model, failed phase, reason) of a correctness check to its report (for xdist)."""
    marker = item.get_closest_marker("rvv_check")
    params = getattr(item, "callspec", None)
    skipped = report.skipped and not hasattr(report, "wasxfail")
    if marker is None or params is None or report.when != "call" or skipped:
        return
    model, target = params.params.get("rvv_model"), params.params.get("rvv_target")
    if not isinstance(model, Model) or not isinstance(target, Target) or "correctness" not in item.nodeid:
        return
    phase = phase_of(excinfo.value) if excinfo is not None else None
    reason = str(excinfo.value).strip().splitlines()[0][:200] if excinfo is not None and phase else ""
    report.user_properties.append((CHECK_PROPERTY, (target.name, model.name, phase, reason)))


@pytest.fixture
def rvv_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """syrupy's snapshot, stored as one JSON file per test (model x target)."""
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.fixture
def rvv_vectorization(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, rvv_snapshot: SnapshotAssertion,
                      record_property: Any, request: pytest.FixtureRequest) -> Callable[[], GateResult]:
    """Run the static-analysis gate for this model x target against its snapshot."""

    def check() -> GateResult:
        analysis = analyze(rvv_session.artifact(rvv_model, rvv_target))
        return check_vectorization(rvv_snapshot, analysis.snapshot(), rvv_target,
                                   max_share_drop=rvv_session.settings.max_vector_share_drop,
                                   strict=request.config.getoption("rvv_strict_baselines"),
                                   record_property=record_property)

    return check


@pytest.fixture
def rvv_executed(rvv_session: RvvSession, rvv_model: Model, rvv_runner: Runner,
                 tmp_path: Path) -> Callable[..., ExecutedMeasurement]:
    """Count what ``rvv_model`` executes on ``rvv_runner``'s target (QEMU + the rvv_counter plugin).

    Skips, with the reason, when the emulator cannot load plugins or no C compiler can build it.
    """

    def measure(elements: bool = False) -> ExecutedMeasurement:
        try:
            return measure_executed(rvv_session, rvv_model, rvv_runner, tmp_path, elements=elements)
        except ToolMissing as exc:
            pytest.skip(str(exc))

    return measure


@pytest.fixture
def rvv_executed_vectorization(rvv_executed: Callable[..., ExecutedMeasurement], rvv_session: RvvSession,
                               rvv_model: Model, rvv_target: Target, rvv_snapshot: SnapshotAssertion,
                               record_property: Any, request: pytest.FixtureRequest) -> Callable[[], GateResult]:
    """The vectorization gate on executed counts per dispatch, against an executed-counts snapshot."""

    def check() -> GateResult:
        current = rvv_executed().snapshot(rvv_model.name, rvv_target.name)
        return check_vectorization(rvv_snapshot, current, rvv_target,
                                   max_share_drop=rvv_session.settings.max_vector_share_drop,
                                   strict=request.config.getoption("rvv_strict_baselines"),
                                   record_property=record_property, kind="executed")

    return check


@pytest.fixture
def rvv_performance(rvv_session: RvvSession, rvv_model: Model, rvv_target: Target, record_property: Any,
                    request: pytest.FixtureRequest) -> Callable[[], PerfResult]:
    """Measure ``rvv_model`` on ``rvv_target`` and compare with its baseline (fails with a table)."""

    def check() -> PerfResult:
        settings = rvv_session.settings
        try:
            runner: Runner | None = rvv_session.runner(rvv_target)
        except RuntimeNotProvided:
            runner = None  # compile-side metrics only
        result = measure_performance(rvv_session, rvv_model, rvv_target, runner, settings.perf_repeat)
        record_property(PERF_PROPERTY, result.as_json())
        if request.config.getoption("update_baselines"):
            return result
        path = baseline_path(settings.root / PERF_BASELINES, rvv_target.name, rvv_model.name)
        try:
            baseline = load_baseline(path)
            limits = tolerances(settings.tolerances, under_xdist=hasattr(request.config, "workerinput"))
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        if baseline is None:
            if request.config.getoption("rvv_strict_baselines"):
                pytest.fail(f"no performance baseline {path}: record one with --update-baselines", pytrace=False)
            record_property(PERF_NOTE, f"baseline needed: {path} (record it with --update-baselines)")
            return result
        rows = compare(baseline, result.metrics, result.samples, limits)
        if not all(row.ok for row in rows):
            pytest.fail(f"performance regression: {rvv_model.name} on {rvv_target.name} (baseline {path})\n"
                        + table(rows), pytrace=False)
        return result

    return check


@pytest.fixture
def rvv_conformance(rvv_session: RvvSession, rvv_node_test: NodeTest, rvv_target: Target, tmp_path: Path,
                    record_property: Any) -> Callable[[], None]:
    """Run one ONNX node test on ``rvv_target`` against its strict, per-phase expected failures."""

    def check() -> None:
        path = lists_path(rvv_session.settings.root, rvv_target.name)
        try:
            expected = load_lists(path).get(rvv_node_test.name)
            tolerance = tolerance_for(rvv_session.settings.root, rvv_node_test.name)
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        try:
            runner: Runner | None = rvv_session.runner(rvv_target)
        except RuntimeNotProvided:
            runner = None  # compile only
        try:
            ran = run_node_test(rvv_session, rvv_node_test, rvv_target, runner, tmp_path, tolerance)
        except ValueError as exc:
            pytest.skip(f"{rvv_node_test.name}: {exc}; iree-run-module takes tensors only")
        except NodeTestFailure as failure:
            record_property(CONFORMANCE_PROPERTY, (rvv_target.name, rvv_node_test.name, failure.phase,
                                                   failure.first_line, True))
            if expected is not None and expected.phase == failure.phase:
                pytest.xfail(f"expected {failure.phase} failure: {expected.reason}")
            listed = f" (listed as an expected {expected.phase} failure in {path})" if expected else ""
            pytest.fail(f"new {failure.phase} failure{listed}: {failure.first_line}", pytrace=False)
        record_property(CONFORMANCE_PROPERTY, (rvv_target.name, rvv_node_test.name, None, "", ran))
        if expected is not None and (ran or expected.phase in ("import", "compile")):
            pytest.fail(f"unexpectedly passes: remove {rvv_node_test.name} from [{expected.phase}] in {path} "
                        "(or rerun with --update-baselines)", pytrace=False)

    return check


@pytest.fixture(scope="session")
def rvv_session(request: pytest.FixtureRequest) -> RvvSession:
    """The pytest-rvv pipeline for this session (settings, cache, compiler, runners)."""
    return request.config.stash[SESSION_KEY]


@pytest.fixture
def rvv_runner(rvv_session: RvvSession, rvv_target: Target) -> Runner:
    """A checked runner for ``rvv_target``; skips when no runtime can exist without the user."""
    try:
        return rvv_session.runner(rvv_target)
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))
