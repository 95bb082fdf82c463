"""A peer's riscv64 build from Debian 13 (trixie) main: a private sysroot in the tools cache, one per recipe.

No registry ships ONNX Runtime, OpenBLAS or ggml for riscv64 as a wheel, but Debian does as packages. A
``SysrootRecipe`` names the packages (the peer's library and its headers), the file the peer loads and the header
its harness is built against. This fetches them and their riscv64 dependencies with a private apt configuration (its
own sources list naming trixie with ``[arch=riscv64]``, its own lists, cache and state folders; the system's apt
state and packages stay as they are), unpacks them with ``dpkg -x`` into a staging folder, adds the ``lib ->
usr/lib`` link the dynamic loader's path needs, writes a marker listing every file (size, sha256) last, and renames
the folder into place: ``<tools>/<recipe.folder>/``, which ``qemu-riscv64 -L`` takes as the guest's root.

A second call verifies the marker against the files and fetches nothing; a folder that fails verification (a
file deleted, truncated or changed, no marker: a fetch killed midway) is moved aside and fetched again, never
used. Without network access the fetch is one line (``SysrootUnavailable``) and nothing is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from pytest_rvv.base.errors import ToolMissing, first_lines
from pytest_rvv.base.process import ProcessResult, run_process
from pytest_rvv.base.store import content_sha, storage_fault
from pytest_rvv.config.cores import CORES, cache_hierarchy, memory_timings
from pytest_rvv.config.settings import DEBIAN_MIRROR_ENV as MIRROR_ENV
from pytest_rvv.config.settings import default_tools_dir, environment

SUITE = "trixie"  # Debian 13, the default; a recipe may name another (ggml is in unstable only)
ARCH = "riscv64"
MIRROR = "http://deb.debian.org/debian"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
MARKER = ".pytest-rvv-sysroot.json"
# in every sysroot: an empty loader cache of the guest's own. Without one the riscv64 loader reads the host's
# /etc/ld.so.cache (qemu -L finds none under the root), and a library installed on the host moved a peer's work per call
GUEST_FILES = (("etc/ld.so.cache", ""),)
LIBDIR = "usr/lib/riscv64-linux-gnu"
APT_TIMEOUT_S = 600.0
TOOLS_FIX = "set PYTEST_RVV_TOOLS_DIR to a writable folder"


class SysrootUnavailable(ToolMissing):
    """A peer's riscv64 sysroot could not be fetched (no network, no mirror, apt missing): one line."""


@dataclass(frozen=True)
class SysrootRecipe:
    """What one peer's sysroot holds: Debian packages (with their dependencies), the library the harness loads and
    the header it is built against, and the upstream version the harness is written for."""

    peer: str  # "ONNX Runtime", "OpenBLAS": the peer's name in messages
    slug: str  # the folder's stem: "onnxruntime", "openblas"
    version: str  # upstream version the harness is written for: "1.21.0"
    package: str  # the library's Debian package, whose version is checked
    packages: tuple[str, ...]  # what is fetched (their dependencies too)
    library: str  # the file the harness loads, relative to the root
    header: str  # the header the harness includes, relative to the root ("": the harness declares what it calls)
    recipe: str  # the marker's recipe id (a new id fetches again)
    built_for: str = "rv64gc"  # what Debian builds it for (its code may pick RVV kernels at run time)
    suite: str = SUITE  # the Debian suite it comes from
    # (path, text) written into the root beside the packages: a guest path there shadows the host's (qemu -L), e.g.
    # a fixed /proc/self/status where the peer parses the emulator's own, which differs from run to run
    files: tuple[tuple[str, str], ...] = ()

    @property
    def folder(self) -> str:
        return f"{self.slug}-riscv64-{self.version}"

    @property
    def setup_hint(self) -> str:
        return "then run 'bash scripts/setup.sh peers'"


