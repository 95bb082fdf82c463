"""Work per thread (run/threaded.py, run/rvv_counter.c, measure/threads.py): a module run as boards run it,
``--device=local-task`` with N workers under QEMU, counted per guest thread, against the one-thread run.

Real iree-compile, QEMU and onnxruntime. The cell with many workgroups is iree issue 24932's 540x516x332 f32 matmul on
the inner-tiled path at VLEN 256 (990 workgroups in its matmul dispatch), the cell with few its 64^3 on mmt4d.
"""

import dataclasses

import numpy as np
import pytest

from pytest_rvv.base.errors import ConfigError, RunFailed
from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store
from pytest_rvv.config.cores import CORES, MAX_THREADS
from pytest_rvv.config.kernels import kernels
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure import threads as threads_module
from pytest_rvv.measure.executed import measure_executed
from pytest_rvv.measure.silicon import estimate
from pytest_rvv.measure.threads import NAMESPACE, measure_threads
from pytest_rvv.run.recorded import RecordedRuns
from pytest_rvv.run.threaded import ThreadedRunner, check_threads
from pytest_rvv.session import Cell, RvvSession

X60 = CORES["spacemit-x60"]


@pytest.fixture(scope="module")
def session(counted_session: RvvSession) -> RvvSession:
    return counted_session


def kernel_cell(session: RvvSession, shape: str, path: str) -> Cell:
    kernel = next(c for c in kernels({}, f"{shape},f32", BUILTIN_TARGETS).cells
                  if c.path == path and c.target.name.startswith("rv64gcv-zvl256b"))
    return session.cell(kernel.model, kernel.target, session.runner(kernel.target))


@pytest.fixture(scope="module")
def many(session) -> Cell:
    """540x516x332 f32 on inner-tiled: 990 workgroups in its matmul dispatch."""
    return kernel_cell(session, "540x516x332", "inner-tiled")


@pytest.fixture(scope="module")
def few(session) -> Cell:
    """64^3 f32 on mmt4d: 5 workgroups in its matmul dispatch."""
    return kernel_cell(session, "64x64x64", "mmt4d")


def test_outputs_at_4_threads_equal_local_sync_s(many, tmp_path):
    runner, oracle = many.given()
    sync = runner.run(many.artifact, oracle.inputs, tmp_path / "sync", len(oracle.outputs), many.timeout_s)
    threaded = ThreadedRunner.like(runner, 4)
    assert threaded.capabilities.threads == 4 and not threaded.capabilities.recorded
    task = threaded.run(many.artifact, oracle.inputs, tmp_path / "task", len(oracle.outputs), many.timeout_s)
    assert "--device=local-task" in task.repro and "--task_topology_group_count=4" in task.repro
    assert "--device=local-sync" in sync.repro
    for ours, theirs in zip(task.outputs, sync.outputs, strict=True):
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("threads", [1, 4, 8])
@pytest.mark.parametrize("which", ["many", "few"])
def test_workgroups_and_dispatch_instructions_over_threads_sum_to_the_one_thread_counts(which, threads, request,
                                                                                        tmp_path):
    """Exactly: dispatch code executes the same instructions whichever thread runs a workgroup (the one-thread
    figures are the executed attribution's, measure/counts.py; at one thread the profile reads that same counted run
    through its own per-thread attribution, which must agree with it)."""
    cell = request.getfixturevalue(which)
    one = measure_executed(cell, tmp_path / "one")
    profile = measure_threads(cell, tmp_path / "n", threads)
    calls = {k: w["calls"] for k, w in one.attribution.watched.items() if "calls" in w}
    assert {k: d.total_workgroups for k, d in profile.dispatches.items()} == calls
    assert {k: d.total_instructions for k, d in profile.dispatches.items()} == one.per_dispatch
    busy = {t for d in profile.dispatches.values() for t in d.busy}
    assert busy <= set(profile.workers)  # only the task system's workers (local-sync: the main thread) take any


def test_the_one_thread_profile_is_the_counted_run_emulated_once(few, tmp_path):
    """At one thread (local-sync) the command is the counted run's, with the same counter: one emulation gives the
    executed counts and the thread profile, and the profile's totals are that run's."""
    store, stages = Store(tmp_path / "store"), Stages()
    runs = dataclasses.replace(few.runs, runs=RecordedRuns(store, few.timeout_s, stages=stages), store=store)
    cell = dataclasses.replace(few, store=store, stages=stages, runs=runs)
    one = measure_executed(cell, tmp_path / "one")
    profile = measure_threads(cell, tmp_path / "n", 1)
    assert stages.totals["emulate"][2] == 1  # the counted run, once
    assert not [p for p in (tmp_path / "store" / NAMESPACE).glob("*/*") if p.is_dir()]  # no run of its own
    assert sum(profile.totals.values()) == one.counts.total
    assert {k: d.total_instructions for k, d in profile.dispatches.items()} == one.per_dispatch


def test_no_cache_traces_the_threads_again_and_keeps_nothing(few, tmp_path):
    """--rvv-no-cache reaches the traced runs (measure/plugin_run.py through run/kept.py): the 4-thread run and the
    counted run are emulated again into this session only, and give the recorded profile's work per dispatch."""
    recorded = measure_threads(few, tmp_path / "kept", 4)
    store = Store(tmp_path / "store")
    runs = dataclasses.replace(few.runs, runs=RecordedRuns(store, few.timeout_s, fresh=True), store=store)
    fresh = measure_threads(dataclasses.replace(few, store=store, runs=runs), tmp_path / "fresh", 4)
    assert not [p for p in (tmp_path / "store").glob(f"{NAMESPACE}/*/*") if p.is_dir()]
    assert not [p for p in (tmp_path / "store").glob("runs/*/*") if p.is_dir()]
    assert ({k: (d.total_workgroups, d.total_instructions) for k, d in fresh.dispatches.items()}
            == {k: (d.total_workgroups, d.total_instructions) for k, d in recorded.dispatches.items()})


