"""Silicon estimates: executed blocks x llvm-mca's cycles per block, through real QEMU and llvm-mca."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ConfigError, ToolMissing
from pytest_rvv.base.store import Store
from pytest_rvv.config.cores import CORES
from pytest_rvv.config.targets import BUILTIN_TARGETS, target_from_table
from pytest_rvv.measure import mca_driver as mca_driver_module
from pytest_rvv.measure import silicon
from pytest_rvv.measure.counts import ExecutedCounts
from pytest_rvv.measure.mca_driver import mca_driver
from pytest_rvv.measure.silicon import MCA, estimate

from .conftest import USER_TOOLS
from .test_executed_counts import assemble, count

X60 = CORES["spacemit-x60"]
N = 50  # loop trips per kernel
# The same loop body after a vsetvli at m1 and at m8: only the vtype at the block's entry differs.
KERNELS = r"""
    .option norelax
    .globl _start
    .text
""" + "".join(f"""
    .type kernel_{lmul}, @function
kernel_{lmul}:
    vsetvli t0, zero, e32, {lmul}, ta, ma
    vmv.v.i v16, 0
1:
    vle32.v v8, (a1)
    vfmacc.vv v16, v8, v8
    addi a0, a0, -1
    bnez a0, 1b
    ret
    .size kernel_{lmul}, .-kernel_{lmul}
""" for lmul in ("m1", "m8")) + f"""
_start:
    li a0, {N}
    la a1, src
    call kernel_m1
    li a0, {N}
    la a1, src
    call kernel_m8
    li a7, 93
    li a0, 0
    ecall
    .data
src: .zero 4096
"""
LOOP = ["vle32.v v8, (a1)", "vfmacc.vv v16, v8, v8", "addi a0, a0, -1", "bnez a0, 0"]
# The translation blocks QEMU makes of each kernel (a block ends at a branch and after a vsetvli), with how
# often each runs: the vsetvli; the first trip, entered from vmv.v.i; the other N-1 trips; the return.
BLOCKS = [(["vsetvli t0, zero, e32, {lmul}, ta, ma"], None, 1), (["vmv.v.i v16, 0", *LOOP], "{lmul}", 1),
          (LOOP, "{lmul}", N - 1), (["ret"], "{lmul}", 1)]


@pytest.fixture(scope="module")
def mca() -> Path:
    path = shutil.which(MCA)
    if path is None:
        pytest.skip(f"{MCA} not installed: apt-get install llvm-22 (bash scripts/setup.sh system)")
    return Path(path)


def mca_cycles(mca: Path, lines: list[str], lmul: str | None) -> float:
    """llvm-mca's steady-state cycles per iteration of one block: what 10 more iterations cost, / 10."""
    instruments = [f"# LLVM-MCA-RISCV-LMUL {lmul.upper()}", "# LLVM-MCA-RISCV-SEW E32"] if lmul else []
    totals = []
    for iterations in (10, 20):
        out = subprocess.run([str(mca), "-mtriple=riscv64", f"-mcpu={X60.name}", f"-iterations={iterations}"],
                             input="\n".join([*instruments, *lines]) + "\n", capture_output=True, text=True,
                             check=True).stdout
        totals.append(int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)))
    return (totals[1] - totals[0]) / 10


@pytest.fixture(scope="module")
def kernels(tmp_path_factory, plugin, mca) -> tuple[Path, ExecutedCounts]:
    folder = tmp_path_factory.mktemp("kernels")
    binary = assemble(folder, "kernels", KERNELS)
    return binary, count(binary, BUILTIN_TARGETS["rv64gcv-zvl256b"], plugin, folder / "c.txt", elements=False)


def test_the_estimate_is_trip_counts_times_llvm_mcas_cycles_per_block(kernels, mca, tmp_path):
    binary, counts = kernels
    found = estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path))[X60.name]
    for lmul in ("m1", "m8"):
        expected = sum(execs * mca_cycles(mca, [ln.format(lmul=lmul) for ln in lines],
                                          vtype.format(lmul=lmul) if vtype else None)
                       for lines, vtype, execs in BLOCKS)
        assert found.dispatches[f"kernel_{lmul}"] == round(expected)
    assert found.blocks == 8 and found.dropped == 0 and found.llvm_mca.startswith("LLVM version 22.")


