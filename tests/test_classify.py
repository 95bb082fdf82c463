"""Instruction classes: every RVV 1.0 instruction family lands in the class the gate relies on."""

import pytest

from pytest_rvv.measure.classify import classify_aarch64, classify_riscv


@pytest.mark.parametrize(("mnemonic", "expected"), [
    ("vsetvli", ("vector_config", "vset")),
    ("vsetivli", ("vector_config", "vset")),
    ("vsetvl", ("vector_config", "vset")),
    ("vle32.v", ("vector_memory", "unit_stride")),
    ("vle8ff.v", ("vector_memory", "unit_stride")),
    ("vse64.v", ("vector_memory", "unit_stride")),
    ("vlse32.v", ("vector_memory", "strided")),
    ("vsse16.v", ("vector_memory", "strided")),
    ("vluxei32.v", ("vector_memory", "indexed")),
    ("vsoxei64.v", ("vector_memory", "indexed")),
    ("vlseg4e32.v", ("vector_memory", "segment")),
    ("vssseg2e8.v", ("vector_memory", "segment")),
    ("vl4r.v", ("vector_memory", "whole_register")),
    ("vl2re32.v", ("vector_memory", "whole_register")),
    ("vs8r.v", ("vector_memory", "whole_register")),
    ("vlm.v", ("vector_memory", "mask")),
    ("vfmacc.vf", ("vector_arith", "float")),
    ("vfneg.v", ("vector_arith", "float")),
    ("vfnmsac.vv", ("vector_arith", "float")),
    ("vfredusum.vs", ("vector_arith", "reduction")),
    ("vwredsum.vs", ("vector_arith", "reduction")),
    ("vslideup.vi", ("vector_arith", "permutation")),
    ("vrgather.vv", ("vector_arith", "permutation")),
    ("vcompress.vm", ("vector_arith", "permutation")),
    ("vmv.v.x", ("vector_arith", "permutation")),
    ("vmv4r.v", ("vector_arith", "permutation")),
    ("vfmv.f.s", ("vector_arith", "permutation")),
    ("vmerge.vvm", ("vector_arith", "permutation")),
    ("vmseq.vi", ("vector_arith", "mask")),
    ("vmflt.vf", ("vector_arith", "mask")),
    ("vmand.mm", ("vector_arith", "mask")),
    ("vcpop.m", ("vector_arith", "mask")),
    ("vid.v", ("vector_arith", "mask")),
    ("vwadd.vv", ("vector_arith", "widening_narrowing")),
    ("vfwmacc.vf", ("vector_arith", "widening_narrowing")),
    ("vnsrl.wi", ("vector_arith", "widening_narrowing")),
    ("vfncvt.f.f.w", ("vector_arith", "widening_narrowing")),
    ("vsext.vf4", ("vector_arith", "widening_narrowing")),
    ("vadd.vv", ("vector_arith", "integer")),
    ("vmul.vx", ("vector_arith", "integer")),
    ("vmacc.vv", ("vector_arith", "integer")),
    ("vmax.vv", ("vector_arith", "integer")),
    ("vnmsac.vv", ("vector_arith", "integer")),
    ("vsll.vi", ("vector_arith", "integer")),
    ("vneg.v", ("vector_arith", "integer")),
    ("add", ("scalar", "scalar")),
    ("fmadd.s", ("scalar", "scalar")),
    ("flw", ("scalar", "scalar")),
])
def test_riscv_mnemonic_classes(mnemonic, expected):
    assert classify_riscv(mnemonic) == expected


@pytest.mark.parametrize(("mnemonic", "operands", "cls"), [
    ("fmla", "v0.4s, v1.4s, v2.s[0]", "vector_arith"),
    ("mov", "v3.16b, v4.16b", "vector_arith"),
    ("ldr", "q0, [x1, #16]", "vector_memory"),
    ("ld1", "{v0.4s, v1.4s}, [x2]", "vector_memory"),
    ("ld1w", "{z0.s}, p0/z, [x0]", "vector_memory"),
    ("whilelo", "p0.s, x1, x2", "vector_config"),
    ("fadd", "s0, s1, s2", "scalar"),
    ("ldr", "x0, [sp]", "scalar"),
    ("add", "x0, x1, #1", "scalar"),
])
def test_aarch64_classes_follow_vector_register_operands(mnemonic, operands, cls):
    assert classify_aarch64(mnemonic, operands)[0] == cls
