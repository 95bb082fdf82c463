"""Targets: a named set of compiler flags plus the emulator CPU that can run the result.

What QEMU enables and how a target's CPU string is derived and checked is config/emulator.py's.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config import emulator
from pytest_rvv.config.cores import Core, core, default_cores

# re-exported for run/sigill.py (it reads QEMU's tables through this module)
from pytest_rvv.config.emulator import QEMU_KNOWN as QEMU_KNOWN
from pytest_rvv.config.emulator import QEMU_MEASURED as QEMU_MEASURED
from pytest_rvv.config.emulator import QEMU_OFF_BY_DEFAULT as QEMU_OFF_BY_DEFAULT
from pytest_rvv.config.emulator import qemu_cpu_extensions as qemu_cpu_extensions
from pytest_rvv.config.paths import DEFAULT, PATHS, UKERNELS_MMT4D, on_path, path_of, without_path

RISCV64 = "riscv64"
AARCH64 = "aarch64"
HOST = "host"
ARCHITECTURES = (RISCV64, AARCH64, HOST)

_TRIPLES = {
    RISCV64: "riscv64-unknown-linux-gnu",
    AARCH64: "aarch64-unknown-linux-gnu",
    HOST: f"{platform.machine()}-unknown-linux-gnu",
}
_ABIS = {RISCV64: "lp64d", AARCH64: "", HOST: ""}
RV64GC_FEATURES = ("+m", "+a", "+f", "+d", "+c")
# The RVA23U64 profile's mandatory extensions as LLVM features (clang-22 -march=rva23u64), plus Zvfh and
# Zvfbfmin, optional in the profile and what f16/bf16 vector code needs.
RVA23U64_FEATURES = (
    *RV64GC_FEATURES, "+v", "+zvl128b", "+zba", "+zbb", "+zbs", "+zicond", "+zfa", "+zfhmin", "+zcb", "+zihintntl",
    "+zihintpause", "+zimop", "+zcmop", "+zawrs", "+zicbom", "+zicbop", "+zicboz", "+zvbb", "+zvkt", "+zvfhmin",
    "+zvfh", "+zvfbfmin",
)



@dataclass(frozen=True)
class Target:
    """A named target flag set: what iree-compile is told, and which emulated CPU runs it.

    ``emulator_cpu`` is the QEMU ``-cpu`` string; for riscv64 it is derived from the
    features (``vlen`` from the highest ``+zvlNb``) unless the user gives one.
    """

    name: str
    arch: str
    features: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()
    cpu: str = ""
    emulator_cpu: str = ""
    triple: str = ""
    abi: str = ""
    description: str = ""
    builtin: bool = field(default=False, compare=False)
    silicon: tuple[str, ...] | None = None  # llvm-mca cores to estimate on ("spacemit-x60@1.6"); None: defaults
    board: str | None = None  # a board of [tool.pytest_rvv.boards] this target runs on, instead of QEMU
    selected: bool = field(default=True, compare=False)  # run when --rvv-targets names none (path twins: not)

    def __post_init__(self) -> None:
        if self.arch not in ARCHITECTURES:
            raise ConfigError(
                f"target {self.name!r}: arch {self.arch!r} is not one of {', '.join(ARCHITECTURES)}"
            )
        if not self.triple:
            object.__setattr__(self, "triple", _TRIPLES[self.arch])
        if not self.abi:
            object.__setattr__(self, "abi", _ABIS[self.arch])
        if not self.emulator_cpu:
            object.__setattr__(self, "emulator_cpu", _default_emulator_cpu(self))
        self.check_emulator_vlen()
        self.check_emulator_extensions()
        if self.silicon is None:
            cores = default_cores(self.has_vector, self.emulator_vlen) if self.arch == RISCV64 else ()
            object.__setattr__(self, "silicon", cores)
        self.cores()  # refuse unknown cores and VLEN mismatches now

    def cores(self) -> tuple[Core, ...]:
        """The silicon cores this target is estimated on; a core whose VLEN is not the run's is refused.

        The executed blocks depend on VLEN, so an estimate for a core comes only from a run at that
        core's VLEN (scalar code runs the same at any VLEN).
        """
        where = f"target {self.name!r}"
        cores = tuple(core(spec, where) for spec in self.silicon or ())
        if cores and self.arch != RISCV64:
            raise ConfigError(f"{where}: silicon estimates need a riscv64 target, not {self.arch}")
        for c in cores:
            if self.has_vector and c.vlen != self.emulator_vlen:
                raise ConfigError(f"{where}: silicon core {c.name} has VLEN {c.vlen} but this target runs at "
                                  f"vlen={self.emulator_vlen}: its executed blocks would not be the core's; "
                                  f"estimate it from a target at vlen={c.vlen}")
        return cores

    @property
    def machine_key(self) -> tuple[Any, ...]:
        """What decides where code compiled for this target runs: architecture, features, CPU, ABI, the emulated CPU
        and the board (flags such as a matmul path change the code, not what runs it)."""
        return self.arch, self.features, self.cpu, self.triple, self.abi, self.emulator_cpu, self.board

    def runs_as(self, other: Target) -> bool:
        """True when code compiled for ``other`` runs right where this target runs (the same ``machine_key``)."""
        return self.machine_key == other.machine_key

    @property
    def path(self) -> str:
        """The matmul path its flags choose (config/paths.py): default, data-tiled, mmt4d or inner-tiled."""
        return path_of(self.extra_flags)

    @property
    def has_vector(self) -> bool:
        """True when the target compiles RISC-V vector (or SVE/NEON) code."""
        if self.arch == RISCV64:
            return any(e in emulator.VECTOR_EXTENSIONS for e in self.extensions)
        return True

    @property
    def extensions(self) -> tuple[str, ...]:
        """The RISC-V extensions the features name (``emulator.riscv_extensions``); () for other architectures."""
        return emulator.riscv_extensions(tuple(self.features)) if self.arch == RISCV64 else ()

    @property
    def min_vlen(self) -> int:
        """Smallest VLEN the compiled code assumes: the highest ``+zvlNb`` (128 for plain +v)."""
        sizes = [int(m.group(1)) for f in self.features if (m := emulator.VLEN_FEATURE.match(f))]
        if sizes:
            return max(sizes)
        return 128 if "v" in self.extensions else 0

    @property
    def emulator_vlen(self) -> int | None:
        """The ``vlen=`` in the QEMU CPU string, if any."""
        return emulator.cpu_vlen(self.emulator_cpu)

    @property
    def is_emulated(self) -> bool:
        return self.arch != HOST

    def check_emulator_vlen(self) -> None:
        """Refuse an emulator VLEN below what the code was compiled for: results would be wrong."""
        if self.arch == RISCV64 and self.has_vector:
            emulator.check_vlen(self.name, self.emulator_cpu, self.min_vlen)

    @property
    def emulator_gated(self) -> tuple[str, ...]:
        """The target's extensions that ``-cpu rv64`` leaves off: each needs ``NAME=true`` (``emulator.gated``)."""
        return emulator.gated(self.extensions)

    def emulator_missing(self) -> tuple[str, ...]:
        """The target's extensions its QEMU CPU does not enable; () for a CPU model not measured (a vendor core)."""
        if self.arch != RISCV64 or not self.emulator_cpu:
            return ()
        return emulator.missing_extensions(self.emulator_cpu, self.extensions)

    def check_emulator_extensions(self) -> None:
        """Refuse an emulator CPU that lacks an extension the code is compiled for and QEMU can enable (the fix is
        ``NAME=true``); those it cannot are refused when the target runs under QEMU (``check_emulator_runs``)."""
        emulator.check_enabled(self.name, self.emulator_cpu, self.emulator_missing())

    def check_emulator_runs(self) -> None:
        """Refuse, before a run under QEMU, an extension QEMU cannot emulate: its instructions would trap. The
        emulator CPU may name it (a newer QEMU)."""
        emulator.check_runs(self.name, self.emulator_missing())

    def compiler_flags(self) -> list[str]:
        """The full iree-compile flag list for this target (excluding input and output)."""
        flags = [
            "--iree-hal-target-device=local",
            "--iree-hal-local-target-device-backends=llvm-cpu",
            f"--iree-llvmcpu-target-triple={self.triple}",
        ]
        if self.abi:
            flags.append(f"--iree-llvmcpu-target-abi={self.abi}")
        if self.cpu:
            flags.append(f"--iree-llvmcpu-target-cpu={self.cpu}")
        if self.features:
            flags.append(f"--iree-llvmcpu-target-cpu-features={','.join(self.features)}")
        flags.extend(self.extra_flags)
        return flags

    def describe(self) -> str:
        parts = [self.arch, ",".join(self.features) or self.cpu or "default"]
        if self.is_emulated:
            parts.append(f"qemu -cpu {self.emulator_cpu}")
        return " ".join(parts)