def test_the_vtype_at_block_entry_sets_the_cost_of_the_same_block(kernels, mca, tmp_path):
    at_m1, at_m8 = (mca_cycles(mca, LOOP, lmul) for lmul in ("m1", "m8"))
    assert at_m8 > at_m1
    binary, counts = kernels
    found = estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path))[X60.name]
    assert found.dispatches["kernel_m8"] - found.dispatches["kernel_m1"] == pytest.approx(
        (N - 1) * (at_m8 - at_m1) + (mca_cycles(mca, ["vmv.v.i v16, 0", *LOOP], "m8")
                                     - mca_cycles(mca, ["vmv.v.i v16, 0", *LOOP], "m1")), abs=1)


def test_estimates_are_deterministic_computed_afresh_or_from_the_cache(kernels, tmp_path):
    binary, counts = kernels
    fresh = [estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path / name))[X60.name] for name in "ab"]
    cached = estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path / "a"))[X60.name]
    assert fresh[0].dispatches == fresh[1].dispatches == cached.dispatches
    assert not fresh[0].cached and cached.cached


@pytest.mark.parametrize("chunk", [1, 3])
def test_blocks_estimated_in_chunks_cost_exactly_what_one_llvm_mca_input_says(kernels, tmp_path, monkeypatch,
                                                                               chunk):
    binary, counts = kernels
    whole = estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path / "whole"))[X60.name]
    monkeypatch.setattr(silicon, "CHUNK", chunk)  # regions without a vtype, then m1, then m8, split anywhere
    chunked = estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path / "chunked"))[X60.name]
    assert whole.blocks == chunked.blocks == 8 and not chunked.cached
    assert chunked.dispatches == whole.dispatches


# A block entered with no known vector type whose loads come before any vsetvli, and a block that sorts before it
# (its first line) and leaves an m1 or m8 type behind: llvm-mca carries a vsetvli's type into the next region.
UNTYPED = silicon.BlockCode(("vle32.v v8, (a1)", "vle32.v v12, (a2)", "vle32.v v16, (a3)", "addi a0, a0, -1"))
SETS = {lmul: silicon.BlockCode(("addi a4, a4, 1", f"vsetvli t0, zero, e32, {lmul}, ta, ma", "vle32.v v0, (a4)"))
        for lmul in ("m1", "m8")}


@pytest.mark.parametrize("chunk", [1, 2, 500])
def test_a_block_without_a_vector_type_at_entry_costs_the_same_beside_any_neighbour(mca, tmp_path, monkeypatch,
                                                                                     chunk):
    monkeypatch.setattr(silicon, "CHUNK", chunk)
    alone, _, _ = silicon.block_cycles([UNTYPED], X60, Store(tmp_path / "alone"))
    assert alone[UNTYPED] == mca_cycles(mca, list(UNTYPED.lines), None)  # llvm-mca's own default, as if alone
    for lmul, before in SETS.items():
        found, _, _ = silicon.block_cycles([before, UNTYPED], X60, Store(tmp_path / lmul))
        assert found[UNTYPED] == alone[UNTYPED], f"the block read the {lmul} its neighbour left"
        assert found[before] == silicon.block_cycles([before], X60, Store(tmp_path / f"{lmul}-alone"))[0][before]


