"""Memory traffic per dispatch (run/rvv_memtrace.c, measure/traffic.py), against numbers known by arithmetic.

A static riscv64 program of hand-written RVV kernels (inline assembly, so the compiler adds no access of its own)
moves bytes whose count each kernel's arguments fix: its loads and stores by kind must equal them exactly, and its
reads of buffers sized against the modelled X60 caches (32 KiB L1D 4-way, 512 KiB L2 16-way, 64-byte lines) must
miss exactly where an LRU cache misses. Then a real IREE matmul's dispatches must move at least its operands.
"""

from pathlib import Path

import pytest

from pytest_rvv.base.cbuild import build_riscv64_static
from pytest_rvv.base.errors import ConfigError, RvvError, ToolMissing
from pytest_rvv.base.store import Store
from pytest_rvv.config.cores import CACHES, CacheHierarchy, CacheLevel, cache_hierarchy
from pytest_rvv.config.kernels import kernels
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure import traffic as traffic_module
from pytest_rvv.measure.traffic import by_symbol, measure_traffic, trace_program
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.qemu_plugin import build_memtrace_plugin, check_plugin_support
from pytest_rvv.session import RvvSession

from .conftest import USER_CACHE

PROBE_C = r"""#include <stddef.h>
#include <stdint.h>

__attribute__((noinline)) void unit_copy(float *dst, const float *src, size_t n)
{
    asm volatile("1: vsetvli t0, %2, e32, m1, ta, ma\n"
                 "   vle32.v v8, (%1)\n"
                 "   vse32.v v8, (%0)\n"
                 "   slli t1, t0, 2\n"
                 "   add %0, %0, t1\n"
                 "   add %1, %1, t1\n"
                 "   sub %2, %2, t0\n"
                 "   bnez %2, 1b\n"
                 : "+r"(dst), "+r"(src), "+r"(n) : : "t0", "t1", "v8", "memory");
}

__attribute__((noinline)) void strided_gather(float *dst, const float *src, size_t n, size_t stride)
{
    asm volatile("1: vsetvli t0, %2, e32, m1, ta, ma\n"
                 "   vlse32.v v8, (%1), %3\n"
                 "   vse32.v v8, (%0)\n"
                 "   mul t1, t0, %3\n"
                 "   add %1, %1, t1\n"
                 "   slli t1, t0, 2\n"
                 "   add %0, %0, t1\n"
                 "   sub %2, %2, t0\n"
                 "   bnez %2, 1b\n"
                 : "+r"(dst), "+r"(src), "+r"(n) : "r"(stride) : "t0", "t1", "v8", "memory");
}

__attribute__((noinline)) void whole_copy(float *dst, const float *src, size_t groups)
{
    asm volatile("   csrr t1, vlenb\n"
                 "   slli t1, t1, 1\n"
                 "1: vl2re32.v v8, (%1)\n"
                 "   vs2r.v v8, (%0)\n"
                 "   add %1, %1, t1\n"
                 "   add %0, %0, t1\n"
                 "   addi %2, %2, -1\n"
                 "   bnez %2, 1b\n"
                 : "+r"(dst), "+r"(src), "+r"(groups) : : "t1", "v8", "v9", "memory");
}

__attribute__((noinline)) void indexed_gather(float *dst, const float *base, const uint32_t *offsets, size_t n)
{
    asm volatile("1: vsetvli t0, %3, e32, m1, ta, ma\n"
                 "   vle32.v v8, (%2)\n"
                 "   vluxei32.v v9, (%1), v8\n"
                 "   vse32.v v9, (%0)\n"
                 "   slli t1, t0, 2\n"
                 "   add %0, %0, t1\n"
                 "   add %2, %2, t1\n"
                 "   sub %3, %3, t0\n"
                 "   bnez %3, 1b\n"
                 : "+r"(dst), "+r"(base), "+r"(offsets), "+r"(n) : : "t0", "t1", "v8", "v9", "memory");
}

__attribute__((noinline)) uint64_t scalar_sum(const uint64_t *p, size_t n)
{
    uint64_t sum;
    asm volatile("   li %0, 0\n"
                 "1: ld t1, 0(%1)\n"
                 "   add %0, %0, t1\n"
                 "   addi %1, %1, 8\n"
                 "   addi %2, %2, -1\n"
                 "   bnez %2, 1b\n"
                 : "=&r"(sum), "+r"(p), "+r"(n) : : "t1", "memory");
    return sum;
}

#define READ_BYTES(NAME)                                                                        \
    __attribute__((noinline)) void NAME(const uint8_t *p, size_t n)                             \
    {                                                                                           \
        asm volatile("1: vsetvli t0, %1, e8, m8, ta, ma\n"                                       \
                     "   vle8.v v8, (%0)\n"                                                      \
                     "   add %0, %0, t0\n"                                                       \
                     "   sub %1, %1, t0\n"                                                       \
                     "   bnez %1, 1b\n"                                                          \
                     : "+r"(p), "+r"(n) : : "t0", "v8", "v9", "v10", "v11", "v12", "v13", "v14", \
                       "v15", "memory");                                                         \
    }
READ_BYTES(stream)
READ_BYTES(first_pass)
READ_BYTES(second_pass)
READ_BYTES(l2_first_pass)
READ_BYTES(l2_second_pass)

static float src[4096] __attribute__((aligned(64))), dst[4096] __attribute__((aligned(64)));
static uint32_t offsets[200];
static uint64_t words[500];
static uint8_t big[4 << 20] __attribute__((aligned(64)));
static uint8_t small[16 << 10] __attribute__((aligned(64)));
static uint8_t middle[256 << 10] __attribute__((aligned(64)));

int main(void)
{
    unit_copy(dst, src, 1000);
    strided_gather(dst, src, 300, 12);
    whole_copy(dst, src, 10);
    for (int i = 0; i < 200; i++) {
        offsets[i] = (uint32_t)((i * 7) % 200) * 4;
    }
    indexed_gather(dst, src, offsets, 200);
    uint64_t sum = scalar_sum(words, 500);
    stream(big, sizeof(big));
    first_pass(small, sizeof(small));
    second_pass(small, sizeof(small));
    l2_first_pass(middle, sizeof(middle));
    l2_second_pass(middle, sizeof(middle));
    return (int)(sum & 1);
}
"""
KERNELS = ("unit_copy", "strided_gather", "whole_copy", "indexed_gather", "scalar_sum", "stream", "first_pass",
           "second_pass", "l2_first_pass", "l2_second_pass")
