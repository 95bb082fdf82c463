"""pytest hooks of pytest-rvv (registered through the ``pytest11`` entry point; fixtures in fixtures.py).

Thin by design: options become Settings, Settings become an RvvSession, and tests asking for
``rvv_model`` / ``rvv_target`` are parametrized over the selected models and targets.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_rvv import fixtures
from pytest_rvv.base.errors import ConfigError, PathUnavailable, RuntimeNotProvided, RvvError, ToolMissing
from pytest_rvv.base.record import Record, leave
from pytest_rvv.base.stages import StageProfile
from pytest_rvv.base.store import check_writable
from pytest_rvv.bundle.collect import BundleWriter
from pytest_rvv.bundle.writer import check_replaceable
from pytest_rvv.comparison.summary import ComparisonSummary
from pytest_rvv.config.cores import CORES
from pytest_rvv.config.kernels import MARK, KernelCell
from pytest_rvv.config.settings import OPTIONS, Option, Settings, read_pyproject_table
from pytest_rvv.config.targets import RISCV64, Target
from pytest_rvv.conformance.node_tests import node_tests, select
from pytest_rvv.conformance.report import ConformanceTracker
from pytest_rvv.fixtures import REFERENCE_KEY, SESSION_KEY
from pytest_rvv.judge.applicable import MACHINES, recorded_toolchains
from pytest_rvv.judge.baselines import PERF_BASELINES
from pytest_rvv.judge.expectations import ExpectedFailure, ExpectedFailureUpdater, load_expected_failures, phase_of
from pytest_rvv.judge.recorder import BaselineRecorder
from pytest_rvv.measure.calibration import InstructionTiming
from pytest_rvv.model.model import Model
from pytest_rvv.report.agreement import AgreementSummary
from pytest_rvv.report.html import CHECKS, CellOutcomes, RunReport
from pytest_rvv.report.kernels import WALL_MISSES, Published, selected_published, with_peers
from pytest_rvv.report.notices import SessionNotices
from pytest_rvv.report.peers import PeersCollector, write_peers
from pytest_rvv.report.performance import PerformanceCollector, write_report
from pytest_rvv.report.sections import Sections, Written
from pytest_rvv.report.terminal import ExpectedFailureSeen, terminal_blocks
from pytest_rvv.report.vectorization import VectorizationSummary
from pytest_rvv.run.peer import ONNXRUNTIME, PEERS
from pytest_rvv.session import RvvSession
from pytest_rvv.toolchain.choice import NoRuntimeLoads
from pytest_rvv.toolchain.environments import toolchain_from_spec
from pytest_rvv.toolchain.runtime_build import commit_mismatch
from pytest_rvv.toolchain.toolchain import Toolchain, find_toolchain
from pytest_rvv.xdist import scheduling, shards

COMPARISON_FIXTURE = "rvv_toolchain_comparison"
KERNELS_MARK = MARK  # a test over the kernel suite's cells (config/kernels.py) instead of models x targets
PEERS_MARK = "rvv_peers"  # a test over models x riscv64 targets beside a peer, generated only with --rvv-peers
ONE_PATH_MARK = "rvv_one_path"  # a kernel peer test generated once per row x shape (the first path's cell)
# .test_durations, read once where it is used: --rvv-shard, and xdist's load scheduling (scheduling.py)
DURATIONS_KEY = pytest.StashKey[dict[str, float]]()
# the expected failures per (target, model), applied to the collected tests
EXPECTED_KEY = pytest.StashKey[dict[tuple[str, str], ExpectedFailure]]()


@dataclasses.dataclass(frozen=True)
class Collectors:
    """The collectors whose results become the run's report sections (report/sections.py), assembled once."""

    outcomes: CellOutcomes
    performance: PerformanceCollector
    vectorization: VectorizationSummary
    agreement: AgreementSummary
    comparison: ComparisonSummary
    peers: PeersCollector = dataclasses.field(default_factory=PeersCollector)

    def sections(self, baselines: list[str]) -> Sections:
        performance, vectorization = self.performance, self.vectorization
        return Sections(
            tests=self.outcomes.tests, performance=performance.rows, verdicts=performance.verdicts,
            notes=performance.notes, improvements=performance.improvements, pairs=performance.pairs,
            kernels=with_peers(performance.kernels, self.peers.rows), kernel_cells=len(performance.kernel_cells),
            estimator=performance.estimator,
            vectorization=vectorization.results, unused_snapshots=vectorization.unused_snapshots(),
            lanes=vectorization.lanes, agreement=self.agreement.errors, comparisons=self.comparison.records,
            kernel_changes=self.comparison.kernels, baselines=baselines, peers=self.peers.rows)