def test_a_cores_stand_in_replaces_only_its_instruction_at_its_vtype_and_moves_no_other_block(mca, tmp_path):
    """The X60 reads vmacc.vv at e32,m4 and m8 as vfmacc.vv (rvv-bench's timing, config/cores.py); at m2, under a
    vtype a vsetvli sets, on another core, and in every block without it, nothing changes."""
    assert X60.stand_ins and not CORES["sifive-p670"].stand_ins
    chain = silicon.BlockCode(("vmacc.vv v8,v16,v24", "vmacc.vv v12,v16,v24", "addi a0,a0,-1"), "32", "m4")
    switched = silicon.BlockCode(("vmacc.vv v8,v16,v24", "vsetvli t0,zero,e32,m4,ta,ma", "vmacc.vv v8,v16,v24"),
                                 "32", "m2")
    assert silicon.stood_in(chain, X60).lines == ("vfmacc.vv v8,v16,v24", "vfmacc.vv v12,v16,v24", "addi a0,a0,-1")
    assert silicon.stood_in(switched, X60).lines == ("vmacc.vv v8,v16,v24", "vsetvli t0,zero,e32,m4,ta,ma",
                                                     "vfmacc.vv v8,v16,v24")
    assert silicon.stood_in(chain, CORES["sifive-p670"]) == chain
    plain = dataclasses.replace(X60, stand_ins=())
    others = [silicon.BlockCode(tuple(line.format(lmul="m4") for line in lines), "32" if vtype else "",
                                "m4" if vtype else "") for lines, vtype, _ in BLOCKS]  # the kernels' blocks at m4
    found, _, _ = silicon.block_cycles([chain, *others], X60, Store(tmp_path / "x60"))
    unchanged, _, _ = silicon.block_cycles([chain, *others], plain, Store(tmp_path / "plain"))
    assert {c: found[c] for c in others} == {c: unchanged[c] for c in others}
    assert found[chain] == 8 < unchanged[chain]  # two chains at m4: 4.00 per MAC, as rvv-bench measured


def test_a_whole_register_copy_is_read_at_lmul_1_and_the_block_keeps_its_own_lmul_after_it(mca, tmp_path):
    """vmv1r.v copies one register whatever the vtype (rvv-bench: 2.00 up to m4, LLVM 22: 4): the X60 reads it as
    vmv.v.v under an M1 instrument, then the block's LMUL again, so the m4 work after it costs what it cost."""
    block = silicon.BlockCode(("vmv1r.v v1,v2", "vfadd.vv v8,v8,v16", "vfadd.vv v12,v12,v20"), "32", "m4")
    assert silicon.stood_in(block, X60).lines == (
        "# LLVM-MCA-RISCV-LMUL M1", "vmv.v.v v1,v2", "# LLVM-MCA-RISCV-LMUL M4", "vfadd.vv v8,v8,v16",
        "vfadd.vv v12,v12,v20")
    at_m8 = dataclasses.replace(block, lmul="m8")
    assert silicon.stood_in(at_m8, X60) == at_m8  # 4.00 at m8 in rvv-bench: LLVM's own 4
    copy = silicon.BlockCode(("vmv1r.v v1,v2",) * 8, "32", "m4")
    work = silicon.BlockCode(block.lines[1:], "32", "m4")
    plain = dataclasses.replace(X60, stand_ins=())
    found, _, _ = silicon.block_cycles([block, copy, work], X60, Store(tmp_path / "x60"))
    unchanged, _, _ = silicon.block_cycles([block, copy, work], plain, Store(tmp_path / "plain"))
    assert found[copy] == 16 < unchanged[copy] == 32  # 2 cycles a copy, as rvv-bench measured
    assert found[work] == unchanged[work]
    assert found[block] == found[work] == 8  # two m4 adds: 4 each, the copy beside them
    unrestored = silicon.BlockCode(silicon.stood_in(block, X60).lines[:2] + block.lines[1:], "32", "m4")
    cheap, _, _ = silicon.block_cycles([unrestored], plain, Store(tmp_path / "unrestored"))
    assert cheap[unrestored] < 8  # without the block's LMUL given back, the adds would be read at m1