X60 = CACHES["spacemit-x60"]
LINE = 64
MiB, KiB = 1 << 20, 1 << 10


@pytest.fixture(scope="module")
def memtrace() -> Path:
    """The memory-trace plugin, built once into the cache (skips with the reason when it cannot be)."""
    try:
        check_plugin_support(find_qemu("riscv64"))
        return build_memtrace_plugin(Store(USER_CACHE))
    except ToolMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def probe() -> Path:
    try:
        return build_riscv64_static(Store(USER_CACHE), PROBE_C, "traffic_probe", "the memory-traffic probe",
                                    march="rv64gcv")
    except ToolMissing as exc:
        pytest.skip(str(exc))


def traced(probe: Path, plugin: Path, out: Path, vlen: int = 256, per_element: bool = False):
    target = BUILTIN_TARGETS[f"rv64gcv-zvl{vlen}b"]
    trace = trace_program(find_qemu("riscv64"), target.emulator_cpu, probe, out, plugin, X60, per_element)
    return by_symbol(trace, probe, KERNELS)


@pytest.mark.parametrize("per_element", [False, True], ids=["per-instruction", "per-element"])
@pytest.mark.parametrize("vlen", [128, 256, 512])
def test_bytes_by_kind_of_access_equal_what_each_kernel_moves(probe, memtrace, tmp_path, vlen, per_element):
    """Unit-stride and whole-register accesses are computed once per instruction by default; QEMU's own reports,
    one per element, must give the same bytes."""
    kernels_ = traced(probe, memtrace, tmp_path / "trace.txt", vlen, per_element)
    moved = {name: (t.loaded, t.stored) for name, t in kernels_.items() if name in KERNELS[:5]}
    register_pairs = 10 * 2 * vlen // 8  # whole_copy: 10 x vl2re32.v / vs2r.v, two registers of VLEN bits each
    assert moved == {
        "unit_copy": ({"unit": 1000 * 4}, {"unit": 1000 * 4}),  # vle32.v / vse32.v of 1000 floats, strip-mined
        "strided_gather": ({"strided": 300 * 4}, {"unit": 300 * 4}),  # vlse32.v of 300 floats 12 bytes apart
        "whole_copy": ({"whole": register_pairs}, {"whole": register_pairs}),
        "indexed_gather": ({"unit": 200 * 4, "indexed": 200 * 4}, {"unit": 200 * 4}),  # offsets, then vluxei32.v
        "scalar_sum": ({"scalar": 500 * 8}, {}),  # 500 ld
    }
    # one callback per element: a vector instruction is not counted once
    assert kernels_["unit_copy"].accesses == 2 * 1000
    assert kernels_["stream"].bytes_loaded == 4 * MiB