COLLECTORS_KEY = pytest.StashKey[Collectors]()
# the run's sections and what --rvv-report wrote, assembled at the session's end for the terminal summary
SECTIONS_KEY = pytest.StashKey[tuple[Sections, Written | None]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rvv", "pytest-rvv: IREE on RISC-V regression testing")
    for option in OPTIONS:
        env = f" [env: {option.env}]" if option.env else ""
        group.addoption(option.flag, dest=option.dest, default=None, metavar=option.metavar,
                        help=f"{option.help}{env} [ini: {option.ini}; pyproject [tool.pytest_rvv] {option.key}]")
        parser.addini(option.ini, help=f"pytest-rvv: {option.help}", default=None)
    group.addoption("--update-baselines", action="store_true", default=False,
                    help="rewrite snapshots (as --snapshot-update does), performance baselines and expected-failure "
                         "lists from this run; use after a deliberate toolchain or flag change")
    group.addoption("--rvv-report", default=None, metavar="DIR",
                    help="write a self-contained HTML report of the run (index.html), results.json, Table 1 as "
                         "Markdown and PNG plots, and a toolchain comparison's every change (comparison.md) into DIR")
    group.addoption("--rvv-history", default=None, metavar="DIR",
                    help="with --rvv-report: a `pytest-rvv sweep` folder whose per-release results the report's "
                         "history draws beside the baselines' git history (default: rvv-history when it exists)")
    group.addoption("--rvv-compare-report-only", action="store_true", default=False,
                    help="with --rvv-compare: report the side-by-side comparison without failing on added work")
    group.addoption("--rvv-repro", default=None, metavar="DIR",
                    help="with --rvv-compare: write a reproducer folder per regressed model x target into DIR "
                         "(default: <cache>/repro)")
    group.addoption("--rvv-profile", action="store_true", default=False,
                    help="print wall and CPU time per stage (prepare, onnxruntime, import, compile, analyze, emulate, "
                         "count, estimate) and cache hits, summed over xdist workers (also with -v)")
    group.addoption("--rvv-no-cache", action="store_true", default=False,
                    help="emulate every run again instead of looking up recorded runs in the cache (IREE's plain and "
                         "counted runs, the traced runs of traffic and threads, the peers' runs); nothing new is "
                         "recorded")
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

    settings = Settings.resolve(lookup, read_pyproject_table(pyproject), ini_dir)
    return dataclasses.replace(settings, fresh_runs=True) if config.getoption("rvv_no_cache") else settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rvv_check(name): the pytest-rvv check a test performs "
                                       "(compile or agreement), used to apply expected failures")
    config.addinivalue_line("markers", "slow: a model or test that takes long under emulation")
    config.addinivalue_line("markers", f"{KERNELS_MARK}: parametrize over the kernel suite's cells (--rvv-kernels)")
    config.addinivalue_line("markers", f"{ONE_PATH_MARK}: a kernel peer test, once per row x shape (the peer "
                                       "runs no IREE path)")
    config.addinivalue_line("markers", f"{PEERS_MARK}: parametrize over models x riscv64 targets beside a peer "
                                       "(--rvv-peers); not generated without it")
    config.addinivalue_line("markers", "rvv_archs(*archs): parametrize only over targets of these "
                                       "architectures (riscv64, aarch64, host)")
    if config.getoption("update_baselines"):
        config.option.update_snapshots = True  # syrupy's --snapshot-update
    try:
        settings = _settings(config)
        expected = load_expected_failures(settings.expected_failures, settings.known_targets,
                                          sorted(settings.every_model_name))
        if settings.iree_build is not None:
            find_toolchain(settings.iree_build)  # a build directory without iree-compile: one line, now
        if settings.bundle_results is not None and settings.compare:
            raise ConfigError("--rvv-bundle-results judges one toolchain's bundle; it cannot be combined with "
                              "--rvv-compare (compare the toolchains here, or judge each one's bundle on its own)")
        reference = _reference_toolchain(settings)
        # read once, here, so a damaged file is one line (not an internal error in the header or at collection)
        uses_durations = settings.shard or _schedules_by_cell(config)
        durations = shards.load_durations(config.rootpath / shards.DURATIONS_FILE) if uses_durations else {}
        session = RvvSession(settings)
        if not hasattr(config, "workerinput"):  # the controller refuses before workers start
            session.check_boards()  # each board in use probed once: a target it cannot run right is refused now
            _ = session.bundle_results  # a damaged or foreign results folder: one line, before any test
            if settings.bundle is not None:
                check_replaceable(settings.bundle)  # not a folder of something else: refused before the run
    except RvvError as exc:
        raise pytest.UsageError(str(exc)) from None
    notices = SessionNotices(settings.compare, COMPARISON_FIXTURE)
    config.pluginmanager.register(notices, "rvv-notices")
    if not hasattr(config, "workerinput"):
        _check_directories(config, settings, notices)
    config.stash[SESSION_KEY] = session
    config.stash[EXPECTED_KEY] = expected
    config.stash[DURATIONS_KEY] = durations
    if reference is not None:
        config.stash[REFERENCE_KEY] = RvvSession(settings, toolchain=reference, reference=True)
    if settings.bundle is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(BundleWriter(session, str(settings.bundle)), "rvv-bundle")
    comparison = ComparisonSummary(config.getoption("rvv_report"), settings.kernels.cells if settings.kernels else ())
    config.pluginmanager.register(comparison, "rvv-toolchain-comparison")
    if not config.pluginmanager.is_registered(fixtures):
        config.pluginmanager.register(fixtures, "rvv-fixtures")
    known_ids = {f"{m}-{t}" for m in settings.every_model_name for t in settings.known_targets}
    known_ids |= settings.kernels.every_id if settings.kernels else set()
    collectors = Collectors(CellOutcomes(), PerformanceCollector(session),
                            VectorizationSummary(config.rootpath, known_ids), AgreementSummary(), comparison)
    config.pluginmanager.register(collectors.outcomes, "rvv-outcomes")
    config.pluginmanager.register(collectors.vectorization, "rvv-vectorization-summary")
    config.pluginmanager.register(collectors.performance, "rvv-performance")
    config.stash[COLLECTORS_KEY] = collectors
    config.pluginmanager.register(ExpectedFailureUpdater(settings.expected_failures, expected),
                                  "rvv-expected-failures")
    config.pluginmanager.register(ConformanceTracker(config, settings.root), "rvv-conformance")
    config.pluginmanager.register(collectors.agreement, "rvv-agreement")
    config.pluginmanager.register(collectors.peers, "rvv-peers")
    config.pluginmanager.register(StageProfile(bool(config.getoption("rvv_profile")) or config.option.verbose > 0),
                                  "rvv-stage-profile")