def _default_emulator_cpu(target: Target) -> str:
    if target.arch == RISCV64:
        return emulator.riscv64_cpu(target.extensions, target.min_vlen)
    return emulator.AARCH64_CPU if target.arch == AARCH64 else ""




def _rvv(vlen: int) -> Target:
    return Target(
        name=f"rv64gcv-zvl{vlen}b",
        arch=RISCV64,
        features=(*RV64GC_FEATURES, "+v", f"+zvl{vlen}b"),
        description=f"RV64GC + RVV 1.0, VLEN >= {vlen}",
        builtin=True,
    )


def path_twin(base: Target, path: str, name: str = "", **changes: Any) -> Target:
    """``base`` on another matmul path (config/paths.py): the same features and emulator, the path's flags."""
    where = f"target {name or base.name}"
    fields: dict[str, Any] = {
        "name": name or base.name + PATHS[path].suffix, "extra_flags": on_path(base.extra_flags, path, where),
        "description": f"{base.description}; {PATHS[path].description} ({' '.join(PATHS[path].flags)})"}
    return replace(base, **(fields | changes))


def _family(name: str, extensions: tuple[str, ...], what: str) -> Target:
    """A VLEN-256 vector target with the extensions a low-precision type needs (not run unless named)."""
    return Target(name=name, arch=RISCV64, features=(*RV64GC_FEATURES, "+v", "+zvl256b", *extensions),
                  description=f"RV64GCV, VLEN >= 256, {what}", builtin=True, selected=False)


