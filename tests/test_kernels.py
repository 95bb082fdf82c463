"""The kernel suite: its table, its selection, bad input in one line, and its cells through the real tools."""

from __future__ import annotations

import json
import shutil

import jsonschema
import pytest

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.kernels import kernels
from pytest_rvv.config.targets import BUILTIN_TARGETS, target_from_table
from pytest_rvv.model.kernels import SHAPES
from pytest_rvv.report.kernels import calibration, dashboard
from pytest_rvv.report.results import schema

from .conftest import SUITES


def test_ci_selection_is_iree_issue_24932s_shapes_on_every_row_and_path():
    chosen = kernels({}, "ci", BUILTIN_TARGETS)
    assert {c.shape.name for c in chosen.cells} == {"64x64x64", "256x256x256", "81x41x19", "540x516x332"}
    assert {c.row for c in chosen.cells} == {"f32", "f16", "f16-via-f32", "bf16", "i8"}
    assert {c.path for c in chosen.cells} == {"default", "data-tiled", "mmt4d", "inner-tiled"}
    assert len(chosen.cells) == 4 * 5 * 4
    f16 = {c.target.name for c in chosen.cells if c.row == "f16"}
    assert f16 == {"rv64gcv-zvl256b-zvfh", "rv64gcv-zvl256b-zvfh-dt", "rv64gcv-zvl256b-zvfh-mmt4d",
                   "rv64gcv-zvl256b-zvfh-inner"}
    assert all(c.id in chosen.every_id for c in chosen.cells)


def test_llm_shapes_are_the_real_projections_at_decode_and_prefill_rows():
    llama = {s.name for s in SHAPES.values() if s.origin.startswith("Llama")}
    assert {"1x2048x2048", "1x2048x512", "1x2048x8192", "1x8192x2048", "128x8192x2048"} <= llama
    qwen = {s.name for s in SHAPES.values() if s.origin.startswith("Qwen")}
    assert {"1x896x896", "1x896x128", "32x896x4864", "128x4864x896"} <= qwen
    assert {c.shape.m for c in kernels({}, "decode", BUILTIN_TARGETS).cells} == {1}
    both = kernels({}, "ci,decode", BUILTIN_TARGETS).cells
    alone = [len(kernels({}, name, BUILTIN_TARGETS).cells) for name in ("ci", "decode")]
    assert len(both) == sum(alone)


def test_no_selection_makes_no_cells_but_knows_every_cells_id():
    chosen = kernels({}, None, BUILTIN_TARGETS)
    assert chosen.cells == () and "mm-f32-64x64x64-rv64gcv-zvl256b-inner" in chosen.every_id


def test_a_user_shape_row_and_paths_come_from_the_table():
    known = dict(BUILTIN_TARGETS)
    known["x280ish"] = target_from_table("x280ish", {"extends": "rv64gcv-zvl512b",
                                                    "features": ["+m", "+a", "+f", "+d", "+c", "+v", "+zvl512b",
                                                                 "+zvfh", "+zfh"]}, known)
    chosen = kernels({"shapes": {"gemv": [1, 4096, 4096]}, "rows": {"f16-512": {"dtype": "f16", "target": "x280ish"}},
                      "paths": ["default", "mmt4d"]}, "gemv,f16-512", known)
    assert [(c.row, c.shape.name, c.path, c.target.name) for c in chosen.cells] == [
        ("f16-512", "1x4096x4096", "default", "x280ish")]  # x280ish has no mmt4d twin: only its own path