def _check_directories(config: pytest.Config, settings: Settings, notices: SessionNotices) -> None:
    """The cache and the report folder, tried once on the controller: a fault is one notice line. A cache that cannot
    be written still serves what it holds (tests that must write error with the line); a report folder that cannot
    be written is dropped (no report), not failed at the end."""
    if fault := check_writable(settings.cache_dir):
        notices.add_fault(fault)
    report = config.getoption("rvv_report")
    if report and (fault := check_writable(Path(report).resolve(), "give another --rvv-report directory")):
        notices.add(f"--rvv-report: {fault}; no report is written")
        config.option.rvv_report = None


def _schedules_by_cell(config: pytest.Config) -> bool:
    """xdist's controller with load scheduling (what -n gives): pytest-rvv schedules it by cell."""
    return not hasattr(config, "workerinput") and config.getoption("dist", default="no") == "load"


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``-n`` (``--dist load``): whole cells per worker, heaviest first (scheduling.py); other modes: xdist's."""
    if not _schedules_by_cell(config):
        return None
    return scheduling.make_scheduler(config, log, config.stash[SESSION_KEY].settings.known_targets,
                                     config.stash[DURATIONS_KEY])


def _reference_toolchain(settings: Settings) -> Toolchain | None:
    """The --rvv-compare toolchain (installed once into the tools cache); refused when it is the one under test."""
    if settings.compare is None:
        return None
    reference = toolchain_from_spec(settings.compare, settings.tools_dir)
    under_test = find_toolchain(settings.iree_build)
    if reference.compiler_version == under_test.compiler_version:
        raise ConfigError(f"--rvv-compare {settings.compare}: this is the toolchain under test itself "
                          f"({under_test.compiler_version}); name another release, wheel or build")
    return reference


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Choose each toolchain's riscv64 runtime once, on the controller, before xdist starts its workers.

    Building one from source happens here, once; the workers then find it in the cache. Nothing is
    raised: a toolchain that cannot run says so in the header and in each of its riscv64 cells.
    """
    config = session.config
    if hasattr(config, "workerinput") or SESSION_KEY not in config.stash:
        return
    sessions = [config.stash[SESSION_KEY], *([config.stash[REFERENCE_KEY]] if REFERENCE_KEY in config.stash else [])]
    if not any(t.arch == "riscv64" for t in sessions[0].settings.targets):
        return
    for rvv in sessions:
        with contextlib.suppress(RvvError):  # remembered by the session: the header and the cells say it
            rvv.runtime("riscv64", log=lambda line: print(f"rvv: {line}", flush=True))


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        config.stash[SESSION_KEY].close()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """On the controller, once: the recorder writes the baselines (--update-baselines), the sections are assembled
    from the collectors and handed to the reports --rvv-report writes, and kept for the terminal summary."""
    config = session.config
    if hasattr(config, "workerinput") or COLLECTORS_KEY not in config.stash:
        return
    collectors, rvv = config.stash[COLLECTORS_KEY], config.stash[SESSION_KEY]
    settings = rvv.settings
    baselines: list[str] = []
    if config.getoption("update_baselines"):
        recorder = BaselineRecorder(settings.root / PERF_BASELINES, rvv.machine, settings.known_targets,
                                    settings.tolerances)
        baselines = recorder.record(collectors.performance.rows.values())
    sections = collectors.sections(baselines)
    written = None
    if report := config.getoption("rvv_report"):
        directory = Path(report)
        files = (write_report(directory, sections.performance, sections.pairs, sections.kernels, sections.estimator)
                 if sections.performance else [])
        if peers := write_peers(directory, sections.peers, sections.comparisons, after=files):
            files = [*files, *([] if peers in files else [peers])]
        page = RunReport(config, rvv, directory, lambda: config.stash.get(REFERENCE_KEY, None)).write(sections)
        written = Written(directory, files, page)
    config.stash[SECTIONS_KEY] = (sections, written)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One screen by default: each section in a line, what changed or regressed, the expected failures by cause
    (unless -r lists them one by one) and where the report is; -v adds every table (report/terminal.py)."""
    if SECTIONS_KEY not in config.stash:
        return
    sections, written = config.stash[SECTIONS_KEY]
    xfailed = terminalreporter.stats.get("xfailed", []) if "x" not in terminalreporter.reportchars else []
    expected = [_expected_failure(report) for report in xfailed]
    for title, lines in terminal_blocks(sections, config.get_verbosity() > 0, written, expected):
        if title is not None:
            terminalreporter.section(title, sep="-")
        for line in lines:
            terminalreporter.write_line(line)


