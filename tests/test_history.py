"""History over toolchain versions: every exact change point between neighbouring versions, ranked by added work,
drawn per cell, with gaps and bad input named; and a real sweep over three IREE releases read back by it."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_rvv.comparison.history import changes, drifts, judged, lineage, load, release_key, selection
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.dispatch_table import DispatchCounts, DispatchRow, DispatchTable
from pytest_rvv.report.history import history as report_history
from pytest_rvv.report.history_page import change_lines, write

from .conftest import SUITES

CELL = ("nsnet2", "rv64gcv-zvl256b")


def row(name: str, work: int, vector: int = 10, spilled: int = 0, once: int = 50) -> DispatchRow:
    """A dispatch whose call executes ``work`` instructions (its load ``once`` more)."""
    return DispatchRow(name, instructions=work // 10, vector=vector, spilled_registers=spilled,
                       executed=work + once, executed_vector=(work + once) // 2, executed_spills=spilled * 3,
                       one_time=once)


def sweep_folder(root: Path, version: str, rows: list[DispatchRow] | None, compiler: str | None = None,
                 failed: bool = False, schema: str = "pytest-rvv-results/1") -> Path:
    """One version's results.json as a sweep leaves it (``rows`` None: the cell has no table there)."""
    folder = root / version
    folder.mkdir(parents=True)
    line = compiler or f"IREE compiler version {version} @ {'ab' * 20}"
    document = {"schema": schema, "run": {"toolchain": f"{line} (release)", "qemu": "qemu-riscv64 10.0.2"},
                "tests": [{"nodeid": "x", "outcome": "failed" if failed else "passed", "model": CELL[0],
                           "target": CELL[1], "check": "compile"}],
                "metrics": [], "dispatch_tables": [] if rows is None else [DispatchTable(*CELL, tuple(rows)).to_json()]}
    (folder / "results.json").write_text(json.dumps(document))
    return folder


def test_versions_are_ordered_by_packaging_a_release_candidate_before_its_release():
    lines = ["IREE compiler version 3.13.0 @ 89ece87b", "IREE compiler version 3.13.0rc20261016 @ 89ece87b",
             "IREE compiler version 3.9.0 @ 1", "IREE compiler version 3.12.0rc20260917 @ 2b05c5db"]
    assert sorted(lines, key=release_key) == [lines[2], lines[3], lines[1], lines[0]]


def test_the_reports_git_history_orders_versions_by_packaging_too(tmp_path):
    sweep = tmp_path / "sweep"
    for version, value in (("3.13.0", 2.0), ("3.13.0rc20261016", 1.0)):
        (sweep / version).mkdir(parents=True)
        (sweep / version / "results.json").write_text(json.dumps({"metrics": [
            {"model": "m", "target": "t", "metric": "size", "value": value,
             "toolchain": {"iree_compile": f"IREE compiler version {version} @ x"}}]}))
    found = report_history(tmp_path, tmp_path / "baselines", [("m", "t")], sweep)
    assert [release_key(v)[1].public for v in found[("m", "t")]["versions"]] == ["3.13.0rc20261016", "3.13.0"]


def test_every_exact_difference_between_neighbours_is_a_change_point_even_one_instruction(tmp_path):
    sweep_folder(tmp_path, "3.9.0", [row("dispatch_0_matmul", 1000), row("dispatch_1_add", 500)])
    sweep_folder(tmp_path, "3.10.0", [row("dispatch_0_matmul", 1001), row("dispatch_1_add", 500)])
    sweep_folder(tmp_path, "3.11.0", [row("dispatch_0_matmul", 1001), row("dispatch_1_add", 500)])
    found = changes(load([tmp_path]))
    executed = [c for c in found if c.metric == "per_call"]
    assert [(c.good, c.bad, c.dispatch, c.before, c.after) for c in executed] == [
        ("3.9.0", "3.10.0", "dispatch_0_matmul", 1000, 1001)]  # asv's step detection finds no step here