@pytest.mark.parametrize(("table", "selection", "message"), [
    ({"shapes": {"bad": [64, 0, 64]}}, None,
     r"^\[tool.pytest_rvv.kernels\] shapes.bad: shape \[64, 0, 64\] has a zero or negative dim; every one of M, K, "
     r"N must be >= 1$"),
    ({"shapes": {"bad": [64, -1, 64]}}, None, r"shapes.bad: shape \[64, -1, 64\] has a zero or negative dim"),
    ({"shapes": {"bad": [64, 64]}}, None, r"shapes.bad: a shape is \[M, K, N\], three positive integers"),
    ({"paths": ["default", "ukernel"]}, None,
     r"^\[tool.pytest_rvv.kernels\] paths: unknown matmul path 'ukernel'; known: default, data-tiled, mmt4d, "
     r"inner-tiled$"),
    ({"rows": {"q4": {"dtype": "q4", "target": "rv64gcv-zvl256b"}}}, None,
     r"^\[tool.pytest_rvv.kernels\] rows.q4: unknown dtype 'q4'; known: f32, f16, bf16, i8$"),
    ({"rows": {"f16-plain": {"dtype": "f16", "target": "rv64gcv-zvl256b"}}}, None,
     r"^\[tool.pytest_rvv.kernels\] rows.f16-plain: target rv64gcv-zvl256b has no zvfh or zvfhmin, which f16 "
     r"matmuls need; add \+zvfh to its features or choose a target that has it$"),
    ({"rows": {"bf": {"dtype": "bf16", "target": "rv64gcv-zvl256b-zvfh"}}}, None, r"has no zvfbfwma or zvfbfmin"),
    ({"speed": 1}, None, r"^\[tool.pytest_rvv.kernels\]: unknown key\(s\) speed; allowed: paths, rows, shapes$"),
    ({}, "huge", r"^--rvv-kernels: unknown huge; give one of ci, decode, llm, all, or shape names"),
])
def test_bad_kernel_input_is_one_line_naming_the_table_and_the_fix(table, selection, message):
    with pytest.raises(ConfigError, match=message):
        kernels(table, selection, BUILTIN_TARGETS)


@pytest.fixture
def kernel_project(project):
    project.write(models=("gemm",), suite=False)
    shutil.copytree(SUITES / "kernels", project.path / "kernels", ignore=shutil.ignore_patterns("__pycache__",
                                                                                                  "__snapshots__"))
    return project


def test_without_a_selection_the_kernel_suite_is_deselected_and_says_how_to_run_it(kernel_project):
    result = kernel_project.run("kernels")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["rvv: kernel suite (suites/kernels/): not selected; --rvv-kernels=ci (iree issue "
                                 "24932's shapes, every row and path), decode, llm or all runs it", "*4 deselected*"])


def test_a_kernel_cell_runs_every_check_and_its_paths_land_side_by_side(kernel_project, tmp_path):
    """64x64x64 f32 and i8 on every path through iree-compile, QEMU and onnxruntime: agreement, the executed gate,
    performance; the dashboard puts the paths side by side and holds inner-tiled / mmt4d against iree issue 24932."""
    report = tmp_path / "report"
    result = kernel_project.run("kernels", "--rvv-kernels=64x64x64,f32,i8", "-v", f"--rvv-report={report}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["rvv: kernel suite: 8 cells (f32, i8)",
                                 "*test_kernel_matches_reference*mm-i8-64x64x64-rv64gcv-zvl256b-inner*PASSED*",
                                 "*rvv kernel dashboard*",
                                 "| Row | Shape | default est. Mcycles per call (vs default)*",
                                 "| f32 | 64x64x64 | * | * | * | * | *x | *x |*",
                                 "| f32 | 64x64x64 | inner-tiled / mmt4d | 1.02-1.07 | *x | * % | * / * | "
                                 "iree issue 24932*"])
    document = json.loads((report / "results.json").read_text())
    entries = {(e["row"], e["shape"]): e for e in document["kernels"]["dashboard"]}
    i8 = entries[("i8", "64x64x64")]["paths"]
    assert set(i8) == {"default", "data-tiled", "mmt4d", "inner-tiled"}
    assert all(p["executed"] > 64 ** 3 / 64 and p["est_cycles"] > 0 and p["vsetvl"] > 0 for p in i8.values())
    assert i8["default"]["est_vs_default"] == 1.0
    calibrated = document["kernels"]["calibration"][0]
    assert calibrated["row"] == "f32" and all(count >= 1 for count in calibrated["workgroups"])


