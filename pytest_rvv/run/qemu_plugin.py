"""Building the rvv_counter QEMU plugin (C) on first use, into the cache."""

from __future__ import annotations

from pathlib import Path

from pytest_rvv.base.cbuild import build_c
from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Store
from pytest_rvv.run.qemu import Qemu

SOURCES = ("rvv_counter.c", "qemu_plugin_api.h", "rvv_blocks.h")
PLUGIN_API_VERSION = 3  # what rvv_counter.c declares; QEMU 9.1+ offers it


def build_plugin(store: Store) -> Path:
    """Compile rvv_counter.c with the system C compiler (cached by source and compiler version)."""
    return build_c(store, "pytest_rvv.run", SOURCES, "rvv_counter.so", shared=True)


def check_plugin_support(qemu: Qemu) -> None:
    """One clear line when this QEMU cannot load plugins at all."""
    if qemu.version < (9, 1):
        raise ToolMissing(f"{qemu.path} is QEMU {qemu.version_text}; executed-instruction counts need "
                          f"plugin API {PLUGIN_API_VERSION} (QEMU >= 9.1): run 'bash scripts/setup.sh qemu'")
    if not qemu.supports_plugins:
        raise ToolMissing(f"{qemu.path} cannot load TCG plugins (a static build, like Debian's qemu-user): "
                          "run 'bash scripts/setup.sh qemu' for a plugin-capable QEMU 10.0.2, or --rvv-qemu-dir")


def plugin_option(plugin: Path, out: Path, elements: bool) -> tuple[str, str]:
    return ("-plugin", f"{plugin},out={out},elements={'on' if elements else 'off'}")


MEMTRACE_SOURCES = ("rvv_memtrace.c", "qemu_plugin_api.h", "qemu_plugin_mem_api.h", "rvv_blocks.h")


def build_memtrace_plugin(store: Store) -> Path:
    """Compile rvv_memtrace.c (memory traffic and a cache model per instruction), cached like the counter."""
    return build_c(store, "pytest_rvv.run", MEMTRACE_SOURCES, "rvv_memtrace.so", shared=True)


def memtrace_option(plugin: Path, out: Path, cache: tuple[int, int, int, int, int] | None,
                    per_element: bool = False) -> tuple[str, str]:
    """The -plugin argument of a traced run; ``cache``: L1 sets, L1 ways, L2 sets, L2 ways, line bytes;
    ``per_element``: every access reported by QEMU one element at a time (slow; what the fast path must equal)."""
    argument = f"{plugin},out={out}"
    if cache is not None:
        argument += ",cache=" + ":".join(str(v) for v in cache)
    if per_element:
        argument += ",per-element=on"
    return ("-plugin", argument)