def test_changes_are_grouped_by_interval_and_ranked_by_added_work_with_a_bisect_line(tmp_path):
    sweep_folder(tmp_path, "3.12.0", [row("dispatch_0_matmul", 1000), row("dispatch_1_add", 500),
                                      row("dispatch_2_pack", 300)])
    sweep_folder(tmp_path, "3.13.0", [row("dispatch_0_matmul", 1100), row("dispatch_1_add", 900),
                                      row("dispatch_2_pack", 100)])
    found = [c for c in changes(load([tmp_path])) if c.metric == "per_call"]
    assert [c.dispatch for c in found] == ["dispatch_1_add", "dispatch_0_matmul", "dispatch_2_pack"]
    lines = change_lines(changes(load([tmp_path])))
    assert lines[0].startswith("3.12.0 -> 3.13.0: ")
    assert lines[1] == ("  nsnet2 on rv64gcv-zvl256b: dispatch_1_add: executed instructions per call 500 -> 900 (+400, "
                        "+80.0 %)")
    assert lines[-1] == ("  bisect: pytest-rvv bisect --good 3.12.0 --bad 3.13.0 -- suites/vectorization "
                         "--rvv-models=nsnet2 --rvv-targets=rv64gcv-zvl256b")


def test_a_renumbered_dispatch_is_one_line_and_appearing_or_vanishing_ones_are_named(tmp_path):
    sweep_folder(tmp_path, "3.12.0", [row("dispatch_3_matmul_64x64", 1000), row("dispatch_4_softmax", 50)])
    sweep_folder(tmp_path, "3.13.0", [row("dispatch_2_matmul_64x64", 1000), row("dispatch_5_pack", 70)])
    history = load([tmp_path])
    assert not [c for c in changes(history) if c.metric == "per_call"]  # the matmul only moved its index
    named = {(c.dispatch, c.before, c.after) for c in changes(history) if c.metric == "dispatch"}
    assert named == {("dispatch_5_pack", None, 70), ("dispatch_4_softmax", 50, None)}
    assert [r is not None for r in lineage(history, CELL)["dispatch_2_matmul_64x64"]] == [True, True]


def test_a_failed_version_is_a_gap_not_a_change_and_the_neighbours_around_it_are_compared(tmp_path):
    sweep_folder(tmp_path, "3.10.0", [row("dispatch_0_matmul", 1000)])
    sweep_folder(tmp_path, "3.11.0", None, failed=True)
    sweep_folder(tmp_path, "3.12.0", [row("dispatch_0_matmul", 1200)])
    history = load([tmp_path])
    assert history.gaps == {CELL: {"3.11.0": "its compile failed"}}
    executed = [c for c in changes(history) if c.metric == "per_call"]
    assert [(c.good, c.bad) for c in executed] == [("3.10.0", "3.12.0")]


def test_gradual_creep_below_the_gate_is_named_as_drift_and_judged_first_to_last(tmp_path):
    for i, work in enumerate((1000, 1040, 1080, 1120)):  # +4 % a step: under the 5 % gate each time
        sweep_folder(tmp_path, f"3.{9 + i}.0", [row("dispatch_0_matmul", work)])
    history = load([tmp_path])
    (drift,) = drifts(history)
    assert drift.text() == ("nsnet2 on rv64gcv-zvl256b: 3.9.0 -> 3.12.0: executed instructions per call 1000 -> "
                            "1120 (+12.0 %)")
    findings = judged(history, BUILTIN_TARGETS, added_work=5.0, max_share_drop=5.0)
    regressions = [f for f in findings if f.regression]
    assert {(f.good, f.bad, f.drift) for f in regressions} == {("3.9.0", "3.12.0", True)}
    assert [f.line for f in regressions] == ["dispatch_0_matmul: executes 1000 -> 1120 instructions (+120, +12.0%)",
                                             "the model executes 1000 -> 1120 instructions (+12.0%; allowed +5% "
                                             "during an upgrade)"]


def test_a_dispatch_that_starts_spilling_between_versions_fails_the_gate(tmp_path):
    sweep_folder(tmp_path, "3.12.0", [row("dispatch_0_matmul", 1000)])
    sweep_folder(tmp_path, "3.13.0", [row("dispatch_0_matmul", 1000, spilled=8)])
    findings = judged(load([tmp_path]), BUILTIN_TARGETS, added_work=5.0, max_share_drop=5.0)
    assert [f.line for f in findings if f.regression] == [
        "dispatch_0_matmul: now spills vector registers (24 registers moved), none before"]


