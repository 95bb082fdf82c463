"""Which riscv64 runtime a toolchain's modules run in.

IREE's HAL module version moves between releases, so no single runtime serves every toolchain.
Per toolchain, the first of these that applies:

1. the user's runtime (``--rvv-runtime-riscv64`` for the toolchain under test,
   ``--rvv-compare-runtime-riscv64`` for the reference);
2. a cached build of the compiler's own commit;
3. a build from IREE's source at that commit (toolchain/iree_source.py);
4. the cached or buildable runtime nearest in history (by date) whose probe module loads the
   toolchain's modules: "nearest that loads".

A runtime the probe rejects is never chosen while another is acceptable. When candidates exist
and none loads, the toolchain cannot run riscv64 code: NoRuntimeLoads says so in one line.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_rvv.base.errors import RuntimeNotProvided, RvvError
from pytest_rvv.toolchain.iree_source import (
    WHERE_TO_GET_IT,
    NamedSource,
    RuntimeSource,
    SourceIndex,
    SourceNotFound,
    export_commit,
    find_sources,
    partial_clone,
    same_commit,
)
from pytest_rvv.toolchain.runtime_build import (
    BuiltRuntime,
    build_runtime,
    built_runtimes,
    cached_build,
    distance,
)
from pytest_rvv.toolchain.toolchain import Toolchain

RISCV64_HINT = (
    "build one with `bash scripts/setup.sh runtime` (from IREE's source: a git clone at the compiler's commit, "
    "or PYTEST_RVV_IREE_SRC=DIR|TARBALL), or pass --rvv-runtime-riscv64=PATH"
)
YOURS, OWN_COMMIT, BUILT_NOW, NEAREST = "yours", "the compiler's own commit", "built now from the compiler's commit", \
    "nearest that loads"

# A probe: None when the runtime runs the toolchain's probe module, else the runtime's one-line reason.
Probe = Callable[[Path], str | None]


class NoRuntimeLoads(RvvError):
    """Runtimes exist, but none loads this toolchain's modules: its riscv64 cells cannot run (an error)."""


@dataclass(frozen=True)
class RuntimeChoice:
    """The riscv64 runtime chosen for one toolchain, how, and the candidates the probe rejected."""

    executable: Path
    commit: str | None
    how: str  # YOURS, OWN_COMMIT, BUILT_NOW or NEAREST
    origin: str
    rejected: tuple[str, ...] = ()

    def describe(self) -> str:
        """For the session header: where it is from and why this one."""
        commit = f"IREE {self.commit[:12]}" if self.commit else "unknown commit"
        line = f"{self.executable}, {self.origin}" if self.how == YOURS else \
            f"{self.executable}, built by pytest-rvv from {commit} ({self.how})"
        if self.rejected:
            line += f"; rejected: {'; '.join(self.rejected)}"
        return line


def _source_index(source: NamedSource | None) -> SourceIndex | None:
    return _sources_at(source.location, source.origin) if source is not None else None


@functools.cache
def _sources_at(location: str, origin: str) -> SourceIndex | None:
    """The sources at one location, scanned once per process."""
    return find_sources(location, origin)


