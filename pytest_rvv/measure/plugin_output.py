"""The one reader of the QEMU plugins' output (run/rvv_counter.c, rvv_memtrace.c).

Each plugin writes a header ``<name> 1 <target>`` and one line per record, its kind first; every plugin writes the
translated blocks it saw the same way: ``tb <vaddr hex> <insns> <execs> <varith> <vmem> <vset> [<first bytes hex>]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from pytest_rvv.base.errors import RvvError


class Block(NamedTuple):
    """One translated block: where, how long, how often it ran, its RVV class counts, first bytes (a named tuple: a
    run's output holds tens of thousands, made in a third of a frozen dataclass's time)."""

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
    """A ``tb`` record's block (a ValueError for a line cut short, as for one that does not parse)."""
    if len(fields) < 7:
        raise ValueError(f"a tb record has 7 or 8 fields: {' '.join(fields)}")
    return Block(int(fields[1], 16), int(fields[2]), int(fields[3]), int(fields[4]), int(fields[5]), int(fields[6]),
                 bytes.fromhex(fields[7]) if len(fields) > 7 else b"")  # by index: millions per rerun