def test_a_kernel_cells_bisect_line_selects_it_through_the_kernel_suite_on_its_path():
    assert selection("mm-f32-256x256x256", "rv64gcv-zvl256b-inner") == (
        "suites/kernels --rvv-kernels=256x256x256,f32,inner-tiled -k still_vectorized")
    assert selection("nsnet2", "rv64gc") == "suites/vectorization --rvv-models=nsnet2 --rvv-targets=rv64gc"


def test_bad_sweep_input_is_one_line_each_and_the_rest_is_drawn(tmp_path):
    good = tmp_path / "sweep"
    sweep_folder(good, "3.12.0", [row("dispatch_0_matmul", 1000)])
    sweep_folder(good, "3.13.0", [row("dispatch_0_matmul", 1100)])
    sweep_folder(tmp_path / "old", "3.11.0", [row("dispatch_0_matmul", 900)], schema="pytest-rvv-results/0")
    sweep_folder(tmp_path / "again", "3.13.0", [row("dispatch_0_matmul", 5)])
    sweep_folder(tmp_path / "other", "3.13.0", [row("dispatch_0_matmul", 5)],
                 compiler="IREE compiler version 3.13.0 @ 1")
    (good / "3.11.0").mkdir()  # a version the sweep could not install or run
    history = load([good, tmp_path / "old", tmp_path / "again", tmp_path / "other", tmp_path / "missing"])
    assert [v.name for v in history.versions] == ["3.12.0", "3.13.0"]
    gap, old, other, missing, again = history.notes
    assert gap == f"{good / '3.11.0'}: version 3.11.0 has no results.json (it could not be installed or run); a gap"
    assert old.endswith("3.11.0/results.json: schema 'pytest-rvv-results/0', not pytest-rvv-results/1; left out")
    assert other.endswith("version 3.13.0 again, made by IREE compiler version 3.13.0 @ 1 (first: IREE compiler "
                          f"version 3.13.0 @ {'ab' * 20} in {good / '3.13.0'}); left out")
    assert missing == f"{tmp_path / 'missing'}: no such folder; left out"
    assert again == (f"{tmp_path / 'again' / '3.13.0' / 'results.json'}: a second result for nsnet2 on "
                     "rv64gcv-zvl256b at version 3.13.0; the first is kept")
    assert history.tables[CELL]["3.13.0"].total("per_call") == 1100


def test_two_sweeps_of_one_range_with_other_selections_join(tmp_path):
    for version in ("3.12.0", "3.13.0"):
        sweep_folder(tmp_path / "models", version, [row("dispatch_0_matmul", 1000)])
        folder = sweep_folder(tmp_path / "kernels", version, None)
        document = json.loads((folder / "results.json").read_text())
        document["dispatch_tables"] = [DispatchTable("mm-f32-256x256x256", "rv64gcv-zvl256b",
                                                     (row("dispatch_0_matmul", 9),)).to_json()]
        (folder / "results.json").write_text(json.dumps(document))
    history = load([tmp_path / "models", tmp_path / "kernels"])
    assert history.cells == [("mm-f32-256x256x256", "rv64gcv-zvl256b"), CELL] and not history.notes


def test_the_page_is_offline_files_a_browser_shows(tmp_path):
    sweep_folder(tmp_path / "s", "3.12.0", [row("dispatch_0_matmul", 1000)])
    sweep_folder(tmp_path / "s", "3.13.0", [row("dispatch_0_matmul", 1500)])
    history = load([tmp_path / "s"])
    page = write(history, changes(history), drifts(history), [], tmp_path / "out")
    text = page.read_text()
    assert "<script" not in text and "http" not in text
    graph = tmp_path / "out" / "nsnet2__rv64gcv-zvl256b.png"
    assert graph.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"src='{graph.name}'" in text
    document = json.loads((tmp_path / "out" / "changes.json").read_text())
    assert document["changes"][0]["added"] == 500 and document["versions"][0]["name"] == "3.12.0"


