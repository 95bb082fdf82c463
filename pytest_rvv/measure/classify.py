"""Instruction classes for RISC-V (RVV 1.0) and AArch64 (NEON/SVE) mnemonics.

Every instruction gets a class and a subclass:

- ``vector_config``: RVV ``vset*`` (SVE predicate set-up on AArch64);
- ``vector_memory``: unit-stride, strided, indexed, segment, mask and whole-register loads and
  stores (whole-register ones are usually register spills);
- ``vector_arith``: every other vector instruction, subclassed as reduction, permutation (slides,
  gathers, compress, moves, merges), mask, widening/narrowing, float or integer;
- ``scalar``: everything else.
"""

from __future__ import annotations

import re
from functools import cache

SCALAR = "scalar"
VECTOR_ARITH = "vector_arith"
VECTOR_MEMORY = "vector_memory"
VECTOR_CONFIG = "vector_config"
CLASSES = (VECTOR_ARITH, VECTOR_MEMORY, VECTOR_CONFIG, SCALAR)
VECTOR_CLASSES = (VECTOR_ARITH, VECTOR_MEMORY, VECTOR_CONFIG)

_EEW = r"(?:8|16|32|64)"
_RVV_MEMORY = [
    ("whole_register", re.compile(rf"^v(?:l[1248]re{_EEW}|l[1248]r|s[1248]r)\.v$")),
    ("mask", re.compile(r"^v[ls]m\.v$")),
    ("segment", re.compile(rf"^v(?:lseg[2-8]e{_EEW}(?:ff)?|lsseg[2-8]e{_EEW}|l[ou]xseg[2-8]ei{_EEW}|"
                           rf"sseg[2-8]e{_EEW}|ssseg[2-8]e{_EEW}|s[ou]xseg[2-8]ei{_EEW})\.v$")),
    ("strided", re.compile(rf"^v[ls]se{_EEW}\.v$")),
    ("indexed", re.compile(rf"^v[ls][ou]xei{_EEW}\.v$")),
    ("unit_stride", re.compile(rf"^v(?:le{_EEW}(?:ff)?|se{_EEW})\.v$")),
]
_RVV_ARITH = [
    ("reduction", re.compile(r"^v(?:f?w?red)")),
    ("permutation", re.compile(r"^v(?:slide|rgather|compress|mv|fmv|merge|fmerge)")),
    ("mask", re.compile(r"^v(?:m(?!ul|ax|in|acc|add|sac|adc|sbc)|cpop|firstm|first|id\.|iota)")),
    ("widening_narrowing", re.compile(r"^v(?:f?w|nsr[la]|nclipu?\.|f?ncvt|[zs]ext)")),
    ("float", re.compile(r"^vf")),
]


@cache
def classify_riscv(mnemonic: str) -> tuple[str, str]:
    """(class, subclass) of one RISC-V mnemonic as printed by objdump."""
    m = mnemonic.lower()
    if not m.startswith("v"):
        return SCALAR, SCALAR
    if m.startswith("vset"):
        return VECTOR_CONFIG, "vset"
    for subclass, pattern in _RVV_MEMORY:
        if pattern.match(m):
            return VECTOR_MEMORY, subclass
    for subclass, pattern in _RVV_ARITH:
        if pattern.match(m):
            return VECTOR_ARITH, subclass
    return VECTOR_ARITH, "integer"


_A64_VECTOR_OPERAND = re.compile(r"(?:^|[\s,{\[])(?:v\d+\.|v\d+$|q\d+|z\d+\.|z\d+|p\d+[./,]|p\d+$)")
_A64_MEMORY = re.compile(r"^(?:ld|st)")
_A64_SVE_CONFIG = re.compile(r"^(?:ptrue|pfalse|whilel[eot]|whileh[is]|setffr|rdvl|cnt[bhwd]|inc[bhwd]|dec[bhwd])")


def classify_aarch64(mnemonic: str, operands: str) -> tuple[str, str]:
    """(class, subclass) of one AArch64 instruction: NEON/SVE when an operand is a vector register."""
    m = mnemonic.lower()
    if _A64_SVE_CONFIG.match(m):
        return VECTOR_CONFIG, "sve_config"
    if not _A64_VECTOR_OPERAND.search(operands.lower()):
        return SCALAR, SCALAR
    if _A64_MEMORY.match(m):
        return VECTOR_MEMORY, "sve" if re.search(r"z\d+\.", operands) else "neon"
    return VECTOR_ARITH, "sve" if re.search(r"z\d+\.", operands) else "neon"