def _expected_failure(report: pytest.TestReport) -> ExpectedFailureSeen:
    """An xfailed test as the summary groups it: its reason, its parameters without the target, the target."""
    cell = Record.of(report).cell
    test_id = report.nodeid.partition("[")[2].removesuffix("]") or report.nodeid
    target = cell[1] if cell is not None and test_id.endswith(f"-{cell[1]}") else None
    subject = test_id.removesuffix(f"-{target}") if target is not None else test_id
    return ExpectedFailureSeen(str(getattr(report, "wasxfail", "")), subject, target)


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash[SESSION_KEY]
    settings = session.settings
    targets = ", ".join(t.name for t in settings.targets)
    models = ", ".join(m.name for m in settings.models)
    lines = [f"rvv: targets {targets}; models {models}"]
    cells = settings.kernels.cells if settings.kernels else ()
    lines.append(f"rvv: kernel suite: {len(cells)} cells (" + ", ".join(dict.fromkeys(c.row for c in cells)) + ")"
                 if cells else "rvv: kernel suite (suites/kernels/): not selected; --rvv-kernels=ci (iree issue "
                 "24932's shapes, every row and path), decode, llm or all runs it")
    lines += [_peer_line(name, settings, cells) for name in settings.peers]
    if settings.shard is not None:
        durations = config.stash[DURATIONS_KEY]
        lines.append(shards.header(settings.shard, config.rootpath / shards.DURATIONS_FILE, durations))
    if _schedules_by_cell(config):
        lines.append(scheduling.header(config.rootpath / shards.DURATIONS_FILE, config.stash[DURATIONS_KEY]))
    try:
        toolchain = session.toolchain
    except ToolMissing as exc:
        return [*lines, f"rvv: {exc}"]
    lines.append(f"rvv: {toolchain.compiler_version} ({toolchain.origin}); cache {settings.cache_dir}")
    for session_of in (session, *([config.stash[REFERENCE_KEY]] if REFERENCE_KEY in config.stash else [])):
        lines += [f"rvv: {exc}" for exc in _unavailable_paths(session_of, settings.targets)]
    recorded = recorded_toolchains(settings.root / PERF_BASELINES) - {toolchain.compiler_version}
    if recorded:
        lines.append(f"rvv: upgrade review: baselines recorded with {'; '.join(sorted(recorded))}; now "
                     f"{toolchain.compiler_version}: a test fails only for executed work added beyond "
                     f"+{settings.added_work_percent:g}% (--rvv-added-work), sizes and churn are listed "
                     "(--rvv-strict-baselines: exact)")
    if REFERENCE_KEY in config.stash:
        reference = config.stash[REFERENCE_KEY].toolchain
        lines.append(f"rvv: compare: reference {reference.compiler_version} ({reference.origin}); a comparison "
                     f"fails only for executed work added beyond +{settings.added_work_percent:g}% "
                     "(--rvv-added-work; --rvv-strict-baselines: exact; --rvv-compare-report-only: never)")
    for board in dict.fromkeys(b for t in settings.targets if (b := session.board_for(t)) is not None):
        facts = session.facts(board)
        lines.append(f"rvv: board {board.name} ({board.host}): VLEN {facts.vlen if facts.vector else 'none (no V)'}, "
                     f"kernel {facts.kernel}, GNU time {'yes' if facts.gnu_time else 'no'}, perf counters "
                     f"{'yes' if facts.perf else 'no'}; isa {facts.isa[:60]}")
    if any(t.arch == "riscv64" for t in settings.targets):
        lines.append(f"rvv: riscv64 runtime {_riscv64_runtime_line(session)}")
        if REFERENCE_KEY in config.stash:
            lines.append(f"rvv: reference's riscv64 runtime {_riscv64_runtime_line(config.stash[REFERENCE_KEY])}")
    if session.bundle_results is not None:
        lines.append(f"rvv: {session.bundle_results.describe()}; riscv64 cells are judged from it (no QEMU)")
    machine = session.machine
    own = settings.root / PERF_BASELINES / MACHINES / machine.name
    state = "gated against them" if own.is_dir() else "none yet: machine-bound metrics are shown, not gated"
    lines.append(f"rvv: machine {machine.describe()}; its baselines {own} ({state})")
    return lines