def guest_cpu_files(core: str = "spacemit-x60") -> tuple[tuple[str, str], ...]:
    """A fixed /sys/devices/system/cpu for a peer's sysroot: the modelled part's (qemu -L shadows the host's).

    Under qemu-user the guest reads the host's sysfs, and a peer that sizes its work by the caches it finds does other
    work on another machine: ncnn reads the L2 and L3 sizes (and the CPUs' count, clock and siblings), and its work per
    call on nsnet2 moved by 733k instructions (-0.06 %) between a 2-core AMD EPYC and a 2-core Intel Xeon. So the guest
    sees the part the estimate models: its harts, each with its L1 data cache (and an L1 instruction cache of the same
    size), its L2 shared by a cluster (config/cores.py), its clock, and no L3 (an index3 of size 0K: the host's cannot
    be hidden, only shadowed); and a fixed vm.overcommit_memory."""
    part, caches, memory = CORES[core], cache_hierarchy(core), memory_timings(core)
    harts, cluster = part.harts or 1, memory.cluster
    khz = str(round(part.ghz * 1e6))
    files = [("sys/devices/system/cpu/possible", f"0-{harts - 1}\n"), ("sys/devices/system/cpu/online",
                                                                       f"0-{harts - 1}\n"),
             ("sys/devices/system/cpu/present", f"0-{harts - 1}\n"), ("proc/sys/vm/overcommit_memory", "0\n")]
    for cpu in range(harts):
        mask = sum(1 << c for c in range(cpu - cpu % cluster, min(harts, cpu - cpu % cluster + cluster)))
        base = f"sys/devices/system/cpu/cpu{cpu}"
        for index, (level, kind, size, shared) in enumerate((
                (1, "Data", caches.l1d.size, 1 << cpu), (1, "Instruction", caches.l1d.size, 1 << cpu),
                (2, "Unified", caches.l2.size, mask), (3, "Unified", 0, (1 << harts) - 1))):
            files += [(f"{base}/cache/index{index}/level", f"{level}\n"), (f"{base}/cache/index{index}/type",
                                                                           f"{kind}\n"),
                      (f"{base}/cache/index{index}/size", f"{size // 1024}K\n"),
                      (f"{base}/cache/index{index}/shared_cpu_map", f"{shared:x}\n")]
        files += [(f"{base}/cpufreq/cpuinfo_max_freq", f"{khz}\n"), (f"{base}/cpufreq/stats/time_in_state",
                                                                     f"{khz} 0\n"),
                  (f"sys/devices/system/cpu/cpufreq/stats/cpu{cpu}/time_in_state", f"{khz} 0\n"),
                  (f"{base}/topology/thread_siblings_list", f"{cpu}\n"),
                  (f"{base}/topology/core_siblings_list", f"0-{harts - 1}\n")]
    return tuple(files)


@dataclass(frozen=True)
class PeerSysroot:
    """A verified riscv64 root holding a peer and everything it loads (``qemu-riscv64 -L path``)."""

    path: Path
    packages: dict[str, str]  # Debian package -> version
    fetched: bool  # True when this call fetched it, False when it was already there
    fetch_s: float  # how long the fetch took (when it was fetched)
    size_bytes: int
    recipe: SysrootRecipe

    @property
    def library(self) -> Path:
        return self.path / self.recipe.library

    @property
    def include(self) -> Path | None:
        """The folder of the header the harness includes (None: the harness declares what it calls)."""
        return (self.path / self.recipe.header).parent if self.recipe.header else None

    @property
    def version(self) -> str:
        return self.packages.get(self.recipe.package, "?")

    def describe(self) -> str:
        recipe = self.recipe
        return (f"{recipe.peer} {self.version} for riscv64 (Debian {recipe.suite}, {recipe.built_for}) in "
                f"{self.path} ({self.size_bytes / 1e6:.0f} MB, {len(self.packages)} packages)")


def sysroot_dir(recipe: SysrootRecipe, tools_dir: Path | None = None) -> Path:
    """Where the sysroot lives: ``<tools>/<slug>-riscv64-<version>``."""
    return (tools_dir or default_tools_dir()) / recipe.folder


def mirror() -> str:
    return environment(MIRROR_ENV) or MIRROR


