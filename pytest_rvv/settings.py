"""Settings: pytest-rvv's options, read from the command line, environment and pyproject.toml.

Precedence, highest first: command-line option, environment variable, ``[tool.pytest.ini_options]``
(``rvv_*`` keys), ``[tool.pytest_rvv]`` table, built-in default.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_rvv.analyze.gate import DEFAULT_MAX_SHARE_DROP
from pytest_rvv.boards import Board
from pytest_rvv.errors import ConfigError
from pytest_rvv.machine import check_name
from pytest_rvv.model.manifest import model_from_table
from pytest_rvv.model.model import Model
from pytest_rvv.model.registry import SIZES, builtin_models
from pytest_rvv.targets import BUILTIN_TARGETS, Target, resolve_targets, target_from_table

DEFAULT_TIMEOUT_S = 600.0


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
    Option("models", "comma-separated model names (default: all registered models)",
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
    Option("expected-failures", "TOML file of expected failures per target "
           "(default: baselines/expected-failures.toml)", metavar="FILE"),
)
BY_NAME = {o.name: o for o in OPTIONS}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-rvv"


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
    known = {o.key for o in OPTIONS} | {"targets", "models", "tolerances", "boards"}
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
    iree_build: Path | None = None
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

    @classmethod
    def resolve(
        cls, lookup: Callable[[Option], tuple[Any, Path] | None], table: Mapping[str, Any], root: Path
    ) -> Settings:
        """Build settings; ``lookup(option)`` gives the CLI or ini value with its base directory, or None."""

        def sourced(name: str) -> tuple[Any, Path]:
            """The value and the directory a relative path in it is relative to."""
            option = BY_NAME[name]
            found = lookup(option)
            if found is not None and found[0] not in (None, "", []):
                return found
            if option.env and os.environ.get(option.env):
                return os.environ[option.env], Path.cwd()
            found_in_table = table.get(option.key)
            if found_in_table is None and option.name in ("targets", "models"):
                plain = table.get(option.name)  # `targets = [...]` also selects
                found_in_table = plain if isinstance(plain, list | str) else None
            return found_in_table, root

        def value(name: str) -> Any:
            return sourced(name)[0]

        def path(name: str) -> Path | None:
            raw, base = sourced(name)
            return None if raw in (None, "") else (base / Path(str(raw)).expanduser())

        known_targets = dict(BUILTIN_TARGETS)
        for tname, ttable in _definitions(table, "targets").items():
            if not isinstance(ttable, dict):
                raise ConfigError(f"[tool.pytest_rvv.targets.{tname}] must be a table")
            known_targets[tname] = target_from_table(tname, ttable, known_targets)
        size = str(value("size") or "ci")
        if size not in SIZES:
            raise ConfigError(f"--rvv-size: {size!r} is not one of {', '.join(SIZES)}")
        user_models = {name: model_from_table(name, t, root) for name, t in _definitions(table, "models").items()}
        known_models = {**builtin_models(size), **user_models}
        every_model_name = {*builtin_models("ci"), *builtin_models("full"), *user_models}

        targets = resolve_targets(_names(value("targets")) or list(known_targets), known_targets)
        boards = {name: Board.from_table(name, t) for name, t in _definitions(table, "boards").items()}
        board_names = tuple(_names(value("board")))
        for name in board_names:
            if name not in boards:
                raise ConfigError(f"--rvv-board: unknown board {name!r}; declare it as [tool.pytest_rvv.boards.{name}] "
                                  f"with host = \"user@board\" (known: {', '.join(boards) or 'none'})")
        for t in known_targets.values():
            if t.board is not None and t.board not in boards:
                raise ConfigError(f"[tool.pytest_rvv.targets.{t.name}]: board {t.board!r} is not declared; add "
                                  f"[tool.pytest_rvv.boards.{t.board}] with host = \"user@board\"")
        model_names = [n if n in known_models or f"{n}-full" not in known_models else f"{n}-full"
                       for n in _names(value("models")) or list(known_models)]
        unknown = [n for n in model_names if n not in known_models]
        if unknown:
            raise ConfigError(f"--rvv-models: unknown model(s) {', '.join(unknown)}; "
                              f"known: {', '.join(known_models)}")
        timeout = _number(value("timeout"), DEFAULT_TIMEOUT_S, "--rvv-timeout", "a positive number of seconds",
                          positive=True)
        share_drop = _number(value("max-vector-share-drop"), DEFAULT_MAX_SHARE_DROP, "--rvv-max-vector-share-drop",
                             "a number of percentage points")
        cache = path("cache-dir") or default_cache_dir()
        runtime, sysroot = path("runtime-riscv64"), path("sysroot-riscv64")
        runtime_aarch64 = path("runtime-aarch64")
        for arch, given in (("riscv64", runtime), ("aarch64", runtime_aarch64)):
            if given is not None and not given.is_file():
                raise ConfigError(f"--rvv-runtime-{arch} {given}: no such file; give the path of an "
                                  f"iree-run-module built for {arch}-linux-gnu")
        if sysroot is not None and not sysroot.is_dir():
            raise ConfigError(f"--rvv-sysroot-riscv64 {sysroot}: no such directory")
        compare = _spec(*sourced("compare"))
        compare_runtime = path("compare-runtime-riscv64")
        if compare_runtime is not None and compare is None:
            raise ConfigError(f"--rvv-compare-runtime-riscv64 {compare_runtime}: there is no reference side; name the "
                              "reference toolchain with --rvv-compare=SPEC, or give the runtime of the toolchain under "
                              "test with --rvv-runtime-riscv64")
        if compare_runtime is not None and not compare_runtime.is_file():
            raise ConfigError(f"--rvv-compare-runtime-riscv64 {compare_runtime}: no such file; give the path of an "
                              "iree-run-module built for riscv64-linux-gnu")
        return cls(
            root=root,
            targets=tuple(targets),
            models=tuple(known_models[n] for n in dict.fromkeys(model_names)),
            known_targets=known_targets,
            known_models=known_models,
            every_model_name=frozenset(every_model_name),
            runtime_riscv64=runtime,
            runtime_aarch64=runtime_aarch64,
            sysroot_riscv64=sysroot,
            cache_dir=cache,
            timeout_s=timeout,
            qemu_dir=path("qemu-dir"),
            expected_failures=path("expected-failures") or root / "baselines" / "expected-failures.toml",
            iree_build=path("iree-build"),
            added_work_percent=_number(value("added-work"), 5.0, "--rvv-added-work", "a percentage"),
            machine=check_name(str(value("machine")), "--rvv-machine") if value("machine") else None,
            max_vector_share_drop=share_drop,
            perf_repeat_given=value("perf-repeat") not in (None, ""),
            perf_repeat=int(_number(value("perf-repeat"), 3, "--rvv-perf-repeat", "a positive number of runs",
                                    positive=True)),
            tolerances=table.get("tolerances") or {},
            ops=str(value("ops")) if value("ops") else None,
            shard=parse_shard(str(value("shard"))) if value("shard") not in (None, "") else None,
            compare=compare,
            compare_runtime_riscv64=compare_runtime,
            boards=boards,
            board_names=board_names,
        )


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