def _unavailable_paths(session: RvvSession, targets: tuple[Target, ...]) -> list[PathUnavailable]:
    """One error per selected target whose matmul path this session's compiler lacks (its cells could not run)."""
    found = []
    for target in targets:
        try:
            session.check_path(target)
        except PathUnavailable as exc:
            found.append(exc)
        except RvvError:
            break  # no compiler at all: said on its own line
    return found


def _riscv64_runtime_line(session: RvvSession) -> str:
    """Which riscv64 runtime runs this toolchain's modules and why that one (chosen here, once, on the controller:
    a runtime built now is in the cache when the workers start)."""
    try:
        runtime = session.runtime("riscv64", log=lambda line: print(f"rvv: {line}", flush=True))
    except RuntimeNotProvided as exc:
        return f"none: {exc} (riscv64 execution tests skip)"
    except RvvError as exc:
        return f"none: {exc} (this toolchain's riscv64 cells are errors: could not run)"
    line = runtime.choice.describe() if runtime.choice is not None else f"{runtime.executable}, {runtime.origin}"
    if mismatch := commit_mismatch(runtime.commit, session.toolchain.commit):
        line += f"; note: {mismatch} (the probe module checks that it loads the compiler's modules)"
    return line


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    settings = metafunc.config.stash[SESSION_KEY].settings
    if "rvv_published" in metafunc.fixturenames:  # suites/kernels: the published rows whose two cells are selected
        rows = selected_published(settings.kernels.cells if settings.kernels else ())
        metafunc.parametrize("rvv_published", [
            pytest.param(p, id=p.id, marks=[pytest.mark.xfail(strict=True, reason=reason)]
                         if (reason := WALL_MISSES.get(p.id)) else []) for p in rows])
        return
        return
    if metafunc.definition.get_closest_marker(KERNELS_MARK) is not None:  # suites/kernels: the kernel cells
        cells = settings.kernels.cells if settings.kernels else ()
        if "rvv_peer" in metafunc.fixturenames:  # beside each kernel peer of --rvv-peers that serves the cell
            pairs = [(c.model, c.target) for c in cells]
            if metafunc.definition.get_closest_marker(ONE_PATH_MARK) is not None:  # the peer runs no IREE path:
                # once per row x shape, on the row's own (default-path) target whichever paths are selected (its id
                # and snapshot do not move with the selection; a path twin runs on the same QEMU CPU)
                rows = settings.kernels.rows if settings.kernels else {}
                pairs = list({c.model.name: (c.model, settings.known_targets.get(rows[c.row].target, c.target))
                              for c in cells if c.row in rows}.values())
            metafunc.parametrize(("rvv_model", "rvv_target", "rvv_peer_name"),
                                 [pytest.param(model, target, name, id=f"{model.name}-{target.name}-{name}")
                                  for model, target in pairs for name in _peers(settings, "kernels")
                                  if PEERS[name].serves(model, target) is None])
            return
        metafunc.parametrize(("rvv_model", "rvv_target"), [(c.model, c.target) for c in cells],
                             ids=[c.id for c in cells])
        return
    if metafunc.definition.get_closest_marker(PEERS_MARK) is not None:  # suites/peers: only with --rvv-peers
        # ONNX Runtime's ids predate other peers (its snapshots are named by them): only others' carry their name
        metafunc.parametrize(("rvv_model", "rvv_target", "rvv_peer_name"),
                             [pytest.param(m, t, name, id=f"{m.name}-{t.name}"
                                           + ("" if name == ONNXRUNTIME else f"-{name}"),
                                           marks=[getattr(pytest.mark, mark) for mark in m.marks])
                              for name in _peers(settings, "models") for m, t in _model_peer_cells(settings)
                              if PEERS[name].serves(m, t) is None])
        return
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


