"""Settings: pytest-rvv's options, read from the command line, environment and pyproject.toml.

Precedence, highest first: command-line option, environment variable, ``[tool.pytest.ini_options]``
(``rvv_*`` keys), ``[tool.pytest_rvv]`` table, built-in default.

Every environment variable pytest-rvv reads is declared here, once: an option's in ``OPTIONS``, the others in
``VARIABLES``; ``environment(name)`` is the one place the process environment is read (tests/test_architecture.py holds
every module to it). pytest-xdist's own variables are read where xdist is asked about.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.boards import Board
from pytest_rvv.config.cores import WallRequest, wall_request
from pytest_rvv.config.kernels import Kernels, kernels
from pytest_rvv.config.machine import check_name
from pytest_rvv.config.targets import BUILTIN_TARGETS, Target, resolve_targets, target_from_table
from pytest_rvv.model.manifest import model_from_table
from pytest_rvv.model.model import Model
from pytest_rvv.model.registry import SELECTIONS, SIZES, builtin_models

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MAX_SHARE_DROP = 5.0  # percentage points a model's vector share may fall (--rvv-max-vector-share-drop)


@dataclass(frozen=True)
class Option:
    """One setting, as a CLI flag, an ini key, a ``[tool.pytest_rvv]`` key and maybe an env var."""

    name: str  # table key, e.g. "runtime-riscv64"
    help: str
    env: str | None = None
    table_key: str | None = None  # defaults to ``name``
    metavar: str = "VALUE"

    @property
    def flag(self) -> str:
        return f"--rvv-{self.name}"

    @property
    def ini(self) -> str:
        return "rvv_" + self.name.replace("-", "_")

    @property
    def dest(self) -> str:
        return self.ini

    @property
    def key(self) -> str:
        return self.table_key or self.name


OPTIONS: tuple[Option, ...] = (
    Option("targets", "comma-separated target names (default: all built-in targets)",
           table_key="default-targets", metavar="NAMES"),
    Option("models", "comma-separated model names, or a selection of models not run by default: "
           + "; ".join(f"{name} ({what})" for name, what in SELECTIONS.items()) + " (default: every registered model "
           "but those)",
           table_key="default-models", metavar="NAMES"),
    Option("size", "model size preset: ci (small inputs, fast under QEMU; default) or full",
           metavar="ci|full"),
    Option("runtime-riscv64", "iree-run-module built for riscv64-linux-gnu; without it riscv64 "
           "execution tests skip", env="PYTEST_RVV_RUNTIME_RISCV64", metavar="PATH"),
    Option("iree-build", "your own IREE build or install directory: its iree-compile (and iree-import-onnx, "
           "iree-run-module when present) replace the wheel's", env="PYTEST_RVV_IREE_BUILD", metavar="DIR"),
    Option("machine", "name of this machine for machine-bound baselines (times, RSS, the host target; default: "
           "derived from its fingerprint)", env="PYTEST_RVV_MACHINE", metavar="NAME"),
    Option("runtime-aarch64", "an aarch64 iree-run-module to use instead of the one from the aarch64 "
           "iree-base-runtime wheel", env="PYTEST_RVV_RUNTIME_AARCH64", metavar="PATH"),
    Option("sysroot-riscv64", "riscv64 sysroot for a dynamically linked riscv64 runtime (QEMU -L)",
           env="PYTEST_RVV_SYSROOT_RISCV64", metavar="DIR"),
    Option("cache-dir", "compile/model/runtime cache (default: ~/.cache/pytest-rvv)",
           env="PYTEST_RVV_CACHE_DIR", metavar="DIR"),
    Option("timeout", f"seconds before an emulated run is killed (default: {DEFAULT_TIMEOUT_S:g})",
           metavar="SECONDS"),
    Option("qemu-dir", "directory holding qemu-riscv64 and qemu-aarch64 (default: the setup "
           "script's build, then PATH)", env="PYTEST_RVV_QEMU_DIR", metavar="DIR"),
    Option("max-vector-share-drop", "percentage points a model's static vector share may fall below its "
           f"snapshot before the vectorization gate fails (default: {DEFAULT_MAX_SHARE_DROP:g})", metavar="POINTS"),
    Option("added-work", "after a toolchain upgrade, a dispatch or model fails only when it executes more than this "
           "many percent more instructions than its baseline (default: 5; unchanged toolchain: exact)",
           metavar="PERCENT"),
    Option("compare", "a reference toolchain to compare the one under test with, side by side in this run: a pip "
           "requirement (iree-base-compiler==3.12.0), a wheel file or an IREE build/install directory",
           env="PYTEST_RVV_COMPARE", metavar="SPEC"),
    Option("compare-runtime-riscv64", "with --rvv-compare: the riscv64 iree-run-module the reference toolchain's "
           "modules run in (default: one pytest-rvv builds from that toolchain's IREE commit, or the nearest that "
           "loads)", env="PYTEST_RVV_COMPARE_RUNTIME_RISCV64", metavar="PATH"),
    Option("board", "run every riscv64 target on these boards of [tool.pytest_rvv.boards] over SSH; with -n N "
           "each xdist worker owns one board", env="PYTEST_RVV_BOARD", metavar="NAMES"),
    Option("perf-repeat", "emulated runs per performance measurement (default: 3; 5+ enables the "
           "statistical test on time)", metavar="N"),
    Option("ops", "ONNX node tests to run: comma-separated names or globs (conv*, test_add), or all "
           "(default: a small cross-section)", metavar="PATTERN"),
    Option("shard", "run shard K of N (K/N, e.g. 2/4): every test of one model x target (or ONNX node test x "
           "target) lands in the same shard, so no two machines compile or emulate the same cell; shards are "
           "balanced by the durations in .test_durations", env="PYTEST_RVV_SHARD", metavar="K/N"),
    Option("kernels", "the kernel suite's selection (suites/kernels/): ci (iree issue 24932's shapes, every row and "
           "path), decode, llm, all, or shape and row names (256x256x256,f32); default: none, the kernel suite is "
           "deselected", env="PYTEST_RVV_KERNELS", table_key="default-kernels", metavar="SELECTION"),
    Option("peers", "run peers beside IREE on the same QEMU CPU, comma-separated or all: onnxruntime (Debian 13's "
           "riscv64 ONNX Runtime, each model x riscv64 target: suites/peers/), openblas (Debian 13's OpenBLAS, its "
           "RVV sgemm on the kernel suite's f32 cells: suites/kernels/ with --rvv-kernels), ggml (llama.cpp's "
           "tensor library from Debian unstable, its RVV mul_mat on the same cells), ncnn (PyPI's riscv64 wheel, "
           "its RVV layers on each float32 model x riscv64 target: suites/peers/); bash scripts/setup.sh peers "
           "fetches them; default: none, the peer tests are deselected", env="PYTEST_RVV_PEERS",
           metavar="PEER"),
    Option("wall-time", "estimate memory traffic per dispatch and one call's wall time at 1 and N threads on a "
           "silicon core for every riscv64 model cell too (the kernel suite always does, on spacemit-x60 at 1 and 8), "
           "and with --rvv-peers each peer beside it on as many threads of its own: "
           "CORE[:THREADS], e.g. x60 or x60:1,4,8; costs one traced run and one local-task run per thread count and "
           "cell (kept in the cache); default: none", env="PYTEST_RVV_WALL_TIME", metavar="CORE[:THREADS]"),
    Option("bundle", "write the selection's riscv64 cells (models x targets, and the kernel suite's) as a bundle "
           "that runs natively on any RISC-V machine with nothing installed: sh DIR/run.sh there", metavar="DIR"),
    Option("bundle-results", "judge a bundle's results folder from a RISC-V machine: riscv64 cells take their "
           "outputs and times from it (agreement, performance against that machine's baselines) instead of QEMU",
           metavar="DIR"),
    Option("expected-failures", "TOML file of expected failures per target "
           "(default: baselines/expected-failures.toml)", metavar="FILE"),
)
BY_NAME = {o.name: o for o in OPTIONS}

SOURCE_ENV = "PYTEST_RVV_IREE_SRC"
GIT_URL_ENV = "PYTEST_RVV_IREE_GIT"
TOOLS_DIR_ENV = "PYTEST_RVV_TOOLS_DIR"
CACHE_HOME_ENV = "XDG_CACHE_HOME"
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
DEBIAN_MIRROR_ENV = "PYTEST_RVV_DEBIAN_MIRROR"
ALLOCATOR_ENV = "PYTEST_RVV_ALLOCATOR"
ALLOCATORS = ("tcmalloc", "system")
IREE_GIT_URL = "https://github.com/iree-org/iree.git"


@dataclass(frozen=True)
class Variable:
    """An environment variable pytest-rvv reads that is no option's (an option's is ``Option.env``)."""

    name: str
    help: str
    default: str  # what applies when it is unset or empty


VARIABLES: tuple[Variable, ...] = (
    Variable(SOURCE_ENV, "IREE's source the riscv64 runtimes are built from: a git clone, a directory of IREE source "
             "trees or iree-runtime-src-<commit>.tar.xz files, or one tree or .tar.xz (`pytest-rvv build-runtime "
             "--source` comes first)", f"a partial clone of {GIT_URL_ENV} in the tools folder, when it can be reached"),
    Variable(GIT_URL_ENV, "the IREE git repository the tools folder's partial clone is made from", IREE_GIT_URL),
    Variable(TOOLS_DIR_ENV, "where scripts/setup.sh puts QEMU, and pytest-rvv its riscv64 runtime builds and "
             "reference toolchains (`pytest-rvv build-runtime --tools-dir` comes first)",
             f"${CACHE_HOME_ENV}/pytest-rvv/tools"),
    Variable(CACHE_HOME_ENV, "the user's cache folder (XDG base directories): the default cache and tools folders "
             "are in it", "~/.cache"),
    Variable(SUMMARY_ENV, "GitHub Actions' job summary file: the verdict grid and the failures are appended to it",
             "no job summary"),
    Variable(DEBIAN_MIRROR_ENV, "the Debian mirror the peers' riscv64 builds (ONNX Runtime, OpenBLAS, ggml) and their "
             "riscv64 libraries are fetched from (toolchain/debian_sysroot.py)", "http://deb.debian.org/debian"),
    Variable(ALLOCATOR_ENV, "the malloc the wheels' iree-compile runs on: `tcmalloc` (the same modules for less CPU: "
             "docs/ci.md) or `system` (glibc's)", "tcmalloc where scripts/setup.sh unpacked it into the tools folder"),
)
DECLARED = frozenset({o.env for o in OPTIONS if o.env} | {v.name for v in VARIABLES})


def environment(name: str) -> str | None:
    """The value of the declared environment variable ``name``; None when it is unset or empty.

    The one reader of the process environment: a name declared neither in ``OPTIONS`` nor in ``VARIABLES`` is a
    KeyError (declare it first)."""
    if name not in DECLARED:
        raise KeyError(f"{name} is not declared in config/settings.py (OPTIONS or VARIABLES)")
    return os.environ.get(name) or None


def allocator() -> str:
    """``PYTEST_RVV_ALLOCATOR``: ``tcmalloc`` (the default) or ``system``; anything else is one ConfigError line."""
    given = (environment(ALLOCATOR_ENV) or ALLOCATORS[0]).strip().lower()
    if given not in ALLOCATORS:
        raise ConfigError(f"{ALLOCATOR_ENV}={given}: use tcmalloc (the default) or system (glibc's malloc)")
    return given


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/pytest-rvv``, or ``~/.cache/pytest-rvv``."""
    return Path(environment(CACHE_HOME_ENV) or str(Path.home() / ".cache")) / "pytest-rvv"


