"""Emulated runs recorded by content: a rerun with nothing changed emulates nothing and judges the same; any
change to what decides a run (module, runtime, QEMU CPU flags, plugin, inputs) runs it again; a damaged record
is run again, never trusted. Through the real iree-compile, QEMU and the riscv64 runtime."""

from __future__ import annotations

import dataclasses
import re
import shutil

import numpy as np
import pytest

from pytest_rvv.base.errors import RunFailed, RuntimeNotProvided
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.counts import attribute, parse
from pytest_rvv.measure.executed import measure_executed
from pytest_rvv.measure.traffic import measure_traffic
from pytest_rvv.model.model import Model
from pytest_rvv.run.qemu_plugin import build_plugin
from pytest_rvv.run.recorded import COUNTED, NAMESPACE, PLAIN, RecordedRuns, run_key
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession

from .conftest import SUITES, mlp_model

TARGET = BUILTIN_TARGETS["rv64gcv-zvl256b"]


def dispatches(session: RvvSession, model: Model, run) -> dict:
    """Executed counts per dispatch of a counted run (the runtime's own code varies a little between runs)."""
    counts = parse(run.counts.read_text(), run.counts)
    return dict(attribute(counts, session.artifact(model, TARGET).executables, "riscv64").dispatches)


@pytest.fixture
def rvv(tmp_path) -> tuple[RvvSession, Model]:
    """A session on a cold cache of its own, and the mlp model."""
    mlp_model(tmp_path / "mlp.onnx")
    table = {"models": {"mlp": {"path": "mlp.onnx", "inputs": [{"name": "x", "shape": [4, 64]}]}}}
    settings = Settings.resolve(lambda option: None, table, tmp_path)
    settings = dataclasses.replace(settings, cache_dir=tmp_path / "cache")
    session = RvvSession(settings)
    try:
        session.runner(TARGET)
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))
    return session, settings.known_models["mlp"]


def test_a_second_run_is_looked_up_and_equals_a_fresh_one(rvv):
    session, model = rvv
    runner = session.runner(TARGET)  # its probe is a recorded run too
    before = (session.runs.emulated, session.runs.looked_up)
    first = session.cell(model, runner.target, runner).recorded(COUNTED)
    again = session.cell(model, runner.target, runner).recorded(COUNTED)
    assert (first.cached, again.cached) == (False, True)
    assert (session.runs.emulated - before[0], session.runs.looked_up - before[1]) == (1, 1)
    fresh = RecordedRuns(session.store, session.settings.timeout_s, fresh=True)
    rerun = fresh.run(COUNTED, session.artifact(model, TARGET), runner, session.oracle(model).inputs,
                      len(session.oracle(model).outputs), build_plugin(session.store))
    assert fresh.emulated == 1 and not rerun.cached
    asked_again = fresh.run(COUNTED, session.artifact(model, TARGET), runner, session.oracle(model).inputs,
                            len(session.oracle(model).outputs), build_plugin(session.store))
    assert fresh.emulated == 1 and asked_again.counts == rerun.counts  # --rvv-no-cache: once per session, not per ask
    assert all(np.array_equal(a, b) for a, b in zip(again.outputs, rerun.outputs, strict=True))
    assert dispatches(session, model, again) == dispatches(session, model, rerun)  # the same work in every dispatch
    kept = rerun.counts
    assert kept is not None and kept.is_file()
    del fresh, rerun
    assert not kept.exists()  # a fresh run's counts live as long as its RecordedRuns, and leave nothing in /tmp


