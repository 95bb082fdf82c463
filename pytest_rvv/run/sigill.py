"""Naming the instruction behind a SIGILL under QEMU, and the extension the emulated CPU lacks for it.

A run killed by SIGILL is run once more with QEMU's logging, ``-d in_asm,strace -D FILE`` (QEMU 10.0.2, measured):
strace ends with ``--- SIGILL {si_signo=SIGILL, si_code=1, si_addr=0x...} ---``, the faulting address, and in_asm
logs every translated block with each instruction's word (``0xabaaf8f4:  00081787  flh fa5,0(a6)``); the faulting
block is the last one logged. On a small f16 module the rerun took 0.3 s (0.1 s without the log) and logged 4 MB.

llvm-mc-22 then decodes the word with the extensions the QEMU CPU enables (``targets.qemu_cpu_extensions``) and with
each of the target's other extensions added in turn: the one that makes it decode is the extension the CPU lacks. A
word that decodes with what the CPU enables traps for its operands (an f16 vector op at SEW=16 needs Zvfh, not V):
then the target's extensions the CPU lacks are the candidates.
"""

from __future__ import annotations

import collections
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_rvv.base.process import run_process
from pytest_rvv.base.tools import find_executable
from pytest_rvv.config.targets import QEMU_KNOWN, QEMU_MEASURED, QEMU_OFF_BY_DEFAULT, Target, qemu_cpu_extensions

LLVM_MC = "llvm-mc-22"
LOG_OPTIONS = ("-d", "in_asm,strace")
_SIGILL = re.compile(r"^--- SIGILL \{.*\bsi_addr=(0x[0-9a-fA-F]+)")
_INSN = re.compile(r"^0x([0-9a-fA-F]+):\s+([0-9a-fA-F]{4}(?:[0-9a-fA-F]{4})?)\b\s*(.*)$")
_LAST_BLOCKS = 4096  # instruction lines kept while reading the log (a block is at most 512 instructions)


@dataclass(frozen=True)
class IllegalInstruction:
    """The instruction a SIGILL stopped at, and which extension it needs that the QEMU CPU lacks."""

    address: int
    word: int
    size: int  # 2 (compressed) or 4 bytes
    qemu_text: str  # QEMU's own disassembly of it
    text: str | None = None  # llvm-mc's, when LLVM decodes it with some extension set
    needs: str | None = None  # the extension that makes LLVM decode it (the CPU does not enable it)
    lacking: tuple[str, ...] = ()  # it decodes with what the CPU enables: the target's extensions the CPU lacks
    decoder: str | None = None  # llvm-mc's path; None when it is not installed
    tried: list[str] = field(default_factory=list, compare=False)  # decode attempts, for the details

    @property
    def shown(self) -> str:
        return self.text or self.qemu_text or f".insn {self.word:#0{2 + 2 * self.size}x}"

    def hint(self, cpu: str) -> str | None:
        """The one-line reason, or None when nothing names an extension (the generic SIGILL hint stays)."""
        where = f"{self.shown} at {self.address:#x}"
        if self.needs is not None:
            if self.needs not in QEMU_KNOWN:
                return f"{where} needs +{self.needs}, which QEMU {QEMU_MEASURED} does not have (run it on a board)"
            return (f"{where} needs +{self.needs}, which QEMU -cpu {cpu!r} does not enable (add {self.needs}=true "
                    "to emulator-cpu)")
        if self.lacking:
            named = ", ".join("+" + e for e in self.lacking)
            return (f"{where} decodes with what QEMU -cpu {cpu!r} enables, so its operands need one of the target's "
                    f"extensions the CPU lacks: {named} (add {','.join(e + '=true' for e in self.lacking)} to "
                    "emulator-cpu)")
        if self.decoder is None:
            return None
        if self.text is None:
            return (f"{where} is no instruction LLVM decodes with any extension of the target or of QEMU (a jump "
                    "into data?)")
        return None

    def details(self) -> str:
        lines = [f"--- SIGILL at {self.address:#x}: word {self.word:#0{2 + 2 * self.size}x}, QEMU disassembles "
                 f"{self.qemu_text or '?'} ---"]
        if self.decoder is None:
            lines.append(f"{LLVM_MC} not found (apt-get install llvm-22): the extension is not named")
        lines += self.tried
        return "\n".join(lines)