def default_tools_dir() -> Path:
    """Where scripts/setup.sh puts QEMU and runtimes are built: $PYTEST_RVV_TOOLS_DIR or ~/.cache/pytest-rvv/tools."""
    given = environment(TOOLS_DIR_ENV)
    return Path(given) if given else default_cache_dir() / "tools"


def read_pyproject_table(path: Path | None) -> dict[str, Any]:
    """The ``[tool.pytest_rvv]`` table of ``path`` (empty when there is none)."""
    if path is None or path.name != "pyproject.toml" or not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from exc
    table = data.get("tool", {}).get("pytest_rvv", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.pytest_rvv] must be a table")
    known = {o.key for o in OPTIONS} | {"targets", "models", "tolerances", "boards", "kernels"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.pytest_rvv]: {', '.join(unknown)}; "
                          f"allowed: {', '.join(sorted(known))}")
    return table


@dataclass(frozen=True)
class Settings:
    """Resolved settings for one session."""

    root: Path
    targets: tuple[Target, ...]
    models: tuple[Model, ...]
    known_targets: Mapping[str, Target]
    known_models: Mapping[str, Model]
    every_model_name: frozenset[str]  # at every size: what expected-failure entries may name
    runtime_riscv64: Path | None
    runtime_aarch64: Path | None
    sysroot_riscv64: Path | None
    cache_dir: Path
    timeout_s: float
    qemu_dir: Path | None
    expected_failures: Path
    tools_dir: Path  # PYTEST_RVV_TOOLS_DIR: QEMU, riscv64 runtime builds, reference toolchains
    iree_source: str | None = None  # PYTEST_RVV_IREE_SRC: IREE's source the riscv64 runtimes are built from
    iree_build: Path | None = None
    allocator: str = ALLOCATORS[0]  # PYTEST_RVV_ALLOCATOR: the malloc the wheels' iree-compile runs on
    machine: str | None = None
    added_work_percent: float = 5.0
    max_vector_share_drop: float = DEFAULT_MAX_SHARE_DROP
    perf_repeat: int = 3
    perf_repeat_given: bool = False  # --rvv-perf-repeat was asked for: time the runs even where time is not gated
    fresh_runs: bool = False  # --rvv-no-cache: emulate every run again, trust no recorded run
    ops: str | None = None
    shard: tuple[int, int] | None = None  # (K, N): run the K-th of N shards (1-based)
    compare: str | None = None  # --rvv-compare SPEC
    compare_runtime_riscv64: Path | None = None  # the reference toolchain's riscv64 runtime
    boards: Mapping[str, Board] = field(default_factory=dict)  # [tool.pytest_rvv.boards.NAME]
    board_names: tuple[str, ...] = ()  # --rvv-board: every riscv64 target runs on these (one per xdist worker)
    tolerances: Mapping[str, Any] | None = None  # [tool.pytest_rvv.tolerances]
    kernels: Kernels | None = None  # the kernel suite's table and selection (config/kernels.py)
    peers: tuple[str, ...] = ()  # --rvv-peers: the peers each riscv64 cell runs beside (suites/peers/, run/peer.py)
    wall_time: WallRequest | None = None  # --rvv-wall-time: traffic and est. wall time for every riscv64 cell
    bundle: Path | None = None  # --rvv-bundle: write the riscv64 cells as a bundle here (bundle/)
    bundle_results: Path | None = None  # --rvv-bundle-results: riscv64 cells come from this results folder

    @classmethod
    def resolve(
        cls, lookup: Callable[[Option], tuple[Any, Path] | None], table: Mapping[str, Any], root: Path
    ) -> Settings:
        """Build settings; ``lookup(option)`` gives the CLI or ini value with its base directory, or None."""
        given = _Given(lookup, table, root)
        known_targets = _known_targets(table)
        targets = resolve_targets(_names(given.value("targets"))
                                  or [n for n, t in known_targets.items() if t.selected], known_targets)
        boards, board_names = _boards(given, table, known_targets)
        known_models, every_model_name, models = _models(given, table, root)
        runtime, runtime_aarch64, sysroot = _runtimes(given)
        compare, compare_runtime = _comparison(given)
        return cls(
            root=root,
            targets=tuple(targets),
            models=models,
            known_targets=known_targets,
            known_models=known_models,
            every_model_name=every_model_name,
            runtime_riscv64=runtime,
            runtime_aarch64=runtime_aarch64,
            sysroot_riscv64=sysroot,
            cache_dir=given.path("cache-dir") or default_cache_dir(),
            timeout_s=_number(given.value("timeout"), DEFAULT_TIMEOUT_S, "--rvv-timeout",
                              "a positive number of seconds", positive=True),
            qemu_dir=given.path("qemu-dir"),
            expected_failures=given.path("expected-failures") or root / "baselines" / "expected-failures.toml",
            tools_dir=default_tools_dir(),
            allocator=allocator(),
            iree_source=environment(SOURCE_ENV),
            iree_build=given.path("iree-build"),
            added_work_percent=_number(given.value("added-work"), 5.0, "--rvv-added-work", "a percentage"),
            machine=check_name(str(given.value("machine")), "--rvv-machine") if given.value("machine") else None,
            max_vector_share_drop=_number(given.value("max-vector-share-drop"), DEFAULT_MAX_SHARE_DROP,
                                          "--rvv-max-vector-share-drop", "a number of percentage points"),
            perf_repeat_given=given.value("perf-repeat") not in (None, ""),
            perf_repeat=int(_number(given.value("perf-repeat"), 3, "--rvv-perf-repeat", "a positive number of runs",
                                    positive=True)),
            tolerances=table.get("tolerances") or {},
            ops=str(given.value("ops")) if given.value("ops") else None,
            shard=parse_shard(str(given.value("shard"))) if given.value("shard") not in (None, "") else None,
            compare=compare,
            compare_runtime_riscv64=compare_runtime,
            boards=boards,
            board_names=board_names,
            kernels=kernels(table.get("kernels", {}), str(given.value("kernels") or "") or None, known_targets),
            peers=_peers(given.value("peers")),
            wall_time=(wall_request(str(given.value("wall-time")), "--rvv-wall-time")
                       if given.value("wall-time") not in (None, "") else None),
            bundle=given.path("bundle"),
            bundle_results=given.path("bundle-results"),
        )