def _peer_line(name: str, settings: Settings, cells: tuple[KernelCell, ...]) -> str:
    """Where a peer of --rvv-peers runs, and why not on the cells it does not serve (one line)."""
    peer = PEERS[name]
    if peer.suite == "models":
        pairs = _model_peer_cells(settings)
        said = [(model.name, peer.serves(model, target)) for model, target in pairs]
        by_reason: dict[str, set[str]] = {}  # why -> the models it refuses for that reason
        for model_name, why in said:
            if why is not None:
                by_reason.setdefault(why, set()).add(model_name)
        served = sum(1 for _, why in said if why is None)
        reasons = "; ".join(f"{why} ({', '.join(sorted(models))})" for why, models in sorted(by_reason.items()))
        return (f"rvv: peers: {name} beside {served} of {len(pairs)} model x riscv64 target cells (suites/peers/)"
                + (f"; not the others: {reasons}" if reasons else ""))
    if not cells:
        return f"rvv: peers: {name} runs beside kernel cells, and none is selected: add --rvv-kernels=ci (for one)"
    answers = [peer.serves(c.model, c.target) for c in cells]
    refused, served = {why for why in answers if why is not None}, answers.count(None)
    return (f"rvv: peers: {name} beside {served} of {len(cells)} kernel cells (suites/kernels/)"
            + (f"; not the others: {'; '.join(sorted(refused))}" if refused else ""))


def _model_peer_cells(settings: Settings) -> list[tuple[Model, Target]]:
    """The model x target cells a model peer (suites/peers) may stand beside: each model on each emulated riscv64
    target."""
    return [(m, t) for m in settings.models for t in settings.targets if t.arch == RISCV64 and t.is_emulated]


def _peers(settings: Settings, suite: str) -> list[str]:
    """The peers of --rvv-peers generated for ``suite`` (``models``: suites/peers, ``kernels``: suites/kernels)."""
    return [name for name in settings.peers if PEERS[name].suite == suite]