def test_the_command_fails_on_regression_only_when_asked(tmp_path):
    sweep_folder(tmp_path / "s", "3.12.0", [row("dispatch_0_matmul", 1000)])
    sweep_folder(tmp_path / "s", "3.13.0", [row("dispatch_0_matmul", 2000)])

    def command(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "history", str(tmp_path / "s"),
                               f"--out={tmp_path / 'out'}", *extra], capture_output=True, text=True, cwd=tmp_path)

    shown = command()
    assert shown.returncode == 0, shown.stderr
    assert "REGRESSED: nsnet2 on rv64gcv-zvl256b, 3.12.0 -> 3.13.0: dispatch_0_matmul: executes 1000 -> 2000" \
        in shown.stdout
    assert command("--fail-on-regression").returncode == 1
    empty = subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "history", str(tmp_path / "nothing")],
                           capture_output=True, text=True, cwd=tmp_path)
    assert empty.returncode == 2 and "no version to draw; run pytest-rvv sweep first" in empty.stderr


def test_a_real_sweep_over_three_releases_is_drawn_with_its_change_points_checked(project, tmp_path):
    """``pytest-rvv sweep`` over IREE 3.11.0 .. 3.13.0 (each on a runtime its modules load in) on two small convs at
    rv64gcv-zvl256b, then ``pytest-rvv history``: each version's dispatch table is recorded and the largest change
    point is exactly the difference of the two versions' per-dispatch numbers."""
    from .test_runtime_choice import B48, E4A, release_runtime

    for commit in (B48, E4A):
        release_runtime(commit)
    project.write(models=("convs",), suite=False)
    shutil.copytree(SUITES / "vectorization", project.path / "vectorization",
                    ignore=shutil.ignore_patterns("__pycache__", "__snapshots__"))
    selection = ["vectorization", "--rvv-models=convs", "--rvv-targets=rv64gcv-zvl256b", "-p", "no:cacheprovider"]
    out = tmp_path / "sweep"
    sweep = subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "sweep", "--versions", "3.11.0..3.13.0",
                            f"--out={out}", "--", *selection], cwd=project.path, capture_output=True, text=True,
                           env=os.environ)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-2000:]
    history = load([out])
    assert [v.name for v in history.versions] == ["3.11.0", "3.12.0", "3.13.0"]
    assert all(v.compiler.startswith("IREE compiler version 3.1") for v in history.versions)
    cell = ("convs", "rv64gcv-zvl256b")
    assert all(t is not None and t.total("executed") for _, t in history.series(cell))
    found = [c for c in changes(history) if c.metric == "per_call"]
    assert found, "3.11.0 .. 3.13.0 execute the convs identically: pick another selection"
    top = max(found, key=lambda c: abs(c.added))
    tables = {v.name: t for v, t in history.series(cell)}
    before = {r.name: r.per_call for r in tables[top.good].rows}
    after = {r.name: r.per_call for r in tables[top.bad].rows}
    names = top.dispatch.split(" -> ")
    assert (before[names[0]], after[names[-1]]) == (top.before, top.after)
    run = subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "history", str(out), f"--out={tmp_path / 'h'}"],
                         cwd=project.path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert f"{top.good} -> {top.bad}: " in run.stdout and (tmp_path / "h" / "convs__rv64gcv-zvl256b.png").is_file()
    # the run report's history section lists the same change points for its cells
    report = subprocess.run([sys.executable, "-m", "pytest", *selection, f"--rvv-report={tmp_path / 'r'}",
                             f"--rvv-history={out}"], cwd=project.path, capture_output=True, text=True)
    assert report.returncode == 0, report.stdout[-2000:]
    page = (tmp_path / "r" / "index.html").read_text()
    assert "Change points per dispatch" in page and f"{top.good} -&gt; {top.bad}: " in page


@pytest.mark.parametrize("metric", ["executed", "instructions", "spilled_registers"])
def test_a_table_keeps_what_was_not_measured_as_none(metric):
    table = DispatchTable.from_counts("m", "t", None, {"dispatch_0": DispatchCounts(5, 1)})
    assert table.rows[0].executed == 5
    assert (getattr(table.rows[0], metric) is None) == (metric != "executed")
    assert DispatchTable.from_json(table.to_json()) == table