PEERS = ("onnxruntime", "openblas", "ggml", "ncnn")  # run/peer.py PEERS' names (a spec holds the two equal)


def _peers(value: Any) -> tuple[str, ...]:
    """--rvv-peers: ``onnxruntime``, ``openblas``, ``ggml``, ``ncnn`` (or ``all``); empty: none."""
    names = [n.strip() for n in str(value or "").split(",") if n.strip()]
    if names == ["all"]:
        return PEERS
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ConfigError(f"--rvv-peers={value}: unknown peer {', '.join(unknown)} (known: {', '.join(PEERS)}, all)")
    return tuple(dict.fromkeys(names))


class _Given:
    """Where each option's value comes from: the CLI or ini (``lookup``), else its environment variable, else the
    ``[tool.pytest_rvv]`` table; with the directory a relative path in it is relative to."""

    def __init__(self, lookup: Callable[[Option], tuple[Any, Path] | None], table: Mapping[str, Any],
                 root: Path) -> None:
        self.lookup, self.table, self.root = lookup, table, root

    def sourced(self, name: str) -> tuple[Any, Path]:
        option = BY_NAME[name]
        found = self.lookup(option)
        if found is not None and found[0] not in (None, "", []):
            return found
        if option.env and (value := environment(option.env)):
            return value, Path.cwd()
        found_in_table = self.table.get(option.key)
        if found_in_table is None and option.name in ("targets", "models"):
            plain = self.table.get(option.name)  # `targets = [...]` also selects
            found_in_table = plain if isinstance(plain, list | str) else None
        return found_in_table, self.root

    def value(self, name: str) -> Any:
        return self.sourced(name)[0]

    def path(self, name: str) -> Path | None:
        raw, base = self.sourced(name)
        return None if raw in (None, "") else (base / Path(str(raw)).expanduser())