def rerun_for_sigill(argv: Sequence[str], log: Path, cwd: Path, timeout_s: float | None) -> tuple[int, int, str] | None:
    """Run ``argv`` (a QEMU command line whose first word is QEMU) again with ``-d in_asm,strace -D log``: the
    faulting address, instruction word and QEMU's disassembly of it, or None when the rerun does not trap the same
    way or the log does not show the instruction."""
    logged = [argv[0], *LOG_OPTIONS, "-D", str(log), *argv[1:]]
    try:
        result = run_process(logged, timeout_s=timeout_s, env={}, cwd=cwd)
        if result.signal_name != "SIGILL" or not log.is_file():
            return None
        return _find_in_log(log)
    finally:
        log.unlink(missing_ok=True)


def _find_in_log(log: Path) -> tuple[int, int, str] | None:
    recent: collections.deque[str] = collections.deque(maxlen=_LAST_BLOCKS)
    address = None
    with log.open(errors="replace") as lines:
        for line in lines:
            if line.startswith("0x"):
                recent.append(line)
            elif line.startswith("--- SIGILL") and (m := _SIGILL.match(line)):
                address = int(m.group(1), 16)
    if address is None:
        return None
    found = _match(reversed(recent), address)
    if found is None:  # not in the last blocks (another thread translated since): scan the whole log
        with log.open(errors="replace") as lines:
            found = _match((line for line in lines if line.startswith("0x")), address)
    return found


def _match(lines: Iterable[str], address: int) -> tuple[int, int, str] | None:
    for line in lines:
        m = _INSN.match(line.rstrip("\n"))
        if m and int(m.group(1), 16) == address:
            return address, int(m.group(2), 16), " ".join(m.group(3).split())
    return None


def explain(address: int, word: int, qemu_text: str, target: Target, cpu: str) -> IllegalInstruction:
    """Name the extension ``word`` needs: decode it with what ``cpu`` enables, then with each missing extension."""
    size = 4 if word & 3 == 3 else 2
    mc = find_executable(LLVM_MC)
    base = IllegalInstruction(address, word, size, qemu_text, decoder=str(mc) if mc else None)
    if mc is None:
        return base
    data = word.to_bytes(size, "little")
    enabled = qemu_cpu_extensions(cpu)
    if enabled is None:  # a vendor CPU model not measured: what rv64 enables plus the properties given
        enabled = qemu_cpu_extensions(",".join(["rv64", *cpu.split(",")[1:]])) or frozenset()
    tried: list[str] = []

    def decode(extra: tuple[str, ...]) -> str | None:
        text = _decode(mc, data, sorted(enabled) + list(extra))
        tried.append(f"{LLVM_MC} with the CPU's extensions{''.join(' +' + e for e in extra)}: "
                     f"{text or 'invalid instruction encoding'}")
        return text

    text = decode(())
    lacking = tuple(e for e in target.extensions if e not in enabled)
    if text is not None:  # a vector instruction points at the vector extensions, a scalar one at the others
        vector = text.startswith("v")
        narrowed = tuple(e for e in lacking if (e == "v" or e.startswith("zv")) == vector) or lacking
        return IllegalInstruction(address, word, size, qemu_text, text, None, narrowed, str(mc), tried)
    others = tuple(e for e in QEMU_OFF_BY_DEFAULT if e not in enabled and e not in lacking)
    for pool in (lacking, others):  # the target's own extensions first, then any QEMU can enable
        decoded = [(e, t) for e in pool if (t := decode((e,))) is not None]
        if decoded:  # the narrowest one: zfhmin rather than zvfh, which brings zfhmin along
            ext, text = min(decoded, key=lambda d: len(QEMU_OFF_BY_DEFAULT.get(d[0], ())))
            return IllegalInstruction(address, word, size, qemu_text, text, ext, (), str(mc), tried)
    return IllegalInstruction(address, word, size, qemu_text, None, None, (), str(mc), tried)


def _decode(mc: Path, data: bytes, extensions: Iterable[str]) -> str | None:
    """llvm-mc's disassembly of ``data`` with ``extensions`` (``flh fa5, 0(a6)``), None when it is no instruction."""
    mattr = ",".join("+" + e for e in extensions if e != "i")
    proc = subprocess.run([str(mc), "--disassemble", "--triple=riscv64", f"--mattr={mattr}"],
                          input=" ".join(f"0x{b:02x}" for b in data), capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip() and not line.strip().startswith(".")]
    if proc.returncode != 0 or "invalid instruction encoding" in proc.stderr or not lines:
        return None
    return " ".join(lines[-1].split())