def damage(path: Path) -> str | None:
    """What is wrong with the sysroot at ``path`` (one phrase), or None when every file matches its marker."""
    try:
        marker = json.loads((path / MARKER).read_text())
        files, links = marker["files"], marker["links"]
    except FileNotFoundError:
        return "no marker (an unfinished fetch)" if path.exists() else "absent"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable marker ({exc})"
    for name, target in links.items():
        try:
            if os.readlink(path / name) != target:
                return f"{name} links elsewhere"
        except OSError:
            return f"{name} is missing"
    for name, (size, sha) in files.items():
        file = path / name
        try:
            if file.is_symlink() or file.stat().st_size != size:
                return f"{name} changed size"
            if content_sha(file) != sha:
                return f"{name} changed"
        except OSError:
            return f"{name} is missing"
    return None


def cached_sysroot(recipe: SysrootRecipe, tools_dir: Path | None = None) -> PeerSysroot | None:
    """The sysroot if it is there and verifies, else None (nothing is fetched)."""
    path = sysroot_dir(recipe, tools_dir)
    if damage(path) is not None:
        return None
    marker = json.loads((path / MARKER).read_text())
    if marker.get("recipe") != recipe.recipe:  # made by another recipe (other packages): fetched again
        return None
    return PeerSysroot(path, dict(marker["packages"]), False, float(marker.get("fetch_s", 0.0)),
                       int(marker.get("size_bytes", 0)), recipe)


def prepare_sysroot(recipe: SysrootRecipe, tools_dir: Path | None = None, log=print) -> PeerSysroot:
    """The verified sysroot, fetched first when it is absent or damaged (``fetched`` says which).

    Raises SysrootUnavailable (one line: what failed and what to do) when it cannot be fetched; nothing is then
    left in the tools cache. Safe to call from several processes at once (a file lock around the fetch).
    """
    tools = tools_dir or default_tools_dir()
    found = cached_sysroot(recipe, tools)
    if found is not None:
        return found
    try:
        return _prepare(recipe, tools, log)
    except OSError as exc:  # a full disk, a read-only tools folder: one line, not a traceback
        fault = storage_fault(exc, tools, TOOLS_FIX)
        if fault is None:
            raise
        raise fault from None