def test_each_part_of_the_key_runs_it_again(rvv, tmp_path):
    session, model = rvv
    runner = session.runner(TARGET)
    artifact = session.artifact(model, TARGET)
    inputs = session.oracle(model).inputs
    plugin = build_plugin(session.store)
    key = run_key(COUNTED, artifact, runner, inputs, plugin)
    other_runtime = tmp_path / "iree-run-module"
    shutil.copyfile(runner.runtime.executable, other_runtime)
    with other_runtime.open("ab") as f:
        f.write(b"\0")  # another binary
    wider = dataclasses.replace(TARGET, emulator_cpu=TARGET.emulator_cpu.replace("vlen=256", "vlen=512"), silicon=())
    other_plugin = tmp_path / "rvv_counter.so"
    other_plugin.write_bytes(plugin.read_bytes() + b"\0")
    changed = {
        "kind": run_key(PLAIN, artifact, runner, inputs, plugin),
        "runtime": run_key(COUNTED, artifact, Runner(TARGET, dataclasses.replace(runner.runtime,
                                                                                  executable=other_runtime),
                                                     runner.qemu), inputs, plugin),
        "QEMU CPU flags": run_key(COUNTED, artifact, Runner(wider, runner.runtime, runner.qemu), inputs, plugin),
        "plugin": run_key(COUNTED, artifact, runner, inputs, other_plugin),
        "inputs": run_key(COUNTED, artifact, runner, [inputs[0] + 1], plugin),
        "module": run_key(COUNTED, session.artifact(model, BUILTIN_TARGETS["rv64gcv-zvl512b"]), runner, inputs,
                          plugin),
    }
    assert key == run_key(COUNTED, artifact, runner, inputs, plugin)
    assert [part for part, other in changed.items() if other == key] == []


def test_an_error_exit_is_recorded_and_a_rerun_raises_it_again_without_emulating(rvv):
    """iree-run-module's error exit repeats on the same content (the conformance suite's expected run failures):
    recorded like a run, so a rerun with nothing changed emulates nothing; a fresh session says the same line."""
    session, model = rvv
    runner = session.runner(TARGET)
    artifact, plugin = session.artifact(model, TARGET), build_plugin(session.store)
    wrong = [np.zeros((3, 5), np.float32)]  # not the model's input shape: IREE refuses it and exits 1
    before = (session.runs.emulated, session.runs.looked_up)
    with pytest.raises(RunFailed) as first:
        session.runs.run(COUNTED, artifact, runner, wrong, 1, plugin)
    with pytest.raises(RunFailed) as again:
        session.runs.run(COUNTED, artifact, runner, wrong, 1, plugin)
    assert first.value.deterministic and again.value.deterministic
    assert (str(again.value), again.value.details) == (str(first.value), first.value.details)
    assert "exit code 1" in str(first.value)
    assert (session.runs.emulated - before[0], session.runs.looked_up - before[1]) == (1, 1)


def test_a_damaged_record_is_run_again_not_trusted(rvv):
    session, model = rvv
    runner = session.runner(TARGET)
    first = session.cell(model, runner.target, runner).recorded(COUNTED)
    emulated = session.runs.emulated
    recorded = dispatches(session, model, first)
    assert first.counts.is_relative_to(session.store.root / NAMESPACE)
    first.counts.write_text(first.counts.read_text().replace(" 1 ", " 2 "))  # the manifest's hash no longer matches
    again = session.cell(model, runner.target, runner).recorded(COUNTED)
    assert not again.cached and session.runs.emulated == emulated + 1
    assert dispatches(session, model, again) == recorded