def test_the_per_instruction_path_gives_what_qemu_reports_per_element(probe, memtrace, tmp_path):
    fast = traced(probe, memtrace, tmp_path / "fast.txt")
    slow = traced(probe, memtrace, tmp_path / "slow.txt", per_element=True)
    assert {k: v for k, v in fast.items() if k != "whole_copy"} == {k: v for k, v in slow.items() if k != "whole_copy"}
    # vs2r.v: one access per byte in QEMU's reports (EEW 8), per element of the encoding's width here: same bytes
    assert (fast["whole_copy"].loaded, fast["whole_copy"].stored) == (slow["whole_copy"].loaded,
                                                                        slow["whole_copy"].stored)


def test_a_stream_far_beyond_l2_misses_each_line_once_in_l1_and_l2(probe, memtrace, tmp_path):
    stream = traced(probe, memtrace, tmp_path / "trace.txt")["stream"]  # 4 MiB never touched before, 64-aligned
    assert stream.l1_misses == 4 * MiB // LINE
    assert stream.l2_misses == 4 * MiB // LINE
    assert stream.dram_bytes(LINE) >= 4 * MiB  # plus the dirty lines it evicts


def test_a_working_set_in_l1_misses_only_on_its_first_pass(probe, memtrace, tmp_path):
    kernels_ = traced(probe, memtrace, tmp_path / "trace.txt")
    first, second = kernels_["first_pass"], kernels_["second_pass"]  # 16 KiB read twice
    assert (first.l1_misses, first.l2_misses) == (16 * KiB // LINE, 16 * KiB // LINE)
    assert (second.l1_misses, second.l2_misses, second.dram_bytes(LINE)) == (0, 0, 0)


def test_a_working_set_beyond_l1_and_within_l2_misses_l1_again_but_not_l2(probe, memtrace, tmp_path):
    kernels_ = traced(probe, memtrace, tmp_path / "trace.txt")
    first, second = kernels_["l2_first_pass"], kernels_["l2_second_pass"]  # 256 KiB read twice: LRU L1 thrashes
    assert (first.l1_misses, first.l2_misses) == (256 * KiB // LINE, 256 * KiB // LINE)
    assert (second.l1_misses, second.l2_misses) == (256 * KiB // LINE, 0)


def test_x60_caches_are_the_published_geometry():
    assert X60.geometry == (128, 4, 512, 16, 64)  # 32 KiB = 128 sets x 4 ways x 64 B; 512 KiB = 512 x 16 x 64
    assert (X60.l1d.size, X60.l2.size) == (32 * KiB, 512 * KiB)


def test_a_core_without_published_caches_is_one_line():
    with pytest.raises(ConfigError, match=r"core 'sifive-p670' has no published cache parameters .* modelled: "
                                          r"spacemit-x60$"):
        cache_hierarchy("sifive-p670")


@pytest.mark.parametrize("path", ["mmt4d", "inner-tiled"])
def test_a_matmul_s_dispatches_move_at_least_its_operands(tmp_path, memtrace, path):
    """64x64x64 f32 (iree issue 24932's smallest shape) on rv64gcv-zvl256b: A and B (16 KiB each) must be read and
    C (16 KiB) written by the dispatches, and the matmul dispatch itself reads both operands."""
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)}, tmp_path))
    kernel = next(c for c in kernels({}, "64x64x64,f32", BUILTIN_TARGETS).cells if c.path == path)
    cell = session.cell(kernel.model, kernel.target, session.runner(kernel.target))
    with pytest.raises(ConfigError, match="sifive-x280"):
        measure_traffic(cell, tmp_path / "x280", core="sifive-x280")
    traffic = measure_traffic(cell, tmp_path / "run")
    operand = 64 * 64 * 4
    assert sum(t.bytes_loaded for t in traffic.dispatches.values()) >= 2 * operand
    assert sum(t.bytes_stored for t in traffic.dispatches.values()) >= operand
    matmul = next(t for name, t in traffic.dispatches.items() if "matmul" in name)
    assert matmul.bytes_loaded >= 2 * operand
    assert matmul.loaded.get("unit", 0) + matmul.loaded.get("whole", 0) > 0  # its operands come in by vector loads
    # what QEMU reports one element at a time gives the same traffic and misses, dispatch by dispatch
    slow = measure_traffic(cell, tmp_path / "slow", per_element=True)
    assert {k: t.as_json(LINE) for k, t in slow.dispatches.items()} == \
        {k: t.as_json(LINE) for k, t in traffic.dispatches.items()}
    # every line an L1 miss brings in is a line some access touched
    for name, t in traffic.dispatches.items():
        assert 0 < t.l1_misses * LINE <= 2 * (t.bytes_loaded + t.bytes_stored), name
        assert t.l2_misses <= t.l1_misses, name