@pytest.mark.parametrize(("sew", "lmul", "read_as", "cycles"), [
    ("32", "m1", "vmv.v.x@mf2", 1), ("8", "mf8", "vmv.v.x@mf2", 1), ("32", "m4", "vmv.v.x@m1", 2),
    ("32", "m8", None, 4),  # rvv-bench 4.00 at m8: LLVM's own 4
    # SEW 64 has no LMUL 1/2: the splat is read at e32,mf2 (rvv-bench 1.00 at m1 and m2; LLVM alone 4)
    ("64", "m1", "vmv.v.x@e32mf2", 1), ("64", "m2", "vmv.v.x@e32mf2", 1), ("64", "m4", "vmv.v.x@m1", 2),
])
def test_a_scalar_to_vector_move_is_read_as_the_splat_where_the_x60_times_them_alike(mca, tmp_path, sew, lmul,
                                                                                      read_as, cycles):
    """vmv.s.x is 1.00 cycle up to m2, 2.00 at m4 and 4.00 at m8 on the X60 (rvv-bench), 4 at every vtype in LLVM 22."""
    move = silicon.BlockCode(("vmv.s.x v8,a1",) * 8, sew, lmul)
    assert X60.stand_in("vmv.s.x", sew, lmul) == read_as
    found, _, _ = silicon.block_cycles([move], X60, Store(tmp_path / "x60"))
    assert found[move] == 8 * cycles

def test_a_stand_in_right_after_a_vsetvli_is_read_at_its_own_vtype(mca, tmp_path):
    """llvm-mca reads the comment on the line after an instruction before it makes that vsetvli's instruments, which
    would then hold the stand-in at the vsetvli's type: the moves cost what they cost with a scalar instruction
    between (measured: 24 cycles instead of 18 without the blank line stood_in puts there)."""
    after = silicon.BlockCode(("vsetvli t0,zero,e32,m4,ta,ma", *("vmv.s.x v8,a1",) * 8))
    spaced = silicon.BlockCode(("vsetvli t0,zero,e32,m4,ta,ma", "addi a0,a0,1", *("vmv.s.x v8,a1",) * 8))
    plain = dataclasses.replace(X60, stand_ins=())
    found, _, _ = silicon.block_cycles([after, spaced], X60, Store(tmp_path / "x60"))
    unchanged, _, _ = silicon.block_cycles([after], plain, Store(tmp_path / "plain"))
    assert found[after] == found[spaced] == 18 < unchanged[after] == 32  # 2 cycles a move at m4, as rvv-bench


def test_a_stand_in_read_at_another_sew_gives_the_block_its_own_sew_and_lmul_back(mca, tmp_path):
    """A float64 sum seeds its accumulator with a scalar-to-vector move at e64: the X60 reads vmv.s.x as the splat at
    e32,mf2 (SEW 64 has no LMUL 1/2), and the e64 reduction after it is read at e64,m1 again (LLVM's X60 model times an
    ordered sum 12 cycles at e64 and 24 at e32), costing what it cost without the move's stand-in."""
    block = silicon.BlockCode(("vmv.s.x v8,zero", "vfredosum.vs v8,v16,v8", "vfmv.f.s fa0,v8"), "64", "m1")
    assert silicon.stood_in(block, X60).lines == (
        "# LLVM-MCA-RISCV-LMUL MF2", "# LLVM-MCA-RISCV-SEW E32", "vmv.v.x v8,zero", "# LLVM-MCA-RISCV-LMUL M1",
        "# LLVM-MCA-RISCV-SEW E64", "vfredosum.vs v8,v16,v8", "vfmv.f.s fa0,v8")
    assert silicon.stood_in(block, CORES["sifive-x280"]) == block
    moves = silicon.BlockCode(("vmv.s.x v8,a1",) * 8, "64", "m1")
    sums = silicon.BlockCode(("vfredosum.vs v9,v16,v9",) * 4, "64", "m1")  # not on the moves' registers
    mixed = silicon.BlockCode(moves.lines + sums.lines, "64", "m1")
    unrestored = silicon.BlockCode(tuple(line for line in silicon.stood_in(mixed, X60).lines
                                         if line != "# LLVM-MCA-RISCV-SEW E64"), "64", "m1")
    plain = dataclasses.replace(X60, stand_ins=())
    found, _, _ = silicon.block_cycles([moves, sums, mixed], X60, Store(tmp_path / "x60"))
    unchanged, _, _ = silicon.block_cycles([moves, sums, mixed], plain, Store(tmp_path / "plain"))
    at_e32, _, _ = silicon.block_cycles([unrestored], plain, Store(tmp_path / "e32"))
    assert found[moves] == 8 < unchanged[moves] == 32  # 1 cycle a move, as rvv-bench measured (LLVM alone: 4)
    assert found[sums] == unchanged[sums]  # no move: nothing changes
    assert found[mixed] < unchanged[mixed] and at_e32[unrestored] > found[mixed]  # the sums are read at e64 again


