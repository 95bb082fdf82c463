"""Table 1 leads with what holds on silicon: executed work per call and the estimates (in-core, and the wall time per
thread count where measured); emulated time comes after, labelled QEMU; an estimate resting on an instruction LLVM's
model of the core is known to get wrong is marked in its row. Real iree-compile, QEMU and llvm-mca runs."""

from __future__ import annotations

import json
import re
import shutil

import jsonschema
import pytest

from pytest_rvv.measure.performance import PerfResult
from pytest_rvv.report.results import schema

from .conftest import REASSOCIATED, SUITE_COPY_IGNORE, SUITES

CELLS = ("performance/test_performance.py", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b",
         "--update-baselines", "--rvv-machine=box", "-v")  # -v: Table 1
MARK = "\u2020"


@pytest.fixture
def performance_project(project):
    project.write(suite=False)
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=SUITE_COPY_IGNORE)
    return project


def table_one(text: str) -> tuple[list[str], dict[tuple[str, str], dict[str, str]]]:
    """Table 1's header and its rows by (model, target), column -> cell, from a -v run's output or performance.md."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Model | Target | work per call"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[(cells[0], cells[1])] = dict(zip(header, cells, strict=True))
    return header, rows


def test_table_one_leads_with_work_and_the_estimate_and_labels_emulated_time_after_them(performance_project,
                                                                                         tmp_path):
    report = tmp_path / "report"
    result = performance_project.run(*CELLS, f"--rvv-report={report}")
    result.assert_outcomes(passed=2)
    header, rows = table_one(result.stdout.str())
    assert header[:6] == ["Model", "Target", "work per call (M instr)", "work vs rv64gc", "est. X60 ms per call",
                          "est. speedup vs rv64gc on X60"]
    # the emulated columns come after every estimate and say they are QEMU's; no unlabelled speedup is left
    emulated = header.index("QEMU speedup vs rv64gc")
    assert header.index("QEMU time (min s)") == emulated - 1
    assert all(i < emulated for i, h in enumerate(header) if h.startswith("est."))
    assert "speedup vs rv64gc" not in header and not any("wall" in h for h in header)  # no wall time measured
    measured = {r["target"]: r["metrics"] for r in json.loads((report / "performance.json").read_text())}
    scalar, vector = (measured[t]["executed_per_call_instructions"] for t in ("rv64gc", "rv64gcv-zvl256b"))
    row = rows[("mlp", "rv64gcv-zvl256b")]
    # shown to two decimals, or two significant digits below 0.1
    assert float(row["work per call (M instr)"]) == pytest.approx(vector / 1e6, rel=0.05)
    assert float(row["work vs rv64gc"].removesuffix("x")) == pytest.approx(vector / scalar, rel=0.05)
    assert row["QEMU speedup vs rv64gc"].endswith("x") and rows[("mlp", "rv64gc")]["work vs rv64gc"] == "-"
    result.stdout.fnmatch_lines(["QEMU time and QEMU speedup are emulated: QEMU's time is not silicon time*"])
    # the same columns in performance.md and on the page; the first plot is what holds on silicon, emulation last
    markdown = (report / "performance.md").read_text()
    assert table_one(markdown)[0] == header
    plots = re.findall(r"!\[[^]]*\]\((\w+\.png)\)", markdown)
    assert plots[0] == "speedup.png" and plots[-1] == "speedup_emulated.png" and plots.index("time.png") > 2
    page = (report / "index.html").read_text()
    shown = re.findall(r"<h3>([^<]*)</h3><img", page)
    assert shown[0].startswith("Executed work and estimated speedup vs rv64gc")
    assert shown[-1] == "Emulated speedup vs rv64gc (QEMU time: not silicon time, it inverts the truth for vector code)"
    table = page[page.index('id="table-one"'):page.index("</table>", page.index('id="table-one"'))]
    assert re.findall(r"<th>([^<]*)</th>", table) == header
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    # no wall time asked, and no mark: mlp's RVV code moves scalars into vectors with vmv.s.x at e32,m1 (4 cycles in
    # LLVM's model, 1 on the board), which the X60 estimate reads as the splat rvv-bench times alike (config/cores.py)
    assert not any(row["est. X60 ms per call"].endswith(MARK) for row in rows.values())
    assert not any("caveats" in c for c in document.get("cell_estimates", []))


def test_a_wall_time_column_appears_only_when_measured(performance_project, tmp_path):
    """--rvv-wall-time=x60:1,4: Table 1 gains one column of est. X60 wall ms at 1 / 4 threads and what bounds them,
    after the in-core estimate and before the vector counts; results.json carries them per cell."""
    report = tmp_path / "report"
    result = performance_project.run(*CELLS, "--rvv-wall-time=x60:1,4", f"--rvv-report={report}")
    result.assert_outcomes(passed=2)
    header, rows = table_one(result.stdout.str())
    column = "est. X60 wall ms, 1 / 4 threads (bound by)"
    in_core = [i for i, h in enumerate(header) if h.startswith("est.") and "wall" not in h]
    assert header.index(column) == in_core[-1] + 1
    assert header.index(column) < header.index("static vector instr")
    wall = {r["target"]: r["wall"]["spacemit-x60"] for r in json.loads((report / "performance.json").read_text())}
    for target in ("rv64gc", "rv64gcv-zvl256b"):
        one, four = (wall[target][t] for t in ("1", "4"))
        bounds = " / ".join(dict.fromkeys((one["bound_by"], four["bound_by"])))
        mark = MARK if rows[("mlp", target)]["est. X60 ms per call"].endswith(MARK) else ""  # the same caveat
        assert rows[("mlp", target)][column] == (f"{one['seconds'] * 1e3:.3f} / {four['seconds'] * 1e3:.3f}{mark} "
                                                 f"({bounds})")
    result.stdout.fnmatch_lines(["est. wall ms = one call's in-core estimate plus stalls*"])
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    assert {(c["model"], c["target"]): c["wall"] for c in document["cell_estimates"]} == {
        ("mlp", t): {"spacemit-x60": w} for t, w in wall.items()}


def test_an_estimate_resting_on_an_instruction_llvms_model_gets_wrong_is_marked_in_its_row(project, tmp_path):
    """A float row sum that IREE may reassociate (a user's target: ``REASSOCIATED``) sums each row of 4 with
    vfredusum.vs at e32,mf2, which LLVM 22's X60 model gives 8 cycles (rvv-bench: 5.00, and no stand-in:
    measure/calibration.py): its X60 estimate carries the mark and a legend names the instruction and the measured
    error; the scalar target runs no vector code and is not marked."""
    project.write(models=("rowsum4",), extra=REASSOCIATED, suite=False)
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=SUITE_COPY_IGNORE)
    report = tmp_path / "report"
    result = project.run("performance/test_performance.py", "--rvv-models=rowsum4",
                         "--rvv-targets=rv64gc,rv64gcv-zvl256b-reassoc", "--update-baselines", "--rvv-machine=box",
                         "-v", f"--rvv-report={report}")
    result.assert_outcomes(passed=2)
    _, rows = table_one(result.stdout.str())
    marked = {target for (_, target), row in rows.items() if row["est. X60 ms per call"].endswith(MARK)}
    assert marked == {"rv64gcv-zvl256b-reassoc"}, rows
    result.stdout.fnmatch_lines([f"{MARK} est. X60 rests on vfredusum.vs at mf2, which LLVM's model gets wrong, in 1 "
                                 "cell (rowsum4 on rv64gcv-zvl256b-reassoc, * % of its est.): LLVM 22's X60 model "
                                 "gives vfredusum.vs 8 cycles at mf2 (rvv-bench: 5.00*"])
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    (noted,) = [c for c in document["cell_estimates"] if "caveats" in c]
    (caveat,) = noted["caveats"]["spacemit-x60"]
    assert noted["target"] == "rv64gcv-zvl256b-reassoc" and caveat["instruction"] == "vfredusum.vs at mf2"
    assert caveat["sews"] == ["32"] and caveat["executed"] >= 16 and caveat["share_percent"] >= 5  # a row's sum each


def test_an_int64_row_sum_seeds_its_sums_through_the_splat_and_is_not_marked(project):
    """An int64 row sum seeds each row's vredsum.vs with vmv.s.x at e64,m2, which LLVM 22's X60 model gives 4 cycles
    (rvv-bench: 1.00): the X60 estimate reads it as the splat at e32,mf2 (config/cores.py), so no row is marked."""
    project.write(models=("sum64",), suite=False)
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=SUITE_COPY_IGNORE)
    result = project.run("performance/test_performance.py", "--rvv-models=sum64", "--rvv-targets=rv64gcv-zvl256b",
                         "--update-baselines", "--rvv-machine=box", "-v")
    result.assert_outcomes(passed=1)
    _, rows = table_one(result.stdout.str())
    assert not rows[("sum64", "rv64gcv-zvl256b")]["est. X60 ms per call"].endswith(MARK), rows
    assert "rests on" not in result.stdout.str()


def test_an_instruction_read_through_a_stand_in_marks_no_row(kernel_project, tmp_path):
    """i8 64x64x64's mmt4d path packs each element with vmv.s.x at e8,m1, which LLVM 22's X60 model gives 4 cycles
    (rvv-bench: 1.00) and the X60 estimate reads as the splat rvv-bench times alike (config/cores.py); the default
    and data-tiled paths multiply-accumulate with vmacc.vv at e32,m4, read as vfmacc.vv. No row, no path is marked."""
    report = tmp_path / "report"
    result = kernel_project.run("kernels", "--rvv-kernels=64x64x64,i8", "-v", f"--rvv-report={report}")
    assert result.ret == 0, result.stdout.str()
    _, rows = table_one(result.stdout.str())
    assert {target for (_, target), row in rows.items() if row["est. X60 ms per call"].endswith(MARK)} == set()
    assert "rests on" not in result.stdout.str()
    result.stdout.fnmatch_lines(["| Model | default -> microkernel | executed per call (M) | ratio | est. X60 Mcycles "
                                 "per call | ratio | est. X60 wall ms, 1 thread | ratio | est. X60 wall ms, 8 threads "
                                 "| ratio | executed once, at load (M) |*"])
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    assert not any("caveats" in c for c in document["cell_estimates"])


def test_a_result_without_caveats_writes_none():
    """The caveats are written only when there are some (no baseline or snapshot changes), and read back."""
    plain = PerfResult("m", "t")
    assert "caveats" not in plain.to_json()
    marked = PerfResult("m", "t", caveats={"spacemit-x60": [{"instruction": "vmacc.vv at m8", "executed": 1}]})
    assert PerfResult.from_json(marked.to_json()).caveats == marked.caveats


def test_the_marks_come_from_the_estimators_known_errors_at_each_lmul():
    """measure/calibration.py's MODEL_ERRORS is the one list: each entry is looked for at its LMUL, whatever the SEW."""
    from pytest_rvv.measure.calibration import MODEL_ERRORS
    from pytest_rvv.measure.caveats import model_errors

    found = {(e.core, e.mnemonic, e.lmul): e.reason for e in model_errors()}
    assert len(found) == len(MODEL_ERRORS)  # every known error is looked for
    assert found[("spacemit-x60", "vfredusum.vs", "mf2")] == MODEL_ERRORS[("spacemit-x60", "vfredusum.vs-e32mf2")]
    assert ("spacemit-x60", "vmv.s.x", "m1") not in found  # read through its stand-in at every SEW
    assert ("spacemit-x60", "vmacc.vv", "m4") not in found  # read through its stand-in (config/cores.py)
    assert found[("spacemit-x60", "vsseg2e32.v", "m1")] == MODEL_ERRORS[("spacemit-x60", "vsseg2e32.v-e32m1")]