# The VLEN-256 family (SpacemiT X60's VLEN) on every matmul path, and with each low-precision extension set: what the
# kernel suite (suites/kernels/) runs. None of them runs by default on models; name them with --rvv-targets.
_TWINNED = (
    _rvv(256),
    _family("rv64gcv-zvl256b-zvfh", ("+zfh", "+zvfh"), "f16 arithmetic natively (Zfh, Zvfh)"),
    _family("rv64gcv-zvl256b-zvfhmin", ("+zfhmin", "+zvfhmin"), "f16 stored, computed in f32 (Zfhmin, Zvfhmin)"),
    _family("rv64gcv-zvl256b-zvfbfwma", ("+zfbfmin", "+zvfbfmin", "+zvfbfwma"),
            "bf16 widening multiply-add (Zfbfmin, Zvfbfmin, Zvfbfwma)"),
)
# iree PR 22231's f16 single-thread benchmark, its command exactly: its features (no +c; Zfhmin and Zvfhmin at VLEN
# 256) and --iree-llvmcpu-enable-ukernels=mmt4d on both of its sides, without data tiling (this target: the flag
# changes no instruction there) and with it (the mmt4d twin)
PR_22231_TARGET = Target(
    name="rv64imafdv-zvl256b-zvfhmin", arch=RISCV64, features=("+m", "+a", "+f", "+d", "+zvl256b", "+v", "+zfhmin",
                                                                "+zvfhmin"),
    extra_flags=(UKERNELS_MMT4D,),
    description="iree PR 22231's features exactly (+m,+a,+f,+d,+zvl256b,+v,+zfhmin,+zvfhmin: no +c), f16 stored, "
                f"computed in f32; no data tiling, with {UKERNELS_MMT4D} as its command passes it",
    builtin=True, selected=False)
# ukernels=all (iree issue 24932's "ukernel" side) only on the family its calibration rows run on: X60's
# +m,+a,+f,+d,+c,+v,+zvl256b, the features exactly
UKERNELS_ALL_FAMILIES = ("rv64gcv-zvl256b",)
_TWINS = tuple(path_twin(base, path, selected=base.name == "rv64gcv-zvl256b" and path == "mmt4d")
               for base in _TWINNED for path in PATHS
               if path != DEFAULT and (path != "ukernels-all" or base.name in UKERNELS_ALL_FAMILIES))


BUILTIN_TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="rv64gc",
            arch=RISCV64,
            features=RV64GC_FEATURES,
            description="RV64GC scalar baseline",
            builtin=True,
        ),
        _rvv(128),
        _rvv(256),
        _rvv(512),
        path_twin(_rvv(256), "mmt4d", description="RV64GCV, VLEN >= 256, data-tiled: matmuls as linalg.mmt4d on "
                  "IREE's riscv_64 mmt4d microkernels (--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=mmt4d)"),
        Target(
            name="rva23u64",
            arch=RISCV64,
            features=RVA23U64_FEATURES,
            emulator_cpu="rva23u64,zvfh=true,zvfbfmin=true,vlen=128,elen=64",
            description="RVA23U64 profile (V, Zvbb, Zvfhmin, B, Zicond, Zfa, ...) + Zvfh + Zvfbfmin, VLEN >= 128, "
                        "on QEMU's rva23u64 CPU",
            builtin=True,
        ),
        Target(
            name="aarch64",
            arch=AARCH64,
            features=("+neon",),
            description="AArch64 with NEON, under qemu-aarch64",
            builtin=True,
        ),
        Target(
            name="host",
            arch=HOST,
            cpu="host",
            description="this machine, native iree-base-runtime",
            builtin=True,
        ),
        *(t for t in _TWINNED if t.name != "rv64gcv-zvl256b"),
        *(t for t in _TWINS if t.name != "rv64gcv-zvl256b-mmt4d"),
        PR_22231_TARGET,
        path_twin(PR_22231_TARGET, "mmt4d"),
    )
}