# Scalar blocks of every kind the cores time apart (loads, stores, multiply, divide, float fused and divide, branches,
# calls and returns, an immediate that fits c.addi and one that does not), and a vector block beside them.
SCALAR = [silicon.BlockCode(tuple(lines)) for lines in (
    ["ld a1,480(a1)", "add a4,a4,s0", "sllw a1,a1,a4", "sd a1,-8(sp)"],
    ["mul a0,a1,a2", "mulh a3,a0,a1", "div a4,a3,a2", "remu a5,a4,a1"],
    ["fld fa0,0(a0)", "fmadd.d fa1,fa0,fa0,fa1", "fdiv.d fa2,fa1,fa0", "fsd fa2,8(a0)"],
    ["flw fa0,0(a0)", "fmadd.s fa1,fa0,fa0,fa1", "fcvt.w.s a2,fa1,rtz", "addi a0,a0,4", "bnez a2,0"],
    ["addi a4,a4,-10", "add a5,a4,a4"], ["addi a4,a4,1536", "add a5,a4,a4"],
    ["lui a4,0xffffd", "add a4,a4,s0", "ld a4,-1392(a4)", "beq a4,zero,0"],
    ["addi sp,sp,-16", "sd ra,8(sp)", "jal ra,0"], ["ld ra,8(sp)", "addi sp,sp,16", "ret"],
    ["lbu a0,0(a1)", "sb a0,1(a1)", "slli a0,a0,8", "or a0,a0,a2", "xor a3,a3,a0"],
)]
VECTOR = silicon.BlockCode(("vle32.v v8, (a1)", "vfmacc.vv v16, v8, v8", "addi a0, a0, -1"), "32", "m1")


@pytest.fixture(scope="module")
def driver(mca) -> Path:
    built = mca_driver(USER_TOOLS)
    if built is None:
        pytest.skip("the llvm-mca driver cannot be built here (g++, or apt-get download llvm-22-dev, missing)")
    return built


# Vector blocks the driver must read as llvm-mca does: a type given, UNTYPED right after blocks whose vsetvli leaves m1
# or m8, a vsetvli switching the type mid-block, instruments mid-block (a core's stand-ins, one right after a vsetvli),
# and a vsetvl (no type from it).
VECTORS = [
    VECTOR, SETS["m1"], UNTYPED, SETS["m8"], UNTYPED,
    silicon.BlockCode(("vsetvli t0,zero,e32,m4,ta,ma", "vmv.s.x v8,a1", "vmv1r.v v1,v2", "vmacc.vv v8,v16,v24")),
    silicon.BlockCode(("vmacc.vv v8,v16,v24", "vsetvli t0,zero,e32,m4,ta,ma", "vmacc.vv v8,v16,v24"), "32", "m2"),
    silicon.BlockCode(("vmacc.vv v8,v16,v24", "vmacc.vv v12,v16,v24", "addi a0,a0,-1"), "32", "m4"),
    silicon.BlockCode(("vmv1r.v v1,v2", "vfadd.vv v8,v8,v16", "vfadd.vv v12,v12,v20"), "32", "m4"),
    silicon.BlockCode(("vmv.s.x v8,a1", "vfredosum.vs v9,v16,v9", "vsetivli zero,4,e16,mf2,ta,ma", "vadd.vv v1,v2,v3")),
    silicon.BlockCode(("vsetvl t0,a0,a1", "vle64.v v8,(a1)", "vfmacc.vv v16,v8,v8"), "64", "m1"),
]


