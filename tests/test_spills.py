"""Vector register spills per dispatch: found in the shipped object, held to LLVM's own statistics, executed from the
counted run, and judged by the gate."""

import re
import subprocess

import pytest

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.judge.gate import check_gate
from pytest_rvv.judge.vectorization import VectorizationRecord
from pytest_rvv.measure.disassembly import Instruction
from pytest_rvv.measure.dispatch_table import DispatchCounts
from pytest_rvv.measure.executed import measure_executed
from pytest_rvv.measure.spills import spill_sites
from pytest_rvv.measure.static import analyze
from pytest_rvv.model.kernels import KernelShape, kernel_model
from pytest_rvv.report.vectorization import cell_lines
from pytest_rvv.session import RvvSession

from .conftest import USER_CACHE

ZVL256 = BUILTIN_TARGETS["rv64gcv-zvl256b"]
# LLVM's riscv-instr-info statistic: registers within vector register groups spilled (an m4 spill counts 4).
_VREG_SPILLED = re.compile(r"^\s*(\d+) riscv-instr-info\s+- Number of registers within vector register groups spilled",
                           re.M)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)},
                                       tmp_path_factory.mktemp("spills")))


def llvm_vregs_spilled(session: RvvSession, model, target) -> int:
    """What LLVM itself counts while iree-compile compiles ``model`` for ``target`` (``--stats``)."""
    imported = session.imported(model)
    proc = subprocess.run([session.toolchain.iree_compile, imported.path.name, *target.compiler_flags(), "--stats",
                           "-o", "/dev/null"], cwd=imported.path.parent, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return sum(int(n) for n in _VREG_SPILLED.findall(proc.stderr))


@pytest.mark.parametrize("dtype", ["i8", "f32"])
def test_the_registers_spilled_per_dispatch_sum_to_llvms_own_statistic(session, dtype):
    model = kernel_model(dtype, KernelShape(64, 64, 64))
    analysis = analyze(session.artifact(model, ZVL256))
    found = sum(c.spilled_registers for c in analysis.dispatches.values())
    assert found == llvm_vregs_spilled(session, model, ZVL256)
    assert analysis.snapshot()["totals"]["vector_spills"]["registers"] == found
    if dtype == "i8":  # IREE 3.13.0 at zvl256b: 14 m4 spills in its matmul (56 registers), 14 reloads
        assert found > 0
        spilling = [k for k, c in analysis.dispatches.items() if c.spilled_registers]
        assert spilling and all("matmul" in k for k in spilling)
        entry = analysis.snapshot()["dispatches"][spilling[0]]
        assert entry["spills"]["stores"] > 0 and entry["spills"]["reloads"] > 0


def test_a_scalar_build_spills_no_vector_register(session):
    analysis = analyze(session.artifact(kernel_model("i8", KernelShape(64, 64, 64)), BUILTIN_TARGETS["rv64gc"]))
    assert analysis.snapshot()["totals"]["vector_spills"] == {"stores": 0, "reloads": 0, "registers": 0}


def test_the_counted_run_executes_the_spills_the_object_holds(session, counted_session, tmp_path):
    model = kernel_model("i8", KernelShape(64, 64, 64))
    runner = counted_session.runner(ZVL256)
    try:
        measured = measure_executed(counted_session.cell(model, ZVL256, runner), tmp_path)
    except ToolMissing as exc:
        pytest.skip(str(exc))
    static = analyze(session.artifact(model, ZVL256))
    snapshot = measured.snapshot(model.name, ZVL256.name)
    for key, counts in static.dispatches.items():
        executed = snapshot["dispatches"].get(key, {}).get("spills")
        if counts.spilled_registers:  # each static spill site runs at least once per call
            assert executed and executed["instructions"] >= counts.spill_stores + counts.spill_reloads
        else:
            assert executed is None
    assert snapshot["totals"]["vector_spills"]["registers"] == sum(
        d.get("spills", {}).get("registers", 0) for d in snapshot["dispatches"].values())


def _insn(address: int, mnemonic: str, operands: str, function: str = "f") -> Instruction:
    return Instruction(address, mnemonic, operands, function)


def test_only_whole_register_accesses_off_the_frame_are_spills():
    code = [
        _insn(0, "csrr", "s1,vlenb"), _insn(4, "sll", "s1,s1,0x2"), _insn(8, "sub", "s1,s0,s1"),
        _insn(12, "vs4r.v", "v8,(s1)"),             # frame-derived: a spill of 4 registers
        _insn(16, "ld", "s1,8(a1)"),                # s1 now holds a data pointer
        _insn(20, "vs4r.v", "v8,(s1)"),             # a whole-register store of data: not a spill
        _insn(24, "add", "a0,sp,a0"), _insn(28, "vl2re32.v", "v4,(a0)"),  # a reload of 2 registers
        _insn(32, "vl1r.v", "v4,(a2)"),             # data
        _insn(36, "vs1r.v", "v1,(s1)", function="g"),  # another function: s1 is not inherited
    ]
    sites = spill_sites(code)
    assert sorted(sites) == [12, 28]
    assert (sites[12].reload, sites[12].registers) == (False, 4)
    assert (sites[28].reload, sites[28].registers) == (True, 2)


def _snapshot(spills: int | None, known: bool = True) -> dict:
    entry = {"instructions": 100, "vector": 50, "vectorized": True}
    if spills:
        entry["spills"] = {"stores": spills // 4, "reloads": spills // 4, "registers": spills}
    totals = {"instructions": 100, "vector": 50, "vector_share_percent": 50.0}
    if known:
        totals["vector_spills"] = {"stores": 0, "reloads": 0, "registers": spills or 0}
    return {"totals": totals, "dispatches": {"dispatch_0_matmul_64x64x64_i8xi8xi32": entry}}


def test_a_dispatch_that_starts_spilling_fails_by_name():
    result = check_gate(_snapshot(0), _snapshot(8), ZVL256, 5.0)
    assert result.regressions == ["dispatch_0_matmul_64x64x64_i8xi8xi32: now spills vector registers (2 stores and "
                                  "2 reloads, 8 registers stored), none before"]


def test_a_change_in_spills_is_reported_and_fewer_is_no_failure():
    more = check_gate(_snapshot(8), _snapshot(16), ZVL256, 5.0)
    assert more.ok and "dispatch_0_matmul_64x64x64_i8xi8xi32: vector spills 8 -> 16 registers stored" in more.changes
    assert check_gate(_snapshot(16), _snapshot(0), ZVL256, 5.0).ok


def test_a_snapshot_recorded_before_spills_were_counted_is_not_judged_on_them_and_the_report_says_so():
    result = check_gate(_snapshot(0, known=False), _snapshot(8), ZVL256, 5.0)
    assert result.ok
    assert any("recorded before vector spills were counted" in line for line in result.changes)
    assert not any("spills" in line for line in check_gate(_snapshot(8), _snapshot(8), ZVL256, 5.0).changes)


def test_the_stats_regex_reads_llvms_line():
    line = "   56 riscv-instr-info             - Number of registers within vector register groups spilled\n"
    assert _VREG_SPILLED.findall(line) == ["56"]


def test_the_vectorization_section_names_the_dispatches_that_spill():
    record = VectorizationRecord("m", "rv64gcv-zvl256b", "static", 11, 5,
                                 {"dispatch_0_matmul": DispatchCounts(10, 5, spills=56),
                                  "dispatch_1_add": DispatchCounts(1, 0, spills=0)})
    assert VectorizationRecord.from_json(record.to_json()) == record  # as it crosses from an xdist worker
    lines = cell_lines({("m", "rv64gcv-zvl256b", "static"): record})
    assert lines[1] == "    spills vector registers in 1 of 2 dispatches (56 registers stored): dispatch_0_matmul (56)"
