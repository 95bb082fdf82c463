"""Executed-instruction counts from the rvv_counter QEMU plugin, against numbers derived by hand."""

import dataclasses
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pytest_rvv.base.errors import RuntimeNotProvided, ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS, Target
from pytest_rvv.measure.counts import parse
from pytest_rvv.measure.dispatch_table import Attribution
from pytest_rvv.measure.executed import measure_executed
from pytest_rvv.model.manifest import model_from_table
from pytest_rvv.run.qemu import Qemu, find_qemu
from pytest_rvv.run.qemu_plugin import build_plugin, check_plugin_support, plugin_option
from pytest_rvv.session import RvvSession

from .conftest import USER_CACHE, mlp_model

# c[i] = a[i] + b[i] for 100 floats, strip-mined with vsetvli: per iteration 1 vsetvli, 2 vle32,
# 1 vfadd, 1 vse32 and 6 scalar instructions; 7 instructions before the loop, 3 after it.
VADD = r"""
    .option norelax
    .globl _start
    .text
_start:
    li   a0, 100
    la   a1, src_a
    la   a2, src_b
    la   a3, dst
loop:
    vsetvli t0, a0, e32, m1, ta, ma
    vle32.v v1, (a1)
    vle32.v v2, (a2)
    vfadd.vv v3, v1, v2
    vse32.v v3, (a3)
    slli t1, t0, 2
    add  a1, a1, t1
    add  a2, a2, t1
    add  a3, a3, t1
    sub  a0, a0, t0
    bnez a0, loop
    li   a7, 93
    li   a0, 0
    ecall
    .data
src_a: .zero 400
src_b: .zero 400
dst:   .zero 400
"""
CROSS_GCC = "riscv64-linux-gnu-gcc"


def assemble(folder: Path, name: str, source: str) -> Path:
    """A static riscv64 program (no libc) from hand-written RVV assembly; skips without the cross assembler."""
    if shutil.which(CROSS_GCC) is None:
        pytest.skip(f"{CROSS_GCC} not installed: apt-get install gcc-riscv64-linux-gnu (bash scripts/setup.sh system)")
    (folder / f"{name}.S").write_text(source)
    subprocess.run([CROSS_GCC, "-march=rv64gcv", "-mabi=lp64d", "-nostdlib", "-static", "-Wl,--no-relax",
                    "-o", folder / name, folder / f"{name}.S"], check=True)
    return folder / name


@pytest.fixture(scope="module")
def vadd(tmp_path_factory) -> Path:
    return assemble(tmp_path_factory.mktemp("vadd"), "vadd", VADD)


def count(program: Path, target: Target, plugin: Path, out: Path, elements: bool = True):
    qemu = find_qemu("riscv64")
    argv = [str(qemu.path), "-cpu", target.emulator_cpu, *plugin_option(plugin, out, elements), str(program)]
    assert run_process(argv, timeout_s=60).ok
    return parse(out.read_text(), out)


@pytest.mark.parametrize(("vlen", "iterations"), [(128, 25), (256, 13), (512, 7)])
def test_counts_of_a_hand_written_rvv_loop_match_the_hand_derived_numbers(vadd, plugin, tmp_path, vlen, iterations):
    counts = count(vadd, BUILTIN_TARGETS[f"rv64gcv-zvl{vlen}b"], plugin, tmp_path / "c.txt")
    assert counts.vlen == vlen
    assert counts.total == 7 + 11 * iterations + 3
    assert counts.classes() == {"vector_arith": iterations, "vector_memory": 3 * iterations,
                                "vector_config": iterations, "scalar": 7 + 6 * iterations + 3}
    vlmax = vlen // 32
    arith, memory = counts.elements["vector_arith"], counts.elements["vector_memory"]
    assert (arith.executions, arith.elements, arith.vlmax) == (iterations, 100, iterations * vlmax)
    assert (memory.executions, memory.elements, memory.vlmax) == (3 * iterations, 300, 3 * iterations * vlmax)
    assert arith.occupancy == pytest.approx(100 / (iterations * vlmax))
    # per instruction: the four vector instructions of the loop, each run once per iteration on 100 elements
    assert sorted(e.elements for e in counts.insn_elements.values()) == [100, 100, 100, 100]
    assert {(e.executions, e.vlmax) for e in counts.insn_elements.values()} == {(iterations, iterations * vlmax)}


def test_counting_is_repeatable_and_cheap_counting_needs_no_register_reads(vadd, plugin, tmp_path):
    target = BUILTIN_TARGETS["rv64gcv-zvl256b"]
    first = count(vadd, target, plugin, tmp_path / "a.txt", elements=False)
    second = count(vadd, target, plugin, tmp_path / "b.txt", elements=False)
    assert first.blocks == second.blocks and first.total == 153
    assert first.elements == {}


def test_plugin_is_built_once_into_the_cache(plugin):
    assert build_plugin(Store(USER_CACHE)) == plugin
    assert plugin.is_file() and plugin.read_bytes()[:4] == b"\x7fELF"


def test_too_old_qemu_is_one_clear_line():
    old = Qemu("riscv64", find_qemu("riscv64").path, (9, 0))
    with pytest.raises(ToolMissing, match=r"is QEMU 9.0; executed-instruction counts need plugin API 3 "
                                          r"\(QEMU >= 9.1\)"):
        check_plugin_support(old)