def _prepare(recipe: SysrootRecipe, tools: Path, log) -> PeerSysroot:
    tools.mkdir(parents=True, exist_ok=True)
    final = sysroot_dir(recipe, tools)
    with FileLock(str(final) + ".lock", timeout=APT_TIMEOUT_S * 2):
        found = cached_sysroot(recipe, tools)
        if found is not None:
            return found
        what = damage(final)
        if what is None:  # whole, but made by another recipe
            what = f"made by another recipe than {recipe.recipe}"
        if what != "absent":
            log(f"{final}: {what}; fetching it again")
            _discard(final)
        for stale in tools.glob(f".{final.name}.*.partial"):  # a fetch killed midway (we hold its lock)
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(dir=tools, prefix=f".{final.name}.", suffix=".partial"))
        try:
            start = time.monotonic()
            packages = _fetch(recipe, staging, log)
            root = staging / "root"
            for relative, text in (*GUEST_FILES, *recipe.files):
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                (root / relative).write_text(text)
            marker = _marker(recipe, root, packages, round(time.monotonic() - start, 1))
            (root / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))  # last: the root is complete
            os.rename(root, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    found = cached_sysroot(recipe, tools)
    if found is None:
        raise SysrootUnavailable(f"{final}: {damage(final)} right after the fetch; remove it, {recipe.setup_hint}")
    return PeerSysroot(found.path, found.packages, True, found.fetch_s, found.size_bytes, recipe)


def _discard(path: Path) -> None:
    """Move a damaged sysroot out of the way atomically, then delete it."""
    trash = path.with_name(f".{path.name}.damaged.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.rename(path, trash)
    shutil.rmtree(trash, ignore_errors=True)


class _PrivateApt:
    """apt-get and apt-cache with a configuration of their own in ``folder``: riscv64 only, the recipe's suite, main."""

    def __init__(self, folder: Path, recipe: SysrootRecipe) -> None:
        self.folder, self.recipe = folder, recipe
        etc, state, cache = folder / "etc", folder / "state", folder / "cache"
        for sub in (etc / "sources.list.d", etc / "preferences.d", state / "lists" / "partial",
                    cache / "archives" / "partial"):
            sub.mkdir(parents=True, exist_ok=True)
        (state / "status").write_text("")  # nothing installed: every dependency is fetched
        (etc / "sources.list").write_text(f"deb [arch={ARCH} signed-by={KEYRING}] {mirror()} {recipe.suite} main\n")
        self.options = [
            f"-oAPT::Architecture={ARCH}", f"-oAPT::Architectures::={ARCH}",
            f"-oDir::Etc::SourceList={etc / 'sources.list'}", f"-oDir::Etc::SourceParts={etc / 'sources.list.d'}",
            f"-oDir::Etc::Preferences={etc / 'preferences'}", f"-oDir::Etc::PreferencesParts={etc / 'preferences.d'}",
            f"-oDir::State={state}", f"-oDir::State::Status={state / 'status'}", f"-oDir::Cache={cache}",
            "-oDebug::NoLocking=1", "-oAcquire::Languages=none", "-oAPT::Update::Error-Mode=any",
            "-oAcquire::Retries=1", "-oAcquire::http::Timeout=20",
        ]
        if os.geteuid() == 0:  # apt would hand downloads to _apt, which cannot write into a private home
            self.options.append("-oAPT::Sandbox::User=root")

    def run(self, tool: str, *args: str, cwd: Path | None = None) -> ProcessResult:
        executable = shutil.which(tool)
        if executable is None:
            raise SysrootUnavailable(f"{tool} not found: {self.recipe.peer}'s riscv64 build is fetched with "
                                     "Debian's apt (a Debian or Ubuntu machine)")
        return run_process([executable, "-q", *self.options, *args], timeout_s=APT_TIMEOUT_S, cwd=cwd,
                           env={**os.environ, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"})


def _fetch(recipe: SysrootRecipe, staging: Path, log) -> dict[str, str]:
    """Download ``recipe.packages`` and their riscv64 dependencies into ``staging/debs`` and unpack them into
    ``staging/root``; returns package -> version."""
    if not KEYRING.is_file():
        raise SysrootUnavailable(f"no Debian archive keyring at {KEYRING} (apt checks Debian {recipe.suite}'s "
                                 f"signatures with it): apt-get install debian-archive-keyring, {recipe.setup_hint}")
    apt = _PrivateApt(staging / "apt", recipe)
    where = f"{mirror()} {recipe.suite}/main {ARCH}"
    log(f"fetching the package list of {where} (private apt configuration)")
    update = apt.run("apt-get", "update")
    lists = list((staging / "apt" / "state" / "lists").glob("*_Packages*"))
    if not update.ok or not lists:
        reason = _apt_reason(update)
        raise SysrootUnavailable(f"{recipe.peer}'s riscv64 build could not be fetched from {where} ({reason}); "
                                 f"check network access (or set {MIRROR_ENV} to a reachable Debian mirror), "
                                 f"{recipe.setup_hint}")
    names = _closure(apt, recipe)
    versions = _versions(apt, names, recipe)
    found = versions.get(recipe.package, "")
    if upstream_version(found) != recipe.version:
        raise SysrootUnavailable(f"{where} has {recipe.package} {found or '(none)'}, not {recipe.version}: "
                                 f"pytest-rvv's {recipe.peer} harness is built for {recipe.version}")
    debs = staging / "debs"
    debs.mkdir()
    log(f"downloading {len(names)} riscv64 packages ({', '.join(sorted(names))})")
    download = apt.run("apt-get", "download", *(f"{n}={versions[n]}" for n in sorted(names)), cwd=debs)
    if not download.ok:
        reason = _apt_reason(download)
        raise SysrootUnavailable(f"downloading {recipe.peer}'s riscv64 packages from {where} failed ({reason}); "
                                 f"check network access, {recipe.setup_hint}")
    root = staging / "root"
    root.mkdir()
    dpkg = shutil.which("dpkg") or "dpkg"
    for deb in sorted(debs.glob("*.deb")):
        unpack = run_process([dpkg, "-x", deb, root], timeout_s=APT_TIMEOUT_S)
        if not unpack.ok:
            raise SysrootUnavailable(f"dpkg -x {deb.name} failed ({unpack.status()}: "
                                     f"{first_lines(unpack.stderr, 1)}); {recipe.setup_hint}")
    # the dynamic loader is /lib/ld-linux-riscv64-lp64d.so.1 in every riscv64 program; Debian 13 ships it in /usr/lib
    for merged in ("lib", "bin", "sbin"):
        if (root / "usr" / merged).is_dir() and not os.path.lexists(root / merged):
            os.symlink(f"usr/{merged}", root / merged)
    if not (root / recipe.library).is_file() or (recipe.header and not (root / recipe.header).is_file()):
        wanted = " or ".join(f for f in (recipe.library, recipe.header) if f)
        raise SysrootUnavailable(f"the packages from {where} hold no {wanted}; {recipe.setup_hint}")
    return versions


def upstream_version(debian: str) -> str:
    """A Debian version's upstream part: ``1.21.0+dfsg-1`` -> ``1.21.0``, ``1:0.27.0-1`` -> ``0.27.0``."""
    match = re.match(r"(?:\d+:)?([^-+~]+)", debian)
    return match.group(1) if match else debian


def _apt_reason(result: ProcessResult) -> str:
    """What apt said went wrong, in a phrase: the line under its first ``Err:``, else its first ``E:`` line."""
    lines = (result.stdout + "\n" + result.stderr).splitlines()
    for at, line in enumerate(lines[:-1]):
        if line.startswith("Err:") and lines[at + 1][:1].isspace():
            return lines[at + 1].strip()
    errors = [line[2:].strip() for line in lines if line.startswith("E:")]
    return errors[0] if errors else f"apt-get {result.status()}"


def _closure(apt: _PrivateApt, recipe: SysrootRecipe) -> set[str]:
    """``recipe.packages`` and every package they depend on (pre-depends included), virtual ones left out."""
    result = apt.run("apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                     "--no-breaks", "--no-replaces", "--no-enhances", *recipe.packages)
    if not result.ok:
        raise SysrootUnavailable(f"apt-cache depends {' '.join(recipe.packages)} failed "
                                 f"({first_lines(result.stderr, 1)}); {recipe.setup_hint}")
    names = {line.strip() for line in result.stdout.splitlines() if line and not line[0].isspace()}
    return {n for n in names if not n.startswith("<")}


def _versions(apt: _PrivateApt, names: set[str], recipe: SysrootRecipe) -> dict[str, str]:
    """The candidate version of each package in the private lists."""
    result = apt.run("apt-cache", "policy", *sorted(names))
    versions: dict[str, str] = {}
    current = None
    for line in result.stdout.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            current = line[:-1].split(":")[0]
        elif current and line.strip().startswith("Candidate:"):
            versions[current] = line.split(":", 1)[1].strip()
    missing = sorted(n for n in names if versions.get(n) in (None, "(none)"))
    if missing:
        raise SysrootUnavailable(f"{mirror()} {recipe.suite}/main has no riscv64 {', '.join(missing)}; "
                                 f"{recipe.setup_hint}")
    return versions


def _marker(recipe: SysrootRecipe, root: Path, packages: dict[str, str], fetch_s: float) -> dict[str, object]:
    """Every regular file (size, sha256) and symlink (target) under ``root``, with the packages and recipe."""
    files: dict[str, list[object]] = {}
    links: dict[str, str] = {}
    for directory, subdirs, names in os.walk(root):
        for name in [*subdirs, *names]:
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                links[rel] = os.readlink(path)
            elif path.is_file():
                files[rel] = [path.stat().st_size, content_sha(path)]
    size = sum(int(str(size)) for size, _ in files.values())
    return {"recipe": recipe.recipe, "packages": dict(sorted(packages.items())), "fetch_s": fetch_s, "size_bytes": size,
            "suite": recipe.suite, "mirror": mirror(), "files": files, "links": links}