def test_a_rerun_emulates_nothing_and_after_one_models_file_changed_only_its_cells_run_again(
        project, tmp_path, monkeypatch):
    """Nothing changed: every stage is looked up and judged the same. New weights in mlp.onnx: mlp is imported,
    compiled and emulated again while convs, whose file did not change, is looked up in every stage and its
    snapshots stay byte-identical. --rvv-no-cache emulates everything."""
    monkeypatch.setenv("PYTEST_RVV_CACHE_DIR", str(tmp_path / "cache"))
    project.write(models=("mlp", "convs"))
    shutil.copytree(SUITES / "vectorization", project.path / "vectorization",
                    ignore=shutil.ignore_patterns("__pycache__", "__snapshots__"))
    args = ("correctness", "vectorization", "--rvv-models=mlp,convs", f"--rvv-targets={TARGET.name}", "--rvv-profile")

    def profile(run: pytest.RunResult) -> dict[str, list[str]]:
        """[worked, cache hits] per stage."""
        return {line.split()[0]: line.split()[-2:] for line in run.outlines
                if line.split()[:1] in (["import"], ["compile"], ["analyze"], ["emulate"], ["count"])}

    cold = project.run(*args, "--snapshot-update")
    cold.assert_outcomes(passed=8)
    # the runtime probe (to choose the runtime, then for the session), and per model one plain run (agreement), one
    # counted run (executed counts) and one counted run of the load alone (a call's work per dispatch)
    cold.stdout.fnmatch_lines(["rvv: emulated runs: 8 emulated, * looked up by content*",
                               "wall * s on 1 worker(s): tests ran * of * worker-seconds (* %); idle at the end *"])
    warm = project.run(*args)
    warm.assert_outcomes(passed=8)
    warm.stdout.fnmatch_lines(["rvv: emulated runs: 0 emulated, 7 looked up by content*"])
    assert profile(warm) == {"import": ["0", "2"], "compile": ["0", "3"], "analyze": ["0", "2"],
                             "emulate": ["0", "7"], "count": ["0", "4"]}

    snapshots = project.path / "vectorization" / "__snapshots__"
    convs = {p: p.read_bytes() for p in snapshots.rglob("*convs*")}
    assert len(convs) == 2  # static and executed
    mlp_model(project.path / "mlp.onnx", seed=1)
    after = project.run(*args, "--snapshot-update")  # new weights, new executed counts: recorded anew
    after.assert_outcomes(passed=8)
    after.stdout.fnmatch_lines(["rvv: emulated runs: 3 emulated, 4 looked up by content*"])
    assert profile(after) == {"import": ["1", "1"], "compile": ["1", "2"], "analyze": ["1", "1"],
                              "emulate": ["3", "4"], "count": ["2", "2"]}
    assert {p: p.read_bytes() for p in snapshots.rglob("*convs*")} == convs
    # the profile names the cell that did the work, and only it
    heaviest = after.outlines.index(next(line for line in after.outlines if line.startswith("heaviest cells")))
    assert after.outlines[heaviest].startswith("heaviest cells (CPU s their tests worked; 1 of ")
    assert re.fullmatch(rf"  mlp x {TARGET.name}: [\d.]+ CPU s \(.*compile [\d.]+.*\)", after.outlines[heaviest + 1])

    fresh = project.run(*args, "--rvv-no-cache")
    fresh.assert_outcomes(passed=8)
    fresh.stdout.fnmatch_lines(["rvv: emulated runs: 7 emulated, 0 looked up by content*"])


def test_the_shared_plain_run_measures_iree_peak_allocation_like_a_timed_run(rvv):
    """--print_statistics writes to stderr: a recorded run that kept stdout alone left the metric unmeasured."""
    from pytest_rvv.measure.performance import measure_performance

    session, model = rvv
    runner = session.runner(TARGET)
    shared = measure_performance(session.cell(model, TARGET, runner), repeat=1, timed=False)
    timed = measure_performance(session.cell(model, TARGET, runner), repeat=1, timed=True)
    assert shared.metrics["iree_peak_bytes"] == timed.metrics["iree_peak_bytes"] > 0


def test_a_cell_traced_later_counts_in_its_traced_run_with_each_dispatch_as_counted_alone(rvv, tmp_path):
    """The kernel suite measures every cell's executed counts and its memory traffic: two emulations of the same run.
    Asked for the counts of a cell it will trace, the session makes the traced run first with the counting plugin
    along, keeps it as the counted run too, and each dispatch's work is what a counted run made alone finds."""
    session, model = rvv
    runner = session.runner(TARGET)
    cell = session.cell(model, TARGET, runner)
    before = session.runs.emulated
    along = measure_executed(cell, tmp_path / "along", traced_on="spacemit-x60")
    assert session.runs.emulated == before and along.checked.agreement.ok  # no counted run of its own
    with cell.stages.time("traffic"):
        assert measure_traffic(cell, tmp_path / "traffic").dispatches  # the traced run, looked up
    assert session.runs.emulated == before
    assert session.stages.totals["traffic"][2:] == [1, 1]  # the profile: traced once, looked up once
    fresh = RecordedRuns(session.store, session.settings.timeout_s, fresh=True)
    alone = fresh.run(COUNTED, session.artifact(model, TARGET), runner, session.oracle(model).inputs,
                      len(session.oracle(model).outputs), build_plugin(session.store))
    assert fresh.emulated == 1
    assert dispatches(session, model, along.run) == dispatches(session, model, alone)
    # a cell whose counted run is kept already is traced without it
    assert cell.runs is not None and cell.runs.counting_along(tmp_path) is None
