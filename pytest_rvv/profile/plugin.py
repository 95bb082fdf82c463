"""Building the rvv_counter QEMU plugin (C) on first use, into the cache."""

from __future__ import annotations

import shutil
from importlib.resources import files
from pathlib import Path

from pytest_rvv.errors import ToolMissing
from pytest_rvv.process import run_process
from pytest_rvv.run.qemu import Qemu
from pytest_rvv.store import Store, digest
from pytest_rvv.tools import version_output

SOURCES = ("rvv_counter.c", "qemu_plugin_api.h")
PLUGIN_API_VERSION = 3  # what rvv_counter.c declares; QEMU 9.1+ offers it


def build_plugin(store: Store) -> Path:
    """Compile rvv_counter.c with the system C compiler (cached by source and compiler version)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ToolMissing("no C compiler to build the QEMU counting plugin: apt-get install gcc")
    package = files("pytest_rvv.profile")
    texts = {name: package.joinpath(name).read_text() for name in SOURCES}
    key = digest(["rvv-counter-v1", version_output(Path(cc)), *(texts[n] for n in SOURCES)])

    def build(tmp: Path) -> dict[str, object]:
        work = tmp / ".src"
        work.mkdir()
        for name, text in texts.items():
            (work / name).write_text(text)
        result = run_process([cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", tmp / "rvv_counter.so",
                              work / "rvv_counter.c"], timeout_s=300)
        shutil.rmtree(work)
        if not result.ok:
            raise ToolMissing(f"building the QEMU counting plugin failed: {result.stderr.strip()[:300]}")
        return {"cc": cc}

    return store.get_or_build("plugins", key, build).file("rvv_counter.so")


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
