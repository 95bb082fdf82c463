"""The silicon estimator per instruction, held against published measurements of the core.

rvv-bench (camel-cdr) times blocks of 8 copies of one instruction on real hardware and publishes cycles per
instruction; the same block, given to the estimator (measure/silicon.py: llvm-mca's machine model of the core,
steady state), gives its cycles per instruction. The two side by side say which instruction classes the estimates
can be trusted on, per core, and where LLVM's model is off.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_rvv.base.store import Store
from pytest_rvv.config.cores import CORES
from pytest_rvv.measure.silicon import BlockCode, block_cycles, find_mca, mca_version

COPIES = 8  # rvv-bench's block: 8 copies of the instruction, destinations rotating over the free register groups
# camel-cdr/rvv-bench-results @ 6438d64, table tblMaa (vl=VLMAX, ta, ma): cycles per instruction, the middle 60 % of
# 32 runs of blocks of 8 (rvv-bench e1b462f1). Its later regeneration (4bd5e958) left the X60's FP cells empty.
RVV_BENCH_X60 = "rvv-bench-results@6438d64 spacemit_x60/index.html"


@dataclass(frozen=True)
class InstructionTiming:
    """One published per-instruction measurement: ``operands`` has ``{d}`` for the rotating destination."""

    core: str
    mnemonic: str
    operands: str
    sew: str
    lmul: str
    cycles: float  # measured cycles per instruction
    source: str
    widening: bool = False  # the destination group is 2 x LMUL
    fields: int = 1  # a segment load or store's fields: its register group is fields x LMUL

    @property
    def name(self) -> str:
        return f"{self.mnemonic}-e{self.sew}{self.lmul}" + ("-masked" if "v0.t" in self.operands else "")

    def block(self) -> BlockCode:
        """rvv-bench's block: v8..v15 at m1, every 2nd at m2, v8/v12 at m4, v8 alone at m8 (of the destination's
        group size: 2 x LMUL for a widening instruction, fields x LMUL for a segment one; one register at a
        fractional LMUL)."""
        registers = 1 if self.lmul.startswith("mf") else int(self.lmul[1:])
        group = registers * (2 if self.widening else 1) * self.fields
        destinations = [f"v{8 + group * (i % (8 // group))}" for i in range(COPIES)]
        return BlockCode(tuple(f"{self.mnemonic} {self.operands.format(d=d)}" for d in destinations), self.sew,
                         self.lmul)


def _rows(mnemonic: str, operands: str, sew: str, measured: dict[str, float], line: int,
          widening: bool = False, fields: int = 1) -> tuple[InstructionTiming, ...]:
    return tuple(InstructionTiming("spacemit-x60", mnemonic, operands, sew, lmul, cycles,
                                   f"{RVV_BENCH_X60}:{line}", widening, fields) for lmul, cycles in measured.items())


PUBLISHED_INSTRUCTIONS: tuple[InstructionTiming, ...] = (
    *_rows("vfmacc.vv", "{d}, v16, v24", "32", {"m1": 1.00, "m2": 2.00, "m4": 4.00, "m8": 8.00}, 627),
    *_rows("vfmacc.vf", "{d}, fa0, v16", "32", {"m1": 1.00, "m2": 2.00, "m4": 4.00, "m8": 8.00}, 629),
    *_rows("vfwmacc.vf", "{d}, fa0, v16", "16", {"m1": 2.00, "m2": 4.00, "m4": 8.00}, 677, widening=True),
    *_rows("vwmacc.vx", "{d}, a1, v16", "8", {"m1": 2.00, "m2": 4.00, "m4": 8.00}, 533, widening=True),
    *_rows("vmacc.vv", "{d}, v16, v24", "32", {"m1": 1.00, "m2": 2.00, "m4": 4.00, "m8": 8.00}, 447),
    *_rows("vle32.v", "{d}, (a0)", "32", {"m1": 2.35, "m2": 4.26, "m4": 8.70, "m8": 16.52}, 779),
    *_rows("vse32.v", "{d}, (a0)", "32", {"m1": 3.12, "m2": 4.60, "m4": 9.00, "m8": 19.47}, 787),
    *_rows("vrgather.vv", "{d}, v16, v24", "32", {"m1": 4.00, "m2": 16.00, "m4": 64.06, "m8": 256.36}, 237),
    # what the suites' code also executes: segment loads and stores, slides, scalar-vector and whole-register moves,
    # masked forms and a fractional LMUL (the same table, measured the same way)
    *_rows("vlseg2e32.v", "{d}, (a0)", "32", {"m1": 12.65, "m2": 24.42, "m4": 48.57}, 821, fields=2),
    *_rows("vsseg2e32.v", "{d}, (a0)", "32", {"mf2": 3.24, "m1": 6.07, "m2": 12.00, "m4": 24.00}, 829, fields=2),
    *_rows("vslideup.vi", "{d}, v16, 3", "32", {"m1": 2.00, "m2": 4.00, "m4": 8.00, "m8": 16.00}, 245),
    *_rows("vmv.s.x", "{d}, a1", "32", {"mf2": 1.00, "m1": 1.00, "m2": 1.00, "m4": 2.00, "m8": 4.00}, 695),
    *_rows("vmv.s.x", "{d}, a1", "64", {"m1": 1.00, "m2": 1.00}, 695),  # an i64 reduction's accumulator
    *_rows("vfmv.s.f", "{d}, fa0", "32", {"mf2": 1.00, "m1": 1.00, "m2": 1.00, "m4": 2.00, "m8": 4.00}, 714),
    *_rows("vmv1r.v", "{d}, v16", "32", {"m1": 2.00}, 389),
    *_rows("vmv1r.v", "{d}, v16", "8", {"m4": 2.00, "m8": 4.00}, 389),  # the same copy at another vtype
    *_rows("vadd.vv", "{d}, v16, v24, v0.t", "32", {"mf2": 1.00, "m1": 2.00, "m2": 4.00}, 190),
    # float reductions: ncnn's GRU and InnerProduct reduce inside their dot-product loops at m8 (nsnet2 on zvl256b:
    # 75 % of its est. cycles), IREE's softmax and normalizations reduce too; unordered and ordered
    *_rows("vfredusum.vs", "{d}, v16, v24", "32", {"mf2": 5.00, "m1": 6.50, "m2": 11.00, "m4": 17.00, "m8": 54.02},
           573),
    *_rows("vfredosum.vs", "{d}, v16, v24", "32", {"mf2": 8.00, "m1": 11.00, "m2": 23.00, "m4": 48.02, "m8": 192.23},
           575),
)


# Where LLVM's model of the core is known to be off and no instruction of the same operands is timed within 30 % of the
# measurement (the estimator's test for these is an expected failure that says why; it turns into a failure, XPASS, the
# day llvm-mca's model is fixed; the marks on cells, measure/caveats.py, look for them at their LMUL whatever the SEW,
# except where a stand-in reads them). The others are read through their stand-ins (config/cores.py: Core.stand_ins) and
# their rows here are held to rvv-bench like any other: vmacc.vv at m4 and m8 (as vfmacc.vv), vmv1r.v (vmv.v.v at LMUL
# 1), vmv.s.x and vfmv.s.f up to m4 (the splats; vmv.s.x at SEW 64 as the splat at e32,mf2), vslideup.vi at m1
# (vrgather.vi), vsseg2e32.v at mf2 and m4 (vse32.v of the same bytes).
MODEL_ERRORS = {
    **{("spacemit-x60", f"vlseg2e32.v-e32{lmul}"): f"LLVM 22's X60 model gives vlseg2e32.v {model} cycles at {lmul} "
       f"(rvv-bench: {measured}): two-field segment loads are estimated {model / measured:.2f}x slow, and the "
       f"unit-stride load of the same bytes is timed {whole} (no stand-in)"
       for lmul, model, measured, whole in (("m2", 32, 24.42, 8), ("m4", 64, 48.57, 16))},
    **{("spacemit-x60", f"vsseg2e32.v-e32{lmul}"): f"LLVM 22's X60 model gives vsseg2e32.v {model} cycles at {lmul} "
       f"(rvv-bench: {measured:.2f}): two-field segment stores are estimated {model / measured:.1f}x slow, and the "
       f"unit-stride store of the same bytes is timed {whole} ({100 * (whole / measured - 1):+.0f} %: no stand-in)"
       for lmul, model, measured, whole in (("m1", 16, 6.07, 4), ("m2", 32, 12.00, 8))},
    ("spacemit-x60", "vfredusum.vs-e32mf2"): "LLVM 22's X60 model gives vfredusum.vs 8 cycles at mf2 (rvv-bench: 5.00; "
    "from m1 up within 30 %, at m8 57 against 54.02); vfredosum.vs and vfredmax.vs are timed 8 there too (no stand-in)",
}


@dataclass(frozen=True)
class InstructionCalibration:
    """The estimator's cycles per instruction beside the measured ones."""

    timing: InstructionTiming
    estimated: float
    llvm_mca: str

    @property
    def error_percent(self) -> float:
        return round(100 * (self.estimated / self.timing.cycles - 1), 1)

    def as_json(self) -> dict[str, object]:
        t = self.timing
        instruction = t.mnemonic + (" (masked)" if t.name.endswith("-masked") else "")
        row: dict[str, object] = {"core": t.core, "instruction": instruction, "sew": int(t.sew), "lmul": t.lmul,
                                  "measured": t.cycles, "estimated": round(self.estimated, 3),
                                  "error_percent": self.error_percent, "source": t.source, "llvm_mca": self.llvm_mca}
        if stand_in := CORES[t.core].stand_in(t.mnemonic, t.sew, t.lmul):  # what the estimator read it as
            row["stand_in"] = stand_in
        return row


def calibrate(timings: tuple[InstructionTiming, ...], store: Store) -> list[InstructionCalibration]:
    """Each published timing's block through the estimator (one llvm-mca input per core, cached)."""
    llvm_mca = mca_version(find_mca())
    found = []
    for core in dict.fromkeys(t.core for t in timings):
        chosen = [t for t in timings if t.core == core]
        cycles, _, _ = block_cycles([t.block() for t in chosen], CORES[core], store)
        found += [InstructionCalibration(t, cycles[t.block()] / COPIES, llvm_mca) for t in chosen]
    return found