def _kernel_cell(item: pytest.Item) -> bool:
    params = getattr(item, "callspec", None)
    return params is not None and (isinstance(params.params.get("rvv_model"), Model)
                                   or isinstance(params.params.get("rvv_published"), Published))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Apply strict expected failures to the tests whose check they affect; deselect toolchain
    comparisons when no reference toolchain is named (--rvv-compare), and the cells of other shards
    (--rvv-shard)."""
    unselected = [i for i in items if (i.get_closest_marker(KERNELS_MARK) is not None
                                       or i.get_closest_marker(PEERS_MARK) is not None) and not _kernel_cell(i)]
    if unselected:  # the kernel suite without --rvv-kernels (the header says), the peer suite without --rvv-peers:
        # their empty parametrization, deselected
        config.hook.pytest_deselected(items=unselected)
        items[:] = [i for i in items if i not in unselected]
    if REFERENCE_KEY not in config.stash:
        deselected = [i for i in items if COMPARISON_FIXTURE in getattr(i, "fixturenames", ())]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [i for i in items if i not in deselected]
    shard = config.stash[SESSION_KEY].settings.shard
    if shard is not None:
        kept, elsewhere = shards.select(items, shard, config.stash[DURATIONS_KEY])
        if elsewhere:
            config.hook.pytest_deselected(items=elsewhere)
            items[:] = kept
    expected = config.stash[EXPECTED_KEY]
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
    if call.excinfo is not None and isinstance(call.excinfo.value, RvvError | pytest.xfail.Exception):
        call.excinfo = _last_frame(call.excinfo)
    report = yield
    excinfo = call.excinfo
    _record_check_outcome(item, report, excinfo)
    _record_cell(item, report)
    change = item.config.stash[SESSION_KEY].stages.delta() if report.when == "teardown" else None
    if change:  # this process's time per stage since the previous test (summed on the controller)
        leave(report, stages=change, stages_cell=shards.cell_of(item))
    if report.failed and excinfo is not None and isinstance(excinfo.value, NoRuntimeLoads | PathUnavailable):
        leave(report, could_not_run=str(excinfo.value))
    if report.failed and excinfo is not None and isinstance(excinfo.value, RvvError):
        details = getattr(excinfo.value, "details", "") or getattr(excinfo.value, "log", "")
        report.longrepr = f"{type(excinfo.value).__name__}: {excinfo.value}" + (f"\n{details}" if details else "")
    elif (report.failed and excinfo is not None and isinstance(excinfo.value, pytest.fail.Exception)
          and not excinfo.value.pytrace):
        report.longrepr = excinfo.value.msg  # one block: no chained "During handling of..." tracebacks
    return report



def _last_frame(excinfo: pytest.ExceptionInfo[BaseException]) -> pytest.ExceptionInfo[BaseException]:
    """``excinfo`` with its traceback cut to the frame that raised. A pytest-rvv error's report is its one line (and an
    expected failure's its reason), but pytest formats the traceback before any hook sees the report, parsing the
    source of every frame's file: 2.6 of a rerun's 36 single-process seconds went there, for reports no one reads."""
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    return pytest.ExceptionInfo.from_exc_info((type(excinfo.value), excinfo.value, tb))


def _record_cell(item: pytest.Item, report: pytest.TestReport) -> None:
    """Attach (model, target, check) to the report that decides a test's outcome (for the HTML report)."""
    params = getattr(item, "callspec", None)
    deciding = report.when == "call" or (report.when == "setup" and not report.passed)
    if params is None or not deciding:
        return
    model, target = params.params.get("rvv_model"), params.params.get("rvv_target")
    timing = params.params.get("timing")
    if isinstance(timing, InstructionTiming):  # the estimator's row, in the column of the core's VLEN family
        leave(report, cell=(f"estimator vs {timing.core}", f"rv64gcv-zvl{CORES[timing.core].vlen}b", "estimator"))
        return
    if not isinstance(target, Target):
        return
    module = Path(str(item.fspath)).stem
    row = model.name if isinstance(model, Model) else ("conformance" if "rvv_node_test" in params.params else "")
    if row:
        leave(report, cell=(row, target.name, CHECKS.get(module, module)))


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
    leave(report, check=(target.name, model.name, phase, reason))