def choose_riscv64(toolchain: Toolchain, tools_dir: Path, probe: Probe, user: Path | None = None,
                   user_origin: str = "user-supplied", source: NamedSource | None = None,
                   log: Callable[[str], None] = lambda line: None, network: bool = False) -> RuntimeChoice:
    """The riscv64 runtime ``toolchain`` runs with (the order in the module docstring).

    ``source``: IREE's source as the user named it, handed in (each toolchain of a run is handed its own);
    ``network``: without it, a partial clone of IREE in ``tools_dir`` may be made.

    RuntimeNotProvided (a skip) when there is no runtime and no source at all; NoRuntimeLoads (an
    error, one line) when runtimes exist and the probe rejects every one.
    """
    if user is not None:
        return RuntimeChoice(user, None, YOURS, f"{user_origin} {user}")
    commit = toolchain.commit
    if own := cached_build(tools_dir, commit):
        return RuntimeChoice(own.executable, own.commit, OWN_COMMIT, own.origin)
    index = _source_index(source)
    rejected: list[str] = []
    unavailable = ""  # why the compiler's own commit could not be had: said only if no other runtime loads
    if commit is not None:
        try:
            own_source = _own_source(index, commit, tools_dir, network)
        except SourceNotFound as exc:  # a clone without the commit, no network: the nearest may serve
            unavailable = str(exc).removeprefix("no IREE source: ").split(f"; {WHERE_TO_GET_IT}")[0]
            own_source = None
        if own_source is not None:
            built = _build(own_source, tools_dir, log, rejected)
            if built is not None:
                return RuntimeChoice(built.executable, built.commit, BUILT_NOW, built.origin)
    candidates = _candidates(tools_dir, index, toolchain)
    if not candidates and not rejected:
        raise RuntimeNotProvided(f"no riscv64 IREE runtime: {RISCV64_HINT}"
                                 + (f" (IREE {commit[:12]}'s source: {unavailable})" if unavailable and commit else ""))
    for candidate in candidates:
        built = candidate if isinstance(candidate, BuiltRuntime) else _build(candidate, tools_dir, log, rejected)
        if built is None:
            continue
        reason = probe(built.executable)
        if reason is None:
            return RuntimeChoice(built.executable, built.commit, NEAREST, built.origin, tuple(rejected))
        rejected.append(f"IREE {built.commit_text}: {reason}")
    where = index.describe() if index is not None else "no PYTEST_RVV_IREE_SRC"
    raise NoRuntimeLoads(
        f"no riscv64 runtime loads the modules of {toolchain.compiler_version}: tried "
        f"{'; '.join(rejected) or 'none'}; give IREE's source at {commit[:12] if commit else 'its commit'} "
        f"({where}): {WHERE_TO_GET_IT}, or pass --rvv-runtime-riscv64"
        + (f" (its own source: {unavailable})" if unavailable else ""))


def _own_source(index: SourceIndex | None, commit: str, tools_dir: Path, network: bool) -> RuntimeSource | None:
    workdir = Path(tempfile.gettempdir()) / f"pytest-rvv-iree-src-{commit[:12]}"
    if index is not None:
        return None if index.single else index.for_commit(commit, workdir)
    if not network:
        return None
    return export_commit(partial_clone(tools_dir / "iree-git"), commit, workdir)


def _build(source: RuntimeSource, tools_dir: Path, log: Callable[[str], None],
           rejected: list[str]) -> BuiltRuntime | None:
    name = source.commit[:12] if source.commit else source.path.name
    log(f"building the riscv64 runtime from IREE {name} ({source.origin})")
    try:
        built, _ = build_runtime(source, tools_dir, log=log)
    except RvvError as exc:  # BuildFailed, or a source that is not what it says
        rejected.append(f"IREE {name}: its build failed ({str(exc).splitlines()[0]})")
        return None
    return built


def _candidates(tools_dir: Path, index: SourceIndex | None,
                toolchain: Toolchain) -> list[BuiltRuntime | RuntimeSource]:
    """Cached builds and buildable sources, one per commit (a build wins over its source), nearest first."""
    builds = sorted(built_runtimes(tools_dir), key=lambda b: -b.built)
    chosen: list[BuiltRuntime | RuntimeSource] = []
    for build in builds:
        if not any(isinstance(c, BuiltRuntime) and same_commit(c.commit, build.commit) and build.commit
                   for c in chosen):
            chosen.append(build)
    for source in index.others() if index is not None else []:
        if not any(same_commit(c.commit, source.commit) for c in chosen):
            chosen.append(source)
    dated = {s.commit: s.date for s in (index.others() if index is not None else []) if s.commit and s.date}

    def date(candidate: BuiltRuntime | RuntimeSource) -> float | None:
        """A build's own date, else its source's (builds from before dates were recorded)."""
        return candidate.date or next((d for c, d in dated.items() if same_commit(c, candidate.commit)), None)

    return sorted(chosen, key=lambda c: (distance(date(c), toolchain.date),
                                         -(c.built if isinstance(c, BuiltRuntime) else 0)))