def _known_targets(table: Mapping[str, Any]) -> dict[str, Target]:
    """The built-in targets and the user's ``[tool.pytest_rvv.targets.NAME]`` tables."""
    known = dict(BUILTIN_TARGETS)
    for name, definition in _definitions(table, "targets").items():
        if not isinstance(definition, dict):
            raise ConfigError(f"[tool.pytest_rvv.targets.{name}] must be a table")
        known[name] = target_from_table(name, definition, known)
    return known


def _boards(given: _Given, table: Mapping[str, Any],
            known_targets: Mapping[str, Target]) -> tuple[dict[str, Board], tuple[str, ...]]:
    """Declared boards and the ones ``--rvv-board`` selects; every board a target or the option names is declared."""
    boards = {name: Board.from_table(name, t) for name, t in _definitions(table, "boards").items()}
    board_names = tuple(_names(given.value("board")))
    for name in board_names:
        if name not in boards:
            raise ConfigError(f"--rvv-board: unknown board {name!r}; declare it as [tool.pytest_rvv.boards.{name}] "
                              f"with host = \"user@board\" (known: {', '.join(boards) or 'none'})")
    for t in known_targets.values():
        if t.board is not None and t.board not in boards:
            raise ConfigError(f"[tool.pytest_rvv.targets.{t.name}]: board {t.board!r} is not declared; add "
                              f"[tool.pytest_rvv.boards.{t.board}] with host = \"user@board\"")
    return boards, board_names