def test_a_runs_profile_is_kept_and_read_back_figure_for_figure_without_parsing_the_run_again(few, tmp_path,
                                                                                              monkeypatch):
    """Attributed and estimated once per run (by its counts, the libraries, the cores and llvm-mca): a rerun reads the
    profile back from the store, every figure the same."""
    cell = dataclasses.replace(few, store=Store(tmp_path / "store"))
    made = measure_threads(cell, tmp_path / "made", 4, cores=(X60,))
    [output] = (tmp_path / "store" / NAMESPACE).glob("*/*/counts.txt")  # the 4-thread run, kept in this store
    counts = threads_module.parse_threads(output.read_text(), output)
    runner = cell.given()[0]
    static = runner.runtime.executable if runner.runtime.sysroot is None else None
    dispatches, totals, runtime = threads_module.attribute_threads(counts, cell.artifact.executables, "riscv64", static)
    threads_module.estimate_threads(counts, dispatches, cell.artifact.executables, "riscv64", (X60,), cell.store)
    assert (made.vcpus, made.dispatches, made.totals, made.runtime) == (counts.vcpus, dispatches, totals, runtime)
    monkeypatch.setattr(threads_module, "parse_threads", lambda *args: pytest.fail("a kept run was parsed again"))
    read = measure_threads(cell, tmp_path / "read", 4, cores=(X60,))
    assert read == made
    assert any(d.cycles[X60.name] and d.total_workgroups for d in made.dispatches.values()) and made.runtime


def test_with_4_threads_more_than_one_thread_takes_workgroups_of_a_dispatch_with_many(many, tmp_path):
    profile = measure_threads(many, tmp_path, 4)
    matmul = next(d for name, d in profile.dispatches.items() if "matmul" in name)
    assert matmul.total_workgroups == 990
    assert len([t for t, n in matmul.workgroups.items() if n]) > 1
    assert matmul.slowest < matmul.total_instructions
    assert 1.0 <= matmul.imbalance <= 4.0


def test_est_cycles_over_threads_sum_to_the_one_thread_estimate(many, tmp_path):
    """llvm-mca's cycles per block are the same whichever thread ran it: the threads' shares of a dispatch add up to
    its one-thread estimate, but for rounding (one cycle per thread)."""
    one = measure_executed(many, tmp_path / "one")
    whole = estimate(one.counts, many.artifact.executables, "riscv64", (X60,), many.store)[X60.name].dispatches
    profile = measure_threads(many, tmp_path / "n", 4, cores=(X60,))
    for name, d in profile.dispatches.items():
        assert abs(sum(d.cycles[X60.name].values()) - whole[name]) <= len(d.busy)
        assert profile.dispatch_cycles(name, X60.name) >= d.slowest_cycles(X60.name)
    alone = measure_threads(many, tmp_path / "1", 1, cores=(X60,))
    for name in alone.dispatches:  # one thread takes every workgroup: the even split is the measured one
        assert abs(alone.even_cycles(name, X60.name) - alone.dispatch_cycles(name, X60.name)) <= 1


def test_the_runtime_s_work_per_workgroup_and_per_dispatch_is_measured(many, tmp_path):
    """The runtime's instructions around each workgroup (claiming it, calling into the library) are tens, at one
    thread and at four; the workers' own work per dispatch (waking, stealing, sleeping) is measured only with
    workers."""
    one, four = (measure_threads(many, tmp_path / str(n), n).runtime_cost() for n in (1, 4))
    assert one.workgroups == four.workgroups == 1026
    assert one.per_workgroup is not None and four.per_workgroup is not None
    assert 10 < one.per_workgroup < 200 and 10 < four.per_workgroup < 200
    assert one.per_dispatch is None
    assert four.per_dispatch is not None and four.per_dispatch > 1000


def test_zero_threads_or_more_than_the_target_s_harts_is_one_line(few, tmp_path):
    for threads, limit in ((0, "1 to 8"), (9, "1 to 8")):
        with pytest.raises(ConfigError) as error:
            measure_threads(few, tmp_path, threads)
        assert "\n" not in str(error.value)
        assert f"{threads} threads" in str(error.value) and limit in str(error.value)
        assert "spacemit-x60 ships with 8 harts" in str(error.value)
    check_threads(few.target, 8)  # the K1's eight X60 harts are fine
    wide = BUILTIN_TARGETS["rv64gcv-zvl512b"]  # estimated on the X280: no part fixes its harts
    with pytest.raises(ConfigError, match=f"IREE caps its workers at {MAX_THREADS}"):
        check_threads(wide, MAX_THREADS + 1)


def test_a_run_killed_at_the_timeout_says_so_and_keeps_nothing(many, tmp_path):
    store = Store(tmp_path / "store")
    hurried = dataclasses.replace(many, store=store, timeout_s=0.05)
    with pytest.raises(RunFailed) as error:
        measure_threads(hurried, tmp_path / "run", 4)
    assert "timed out after" in str(error.value) and "killed at the timeout" in str(error.value)
    entries = tmp_path / "store" / NAMESPACE
    assert not [p for p in entries.glob("*/*") if p.is_dir()]  # no entry published, not even a partial one