def test_a_comparison_of_two_real_releases_gives_the_dashboard_before_and_after_ranked_by_added_work(kernel_project,
                                                                                                       tmp_path):
    """iree-base-compiler 3.12.0 (reference) vs the installed 3.13.0 on 64x64x64 f32, every path: each cell's call
    before and after, in the terminal, comparison.md, the A/B page and results.json, most added work first."""
    report = tmp_path / "report"
    result = kernel_project.run("kernels", "--rvv-kernels=64x64x64,f32", "-k", "adds_no_work",
                                "--rvv-compare=iree-base-compiler==3.12.0", "--rvv-compare-report-only",
                                f"--rvv-report={report}")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*rvv kernel dashboard: one call, reference -> under test (most added work first)*",
        "| Verdict | Row | Shape | Path | Executed per call (k), reference -> under test | Est. spacemit-x60 "
        "Mcycles per call | Path / default est., reference -> under test |",
        "|---|---|---|---|---|---|---|", "| * | f32 | 64x64x64 | * | * -> * | * -> * | *x -> *x |"])
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    changes = document["kernels"]["comparison"]
    assert sorted(c["path"] for c in changes) == sorted(["default", "data-tiled", "mmt4d", "inner-tiled"])
    added = [c["added_percent"] for c in changes]
    assert added == sorted(added, reverse=True)
    for c in changes:  # both sides really ran and were estimated; the default path is its own unit
        assert all(v > 0 for v in c["executed"] + c["est_cycles"])
        assert c["added_percent"] == round(100 * (c["executed"][1] - c["executed"][0]) / c["executed"][0], 2)
    assert next(c for c in changes if c["path"] == "default")["vs_default"] == [1.0, 1.0]
    assert "Kernels: one call, reference -&gt; under test" in (report / "index.html").read_text()
    assert "## Kernels: one call, reference -> under test" in (report / "comparison.md").read_text()


def test_the_dashboard_ranks_nothing_it_did_not_measure():
    chosen = kernels({}, "64x64x64,f32", BUILTIN_TARGETS)
    assert dashboard(chosen.cells, {}) == [] and calibration([]) == []


def test_packing_a_constant_weight_is_one_time_work_and_a_call_without_initializers_has_none(tmp_path):
    """The Llama-3.2-1B up projection at decode is too big for a unit test; Qwen2.5-0.5B's q projection (896x896)
    shows the same: on the mmt4d path the module load encodes the weight once (dispatch `_encoding_*`) and the call
    does not; the default path has no load-time dispatch. Measured with real iree-compile and QEMU."""
    from pytest_rvv.config.settings import Settings
    from pytest_rvv.measure.executed import measure_executed, measure_one_time
    from pytest_rvv.session import RvvSession

    session = RvvSession(Settings.resolve(lambda option: None, {}, tmp_path))
    model = next(c.model for c in kernels({}, "1x896x896,f32", BUILTIN_TARGETS).cells)
    loads = {}
    for name in ("rv64gcv-zvl256b", "rv64gcv-zvl256b-mmt4d"):
        target = BUILTIN_TARGETS[name]
        cell = session.cell(model, target, session.runner(target))
        loads[name] = measure_one_time(cell, tmp_path / name / "load").per_dispatch
        run = measure_executed(cell, tmp_path / name / "run").per_dispatch
        assert all(run.get(key) == count for key, count in loads[name].items()), (loads[name], run)
    assert loads["rv64gcv-zvl256b"] == {}
    assert list(loads["rv64gcv-zvl256b-mmt4d"]) == ["_encoding_0_encode_896x896xf32_to_896x896xf32"]


def test_the_path_table_compares_work_per_call_and_shows_the_one_time_work_beside_it():
    """squeezenet1.1's figures as recorded (IREE 3.13.0): the mmt4d path's packing of constant weights at load is
    not part of the ratio; per call it executes 0.30x the default path's instructions (0.53x counting the load)."""
    from pytest_rvv.measure.performance import PerfResult
    from pytest_rvv.report.performance import microkernel_table

    rows = {("squeezenet1.1", "rv64gcv-zvl256b"): PerfResult("squeezenet1.1", "rv64gcv-zvl256b", metrics={
                "executed_dispatch_instructions": 37557113, "executed_per_call_instructions": 37557113,
                "executed_one_time_instructions": 0}),
            ("squeezenet1.1", "rv64gcv-zvl256b-mmt4d"): PerfResult("squeezenet1.1", "rv64gcv-zvl256b-mmt4d", metrics={
                "executed_dispatch_instructions": 20088254, "executed_per_call_instructions": 11381180,
                "executed_one_time_instructions": 8707074})}
    header, _, line = microkernel_table(rows, [("rv64gcv-zvl256b", "rv64gcv-zvl256b-mmt4d")])
    assert "executed per call (M) | ratio | executed once, at load (M) | ratio" in header
    assert "| 37.56 -> 11.38 | 0.30x | 0.00 -> 8.71 | - |" in line