def _models(given: _Given, table: Mapping[str, Any],
            root: Path) -> tuple[dict[str, Model], frozenset[str], tuple[Model, ...]]:
    """Known models at the chosen size (built-in and the user's), every name at any size, and the selection."""
    size = str(given.value("size") or "ci")
    if size not in SIZES:
        raise ConfigError(f"--rvv-size: {size!r} is not one of {', '.join(SIZES)}")
    user_models = {name: model_from_table(name, t, root) for name, t in _definitions(table, "models").items()}
    known = {**builtin_models(size), **user_models}
    every_name = frozenset({*builtin_models("ci"), *builtin_models("full"), *user_models})
    given_names = [n for name in _names(given.value("models"))
                   for n in ([m for m, model in known.items() if model.selection == name] if name in SELECTIONS
                             else [name])]
    names = [n if n in known or f"{n}-full" not in known else f"{n}-full"
             for n in given_names or [n for n, m in known.items() if m.selected]]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"--rvv-models: unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return known, every_name, tuple(known[n] for n in dict.fromkeys(names))


def _runtimes(given: _Given) -> tuple[Path | None, Path | None, Path | None]:
    """The user's riscv64 and aarch64 runtimes and riscv64 sysroot, each checked to exist."""
    runtime, sysroot = given.path("runtime-riscv64"), given.path("sysroot-riscv64")
    runtime_aarch64 = given.path("runtime-aarch64")
    for arch, path in (("riscv64", runtime), ("aarch64", runtime_aarch64)):
        if path is not None and not path.is_file():
            raise ConfigError(f"--rvv-runtime-{arch} {path}: no such file; give the path of an "
                              f"iree-run-module built for {arch}-linux-gnu")
    if sysroot is not None and not sysroot.is_dir():
        raise ConfigError(f"--rvv-sysroot-riscv64 {sysroot}: no such directory")
    return runtime, runtime_aarch64, sysroot


