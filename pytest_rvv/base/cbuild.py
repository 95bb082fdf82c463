"""Building the project's small C helpers (QEMU plugin, RSS probe; the riscv64 facts probe) on first use, into the
cache."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store, digest
from pytest_rvv.base.tools import find_executable, version_output

_BUILT: dict[tuple[object, ...], Path] = {}  # this process's builds (asked at every run)
_PACKAGES = {"cc": "gcc", "g++": "g++"}  # the Debian package of a compiler
Prepare = Callable[[Path], list[str]]  # puts what a build needs into its folder; gives the compiler flags to find it


def build_c(store: Store, package: str, sources: tuple[str, ...], output: str, *, shared: bool,
            compiler: str = "cc", flags: tuple[str, ...] = (), libraries: tuple[str, ...] = (),
            prepare: Prepare | None = None, depends: tuple[str, ...] = ()) -> Path:
    """Compile ``sources`` (the first is the one compiled) from ``package`` with ``compiler`` (the system C compiler
    by default), ``flags`` before the source and ``libraries`` after it; ``prepare`` runs first in the build folder.

    Cached by the sources' text, the compiler's version and ``depends`` (what else the result depends on); a build
    that cannot be made is one clear line (ToolMissing). A process asks the store once per helper (while the file is
    there)."""
    asked = (str(store.root), package, sources, output, shared, compiler, flags, libraries, depends)
    known = _BUILT.get(asked)
    if known is not None and known.is_file():
        return known
    _BUILT[asked] = built = _build_c(store, package, sources, output, shared, compiler, flags, libraries, prepare,
                                     depends)
    return built


def first_error(stderr: str) -> str:
    """A compiler's complaint as one line, 300 characters: its first error, else the linker's, else its first line."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("collect2")]
    found = next((line for line in lines if "error" in line or "ld:" in line), lines[0] if lines else "no message")
    return " ".join(found.split())[:300]


def _build_c(store: Store, package: str, sources: tuple[str, ...], output: str, shared: bool, compiler: str,
             flags: tuple[str, ...], libraries: tuple[str, ...], prepare: Prepare | None,
             depends: tuple[str, ...]) -> Path:
    cc = shutil.which(compiler) or (shutil.which("gcc") if compiler == "cc" else None)
    if cc is None:
        raise ToolMissing(f"no {compiler} to build {output}: apt-get install {_PACKAGES.get(compiler, compiler)}")
    texts = {name: files(package).joinpath(name).read_text() for name in sources}
    extra = [repr((flags, libraries, depends))] if flags or libraries or depends else []  # C helpers: their first keys
    key = digest(["c-build-v1", output, str(shared), version_output(Path(cc)), *(texts[n] for n in sources), *extra])
    shape = ["-shared", "-fPIC"] if shared else []
    return _compiled(store, key, texts, output, output,
                     lambda work, found: [cc, *shape, "-O2", "-Wall", *flags, *found, "-o", work.parent / output,
                                          work / sources[0], *libraries],
                     {"cc": cc, **({"depends": list(depends)} if depends else {})}, prepare)


def build_riscv64_static(store: Store, source: str, output: str, purpose: str, march: str = "rv64gc") -> Path:
    """``source`` (C) as a static riscv64 Linux program for ``march`` (rv64gc by default: it runs on any riscv64
    machine), cross-built with clang-22 once per source and compiler; ``purpose`` names it in the one line a missing
    tool gives."""
    clang = find_executable("clang-22")
    if clang is None:
        raise ToolMissing(f"clang-22 not found (it builds {purpose}): apt-get install clang-22 "
                          "(or bash scripts/setup.sh system)")
    key = digest(["riscv64-static-v1", output, source, version_output(clang), *([march] if march != "rv64gc" else [])])
    return _compiled(store, key, {f"{output}.c": source}, output, purpose,
                     lambda work, _: [str(clang), "--target=riscv64-linux-gnu", f"-march={march}", "-O2", "-static",
                                      "-o", work.parent / output, work / f"{output}.c"],
                     {"clang": str(clang)}, hint=" (apt-get install libc6-dev-riscv64-cross)")


def _compiled(store: Store, key: str, texts: dict[str, str], output: str, what: str,
              command: Callable[[Path, list[str]], list[str | Path]], meta: dict[str, object],
              prepare: Prepare | None = None, hint: str = "") -> Path:
    """The ``c-builds`` entry ``key``: ``texts`` written into a build folder (after ``prepare``), ``command`` (given
    that folder and the flags ``prepare`` gave) run there to write ``output`` beside it; its failure is one line naming
    ``what``, and leaves no entry."""

    def build(tmp: Path) -> dict[str, object]:
        work = tmp / ".src"
        work.mkdir()
        try:
            found = prepare(work) if prepare else []
            for name, text in texts.items():
                (work / name).write_text(text)
            result = run_process(command(work, found), timeout_s=600)
        finally:
            shutil.rmtree(work)
        if not result.ok:
            raise ToolMissing(f"building {what} failed: {first_error(result.stderr)}{hint}")
        return meta

    return store.get_or_build("c-builds", key, build).file(output)
