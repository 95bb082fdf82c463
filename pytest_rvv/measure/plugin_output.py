"""The one reader of the QEMU plugins' output (run/rvv_counter.c, rvv_memtrace.c).

Each plugin writes a header ``<name> 1 <target>`` and one line per record, its kind first; every plugin writes the
translated blocks it saw the same way: ``tb <vaddr hex> <insns> <execs> <varith> <vmem> <vset> [<first bytes hex>]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import RvvError


@dataclass(frozen=True)
class Block:
    """One translated block: where, how long, how often it ran, its RVV class counts, first bytes."""

    vaddr: int
    n_insns: int
    execs: int
    varith: int
    vmem: int
    vset: int
    head: bytes


def records(text: str, source: Path, plugin: str) -> tuple[str, Iterator[list[str]]]:
    """The target the plugin named in its header, and the fields of each record line after it; one line naming
    ``source`` when the text is not ``plugin``'s output."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(f"{plugin} 1 "):
        raise RvvError(f"{source}: not {plugin.replace('-', '_')} output (did QEMU load the plugin and exit "
                       "normally?)")
    return lines[0].split()[2], (line.split() for line in lines[1:] if line.strip())


def block(fields: list[str]) -> Block:
    """A ``tb`` record's block."""
    _, vaddr, n_insns, execs, varith, vmem, vset, *head = fields  # unpacked, not a generator: millions per rerun
    return Block(int(vaddr, 16), int(n_insns), int(execs), int(varith), int(vmem), int(vset),
                 bytes.fromhex(head[0]) if head else b"")