def _comparison(given: _Given) -> tuple[str | None, Path | None]:
    """The reference toolchain's spec (--rvv-compare) and its riscv64 runtime, which needs a reference side."""
    compare = _spec(*given.sourced("compare"))
    runtime = given.path("compare-runtime-riscv64")
    if runtime is not None and compare is None:
        raise ConfigError(f"--rvv-compare-runtime-riscv64 {runtime}: there is no reference side; name the "
                          "reference toolchain with --rvv-compare=SPEC, or give the runtime of the toolchain under "
                          "test with --rvv-runtime-riscv64")
    if runtime is not None and not runtime.is_file():
        raise ConfigError(f"--rvv-compare-runtime-riscv64 {runtime}: no such file; give the path of an "
                          "iree-run-module built for riscv64-linux-gnu")
    return compare, runtime


def _spec(raw: Any, base: Path) -> str | None:
    """A --rvv-compare SPEC; one that names a path (a build directory, a wheel) is made absolute."""
    spec = str(raw or "").strip()
    if not spec:
        return None
    if "/" in spec or spec.endswith(".whl") or (base / spec).is_dir():
        return str(base / Path(spec).expanduser())
    return spec


def parse_shard(raw: str) -> tuple[int, int]:
    """``"K/N"`` as (K, N) with 1 <= K <= N, or a one-line ConfigError naming --rvv-shard."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", raw)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ConfigError(f"--rvv-shard: {raw!r} is not K/N with 1 <= K <= N (e.g. --rvv-shard=2/4)")
    return int(match.group(1)), int(match.group(2))


def _number(raw: Any, default: float, flag: str, what: str, positive: bool = False) -> float:
    if raw in (None, ""):
        return default
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{flag}: {raw!r} is not {what}") from None
    if number < 0 or (positive and number == 0):
        raise ConfigError(f"{flag}: {raw!r} is not {what}")
    return number


def _definitions(table: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``[tool.pytest_rvv.<key>.NAME]`` tables; a plain list under ``key`` is a selection instead."""
    value = table.get(key)
    if value is None or isinstance(value, list | str):
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"[tool.pytest_rvv] {key}: give a list of names, or [tool.pytest_rvv.{key}.NAME] tables")
    return value


def _names(raw: Any) -> list[str]:
    if raw in (None, ""):
        return []
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list | tuple):
        raise ConfigError(f"expected a comma-separated list of names, got {raw!r}")
    return [str(n).strip() for n in raw if str(n).strip()]