@pytest.mark.parametrize("core", sorted(CORES))
def test_the_driver_gives_every_region_llvm_mcas_own_cycles_and_leaves_llvm_mca_nothing(mca, driver, core,
                                                                                        monkeypatch):
    ordered = [silicon.stood_in(code, CORES[core]) for code in [*SCALAR, *VECTORS]]
    assert any(line.startswith(silicon.INSTRUMENT_LMUL) for code in ordered for line in code.lines[1:]) \
        or not CORES[core].stand_ins  # a stand-in's instruments mid-block, where the core has stand-ins
    monkeypatch.setattr(silicon, "mca_jobs", lambda: 1)  # one part: each region right after the one before it
    alone = silicon.region_cycles(mca, CORES[core], ordered)
    given: list[int] = []
    run_mca = silicon._run_mca
    monkeypatch.setattr(silicon, "_run_mca", lambda *args: (given.extend(args[-1]) or run_mca(*args)))
    assert silicon.region_cycles(mca, CORES[core], ordered, driver) == alone
    assert given == []


def test_a_scalar_part_the_driver_cannot_parse_goes_to_llvm_mca_which_drops_and_counts_the_line(mca, driver):
    broken = silicon.BlockCode(("add a0,a0,a1", "not-an-instruction a0", "ld a1,0(a0)"))
    ordered = [*SCALAR, broken]
    assert silicon.region_cycles(mca, X60, ordered, driver) == silicon.region_cycles(mca, X60, ordered)
    assert silicon.region_cycles(mca, X60, ordered, driver)[1] == 1


def test_the_driver_is_built_once_per_machine_in_the_tools_folder_and_a_fresh_cache_builds_none(mca, driver, tmp_path,
                                                                                                 monkeypatch):
    """Every cache of the machine estimates with the tools folder's driver: the first estimate of a new cache (a user's
    second project, a CI runner's empty cache), in a new process, fetches and compiles nothing."""
    monkeypatch.setattr(mca_driver_module, "_BUILT", {})  # a new process: nothing remembered
    monkeypatch.setattr(mca_driver_module, "run_process", lambda *args, **kw: pytest.fail("the driver was built again"))
    fresh = tmp_path / "fresh-cache"
    cycles, _, cached = silicon.block_cycles([VECTOR, *SCALAR[:2]], X60, Store(fresh))
    assert len(cycles) == 3 and not cached
    assert mca_driver() == driver and sorted(p.name for p in fresh.iterdir()) == ["silicon"]