def test_model_counts_per_dispatch_are_identical_across_runs(tmp_path):
    mlp_model(tmp_path / "mlp.onnx")
    model = model_from_table("mlp", {"path": "mlp.onnx", "inputs": [{"name": "x", "shape": [4, 64]}]}, tmp_path)
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)}, tmp_path))
    runner = session.runner(BUILTIN_TARGETS["aarch64"])
    try:
        first = measure_executed(session.cell(model, runner.target, runner), tmp_path / "1")
    except ToolMissing as exc:
        pytest.skip(str(exc))
    second = measure_executed(session.cell(model, runner.target, runner), tmp_path / "2")
    assert first.snapshot("mlp", "aarch64") == second.snapshot("mlp", "aarch64")
    dispatches = first.attribution.dispatches
    assert dispatches and all(key.startswith("dispatch_") for key in dispatches)
    assert any(d.vector > 0 for d in dispatches.values())
    assert first.counts.total > first.attribution.totals.instructions > 0
    assert first.counts.total == first.attribution.totals.instructions + first.attribution.outside
    # the store's form is the attribution's one serializer: read back, it writes the same document
    assert Attribution.from_json(first.attribution.to_json()) == first.attribution


@pytest.mark.parametrize("target_name", ["rv64gcv-zvl128b", "rv64gcv-zvl512b"])
def test_lane_occupancy_per_dispatch_of_a_real_model(tmp_path, target_name):
    """Elements mode attributes vl/VLMAX to dispatches; the counts themselves are those of a plain run."""
    mlp_model(tmp_path / "mlp.onnx")
    model = model_from_table("mlp", {"path": "mlp.onnx", "inputs": [{"name": "x", "shape": [4, 64]}]}, tmp_path)
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)}, tmp_path))
    runner = session.runner(BUILTIN_TARGETS[target_name])
    try:
        plain = measure_executed(session.cell(model, runner.target, runner), tmp_path / "plain")
    except ToolMissing as exc:
        pytest.skip(str(exc))
    counted = measure_executed(session.cell(model, runner.target, runner), tmp_path / "lanes", elements=True)
    assert counted.snapshot("mlp", target_name) == plain.snapshot("mlp", target_name)
    assert plain.attribution.lanes is None
    lanes = counted.attribution.lanes
    assert lanes is not None
    assert lanes["vlen"] == BUILTIN_TARGETS[target_name].emulator_vlen
    vectorized = {k for k, d in counted.attribution.dispatches.items()
                  if (d.classes or {}).get("vector_arith", 0) + (d.classes or {}).get("vector_memory", 0)}
    assert set(lanes["dispatches"]) == vectorized
    for name, d in lanes["dispatches"].items():
        assert 0 < d["occupancy_percent"] <= 100, name
        assert d["elements"] <= d["vlmax"]
    total = lanes["total"]
    assert total["elements"] == sum(d["elements"] for d in lanes["dispatches"].values())
    assert total["executions"] == sum(d["executions"] for d in lanes["dispatches"].values())


def test_counts_do_not_follow_where_the_runtime_lies(tmp_path):
    """A static runtime keeps its own directory (from /proc/self/exe) on the heap: from /home/<user>/.cache instead of
    /root/.cache, squeezenet1.1's dispatch_3 on rv64gc once executed 17 more instructions. Run from a copy of the
    runtime in a 6-character directory (the real path would shift the heap by 112 bytes), the counts are the same."""
    settings = Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE), "models": ["squeezenet1.1"]},
                                tmp_path)
    settings = dataclasses.replace(settings, fresh_runs=True)  # emulate both, trust no recorded run
    model, target = settings.known_models["squeezenet1.1"], BUILTIN_TARGETS["rv64gc"]
    default = RvvSession(settings)
    try:
        runner = default.runner(target)
        there = measure_executed(default.cell(model, target, runner), tmp_path / "there")
    except (ToolMissing, RuntimeNotProvided) as exc:
        pytest.skip(str(exc))
    short = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))  # /tmp/rXXXXXXXX: far shorter than the cache's path
    shutil.copy(runner.runtime.executable, short / "iree-run-module")
    moved = RvvSession(dataclasses.replace(settings, runtime_riscv64=short / "iree-run-module"))
    try:
        here = measure_executed(moved.cell(model, target, moved.runner(target)), tmp_path / "here")
    finally:
        shutil.rmtree(short)
    assert here.snapshot("s", "t") == there.snapshot("s", "t")


def test_a_base_voted_from_other_code_is_refused_and_the_real_one_kept(tmp_path):
    """A run that loads a module and calls nothing can vote a page-aligned load base from a few runtime blocks whose
    first bytes also occur in the library (mobilenetv3-cls on rv64gcv-zvl512b: 23 instructions voted 0x89000); that
    base put 1.33 M instructions of the runtime's weight copy inside the library's range. Here: the real library of a
    compiled kernel, two blocks copied from its .text at such a base, and the runtime's own blocks around them."""
    from pytest_rvv.config.kernels import kernels
    from pytest_rvv.measure.counts import PAGE, Block, _Library

    session = RvvSession(Settings.resolve(lambda option: None, {}, tmp_path))
    cell = next(c for c in kernels({}, "64x64x64,f32", BUILTIN_TARGETS).cells if c.path == "default")
    library = _Library.load(session.artifact(cell.model, cell.target).executables[0], "riscv64")
    base = 0x89000
    assert base % PAGE == 0
    offsets = [at for at in range(0, len(library.text) - 16, 2)
               if len(library._offsets.get(library.text[at:at + 8], ())) == 1][:2]
    voters = [Block(base + library.text_vaddr + at, 4, 1, 0, 0, 0, library.text[at:at + 16]) for at in offsets]
    runtime = [Block(base + library.text_vaddr + at + 2, 50, 1000, 0, 0, 0, bytes(range(16)))
               for at in range(64, min(len(library.text), 4000), 200)]
    assert library.load_base(voters) == base  # alone, two matching blocks are a vote
    assert library.load_base(voters + runtime) is None  # among the runtime's blocks, they are not the library