_TARGET_KEYS = {
    "extends", "arch", "features", "extra-flags", "cpu", "emulator-cpu", "triple", "abi", "description", "silicon",
    "board", "path",
}


def target_from_table(name: str, table: Mapping[str, Any], known: Mapping[str, Target]) -> Target:
    """Build a user target from a ``[tool.pytest_rvv.targets.NAME]`` table.

    ``extends = "rv64gcv-zvl512b"`` starts from another target; ``features`` replaces the
    features; ``extra-flags`` is appended to the base's extra flags.
    """
    unknown = set(table) - _TARGET_KEYS
    if unknown:
        raise ConfigError(
            f"[tool.pytest_rvv.targets.{name}]: unknown key(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(_TARGET_KEYS))}"
        )
    base_name = table.get("extends")
    if base_name is not None:
        if base_name not in known:
            raise ConfigError(
                f"[tool.pytest_rvv.targets.{name}]: extends unknown target {base_name!r}; "
                f"known: {', '.join(known)}"
            )
        base = known[base_name]
    elif "arch" not in table:
        raise ConfigError(f"[tool.pytest_rvv.targets.{name}]: give arch = \"riscv64\" (or extends = \"rv64gc\")")
    else:
        base = None

    def strings(key: str) -> tuple[str, ...] | None:
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"[tool.pytest_rvv.targets.{name}]: {key} must be a list of strings")
        return tuple(value)

    features = strings("features")
    extra = strings("extra-flags") or ()
    fields: dict[str, Any] = {"name": name, "builtin": False}
    silicon = strings("silicon")
    # None re-derives the default cores (for the target's own VLEN) unless the table names them
    fields["silicon"] = silicon if silicon is not None else (
        None if base is None or features is not None or "emulator-cpu" in table else base.silicon)
    for key, attr in (("arch", "arch"), ("cpu", "cpu"), ("triple", "triple"), ("abi", "abi"),
                      ("description", "description"), ("emulator-cpu", "emulator_cpu"), ("board", "board")):
        if key in table:
            fields[attr] = str(table[key])
    path = table.get("path")
    if path is not None and not isinstance(path, str):
        raise ConfigError(f"[tool.pytest_rvv.targets.{name}]: path must be one of {', '.join(PATHS)}")

    def flags(given: tuple[str, ...]) -> tuple[str, ...]:
        return given if path is None else on_path(given, path, f"[tool.pytest_rvv.targets.{name}]")

    if base is None:
        return Target(features=features or (), extra_flags=flags(extra), **fields)
    derived = {
        "features": features if features is not None else base.features,
        "extra_flags": flags(base.extra_flags + extra),
        # a changed feature list must re-derive the emulator CPU unless given explicitly
        "emulator_cpu": fields.pop("emulator_cpu", "" if features is not None else base.emulator_cpu),
        "description": fields.pop("description", f"{base.description}, customised"),
    }
    return replace(base, **derived, **fields)


def path_twins(targets: Mapping[str, Target]) -> dict[str, dict[str, str]]:
    """Targets that differ only in their matmul path, by the default twin's name: {path: target name}. A family with
    no default twin is keyed by its first member's name."""
    families: dict[tuple[Any, ...], dict[str, str]] = {}
    for t in targets.values():
        key = (t.machine_key, without_path(t.extra_flags))
        families.setdefault(key, {}).setdefault(t.path, t.name)
    return {paths.get(DEFAULT, next(iter(paths.values()))): paths for paths in families.values() if len(paths) > 1}


def microkernel_pairs(targets: Mapping[str, Target]) -> list[tuple[str, str]]:
    """(default path, mmt4d path) target pairs: path twins (e.g. rv64gcv-zvl256b and rv64gcv-zvl256b-mmt4d)."""
    return [(paths[DEFAULT], paths["mmt4d"]) for paths in path_twins(targets).values()
            if DEFAULT in paths and "mmt4d" in paths]


def resolve_targets(names: list[str], available: Mapping[str, Target]) -> list[Target]:
    """Look up targets by name, in the given order, with a clear error for unknown ones."""
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ConfigError(
            f"--rvv-targets: unknown target(s) {', '.join(unknown)}; known: {', '.join(available)} "
            "(define more under [tool.pytest_rvv.targets.NAME] in pyproject.toml)"
        )
    return [available[n] for n in dict.fromkeys(names)]