def test_llvm_mca_runs_share_the_cpus_among_xdist_workers_and_never_fewer_than_two(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    for workers, jobs in (("1", 64), ("16", 4), ("64", 2), ("", 64)):
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
        assert silicon.mca_jobs() == jobs


def test_each_core_has_the_vlen_clang_states(mca):
    clang = shutil.which("clang-22")
    if clang is None:
        pytest.skip("clang-22 not installed: apt-get install clang-22 (bash scripts/setup.sh system)")
    for core in CORES.values():
        defines = subprocess.run([clang, "--target=riscv64-linux-gnu", f"-mcpu={core.name}", "-E", "-dM", "-x", "c",
                                  "/dev/null"], capture_output=True, text=True, check=True).stdout
        assert f"#define __riscv_v_min_vlen {core.vlen}\n" in defines, core.name


def test_built_in_targets_pair_cores_by_vlen_and_a_mismatch_is_refused_in_one_line():
    assert BUILTIN_TARGETS["rv64gcv-zvl256b"].silicon == ("spacemit-x60",)
    assert BUILTIN_TARGETS["rv64gcv-zvl512b"].silicon == ("sifive-x280",)
    assert BUILTIN_TARGETS["rv64gcv-zvl128b"].silicon == ("sifive-p670",)
    assert BUILTIN_TARGETS["rv64gc"].silicon == ("spacemit-x60", "sifive-x280", "sifive-p670")
    with pytest.raises(ConfigError, match=r"^target 'x': silicon core sifive-x280 has VLEN 512 but this target runs "
                                          r"at vlen=256: its executed blocks would not be the core's; estimate it "
                                          r"from a target at vlen=512$"):
        target_from_table("x", {"extends": "rv64gcv-zvl256b", "silicon": ["sifive-x280"]}, BUILTIN_TARGETS)
    with pytest.raises(ConfigError, match=r"^target 'y': silicon core 'nope' is unknown; known: spacemit-x60"):
        target_from_table("y", {"extends": "rv64gc", "silicon": ["nope"]}, BUILTIN_TARGETS)
    clocked = target_from_table("z", {"extends": "rv64gcv-zvl256b", "silicon": ["spacemit-x60@2.0"]}, BUILTIN_TARGETS)
    assert clocked.cores()[0].ghz == 2.0
    wider = target_from_table("w", {"extends": "rv64gcv-zvl256b", "features": ["+m", "+a", "+f", "+d", "+c", "+v",
                                                                                "+zvl512b"]}, BUILTIN_TARGETS)
    assert wider.silicon == ("sifive-x280",)  # the defaults follow the new VLEN


def test_without_llvm_mca_the_estimate_is_one_line_naming_the_package(kernels, tmp_path, monkeypatch):
    binary, counts = kernels
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without llvm-22
    with pytest.raises(ToolMissing, match=r"^llvm-mca-22 not found; apt-get install llvm-22 \(or bash "
                                          r"scripts/setup.sh system\)$"):
        estimate(counts, (binary,), "riscv64", [X60], Store(tmp_path))


def test_the_in_order_cores_settle_by_the_iterations_they_are_estimated_at(counted_session, tmp_path):
    """The X60's and X280's steady state is read at (2, 4) iterations, half the llvm-mca work of (10, 20): on every
    block of a real model's counted run the two give the same cycles. The out-of-order P670 is not settled by then."""
    from pytest_rvv.measure.executed import measure_executed

    target = BUILTIN_TARGETS["rv64gcv-zvl256b"]
    model = counted_session.settings.known_models["mobilenetv2"]
    runner = counted_session.runner(target)
    try:
        measured = measure_executed(counted_session.cell(model, target, runner), tmp_path)
    except ToolMissing as exc:
        pytest.skip(str(exc))
    artifact = counted_session.artifact(model, target)
    codes = sorted({silicon.BlockCode(tuple(silicon.mca_line(i) for i in body), sew, lmul) for _, body, (sew, lmul)
                    in silicon.dispatch_blocks(measured.counts, artifact.executables, target.arch)},
                   key=silicon.BlockCode.identity)
    assert len(codes) > 1000
    for core in (CORES["spacemit-x60"], CORES["sifive-x280"]):
        assert core.iterations[1] < 10  # cheaper than (10, 20), or there is nothing to hold
        settled, _, _ = silicon.block_cycles(codes, core, Store(tmp_path / core.name))
        ten_twenty, _, _ = silicon.block_cycles(codes, dataclasses.replace(core, iterations=(10, 20)),
                                                Store(tmp_path / core.name))
        assert settled == ten_twenty, core.name
    assert CORES["sifive-p670"].iterations == (10, 20)


def test_a_runs_threads_are_estimated_each_as_the_run_with_its_own_executions(kernels, tmp_path):
    """A run's threads (``estimate_each``): llvm-mca once per core over the run's blocks, each thread's figures exactly
    what ``estimate`` gives the run's blocks with that thread's executions."""
    binary, counts = kernels
    weights = [[b.execs if i % 2 else 0 for i, b in enumerate(counts.blocks)],
               [b.execs if i % 2 == 0 else 0 for i, b in enumerate(counts.blocks)],
               [3 * b.execs for b in counts.blocks]]
    cores = [X60, CORES["sifive-p670"]]
    together = silicon.estimate_each(counts, weights, (binary,), "riscv64", cores, Store(tmp_path / "together"))
    for i, (execs, joint) in enumerate(zip(weights, together, strict=True)):
        run = dataclasses.replace(counts, blocks=[b._replace(execs=n)
                                                  for b, n in zip(counts.blocks, execs, strict=True)])
        alone = estimate(run, (binary,), "riscv64", cores, Store(tmp_path / f"alone-{i}"))
        assert {c: (e.dispatches, e.blocks) for c, e in joint.items()} == \
            {c: (e.dispatches, e.blocks) for c, e in alone.items()}
    assert together[2][X60.name].total == pytest.approx(3 * estimate(counts, (binary,), "riscv64", [X60],
                                                                     Store(tmp_path / "once"))[X60.name].total, abs=2)