def test_a_traces_traffic_is_kept_and_read_back_figure_for_figure_without_parsing_the_trace_again(tmp_path, memtrace,
                                                                                                  monkeypatch):
    """Attributed once per trace and libraries: a rerun reads each dispatch's traffic back from the store."""
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(tmp_path / "cache")}, tmp_path))
    kernel = next(c for c in kernels({}, "64x64x64,f32", BUILTIN_TARGETS).cells if c.path == "mmt4d")
    cell = session.cell(kernel.model, kernel.target, session.runner(kernel.target))
    made = measure_traffic(cell, tmp_path / "made")
    [trace] = (tmp_path / "cache" / traffic_module.NAMESPACE).glob("*/*/trace.txt")
    parsed = traffic_module.parse_trace(trace.read_text(), trace)
    assert (made.dispatches, made.outside) == traffic_module.attribute_traffic(parsed, cell.artifact.executables,
                                                                               "riscv64")
    total = traffic_module.kept_total(trace, cell.store)  # a whole run's sum (the peers' traced runs)
    assert total == parsed.total() and total.l1_misses
    monkeypatch.setattr(traffic_module, "parse_trace", lambda *args: pytest.fail("a kept trace was parsed again"))
    read = measure_traffic(cell, tmp_path / "read")
    assert read == made and traffic_module.kept_total(trace, cell.store) == total
    assert any(t.l1_misses and t.loaded for t in made.dispatches.values()) and made.outside.accesses


def test_a_cache_geometry_the_model_cannot_take_is_refused_in_one_line(probe, memtrace, tmp_path):
    odd = CacheHierarchy(CacheLevel(48 * KiB, 4), CacheLevel(512 * KiB, 16), "made up: 192 sets")
    with pytest.raises(RvvError, match="sets and line must be powers of two"):
        trace_program(find_qemu("riscv64"), BUILTIN_TARGETS["rv64gcv-zvl256b"].emulator_cpu, probe,
                      tmp_path / "t.txt", memtrace, odd)
