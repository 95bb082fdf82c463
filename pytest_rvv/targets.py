"""Targets: a named set of compiler flags plus the emulator CPU that can run the result."""

from __future__ import annotations

import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_rvv.errors import ConfigError
from pytest_rvv.profile.cores import Core, core, default_cores

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
_ZVL = re.compile(r"^\+zvl(\d+)b$")
_QEMU_VLEN = re.compile(r"(?:^|,)vlen=(\d+)(?:,|$)")
RV64GC_FEATURES = ("+m", "+a", "+f", "+d", "+c")
# The RVA23U64 profile's mandatory extensions as LLVM features (clang-22 -march=rva23u64), plus Zvfh and
# Zvfbfmin, optional in the profile and what f16/bf16 vector code needs.
RVA23U64_FEATURES = (
    *RV64GC_FEATURES, "+v", "+zvl128b", "+zba", "+zbb", "+zbs", "+zicond", "+zfa", "+zfhmin", "+zcb", "+zihintntl",
    "+zihintpause", "+zimop", "+zcmop", "+zawrs", "+zicbom", "+zicbop", "+zicboz", "+zvbb", "+zvkt", "+zvfhmin",
    "+zvfh", "+zvfbfmin",
)
DATA_TILING_UKERNELS = ("--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=mmt4d")
# Vector extensions QEMU 10 enables only when asked: an instruction of each traps (SIGILL) under
# `-cpu rv64,v=true` unless `NAME=true` is given. Measured with QEMU 10.0.2: its `rva23u64` CPU enables
# zvfhmin and zvbb but not zvfh, zvfbfmin or zvfbfwma; `max` enables all of them.
EMULATOR_GATED = ("zvfh", "zvfhmin", "zvfbfmin", "zvfbfwma", "zvbb")
_CPU_MODEL_IMPLIES = {"rva23u64": ("zvfhmin", "zvbb"), "rva23s64": ("zvfhmin", "zvbb"), "max": EMULATOR_GATED}
_IMPLIED_BY = {"zvfhmin": "zvfh", "zvfbfmin": "zvfbfwma"}  # QEMU turns these on with the wider extension


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
    def has_vector(self) -> bool:
        """True when the target compiles RISC-V vector (or SVE/NEON) code."""
        if self.arch == RISCV64:
            return "+v" in self.features or any(f.startswith("+zve") for f in self.features)
        return True

    @property
    def min_vlen(self) -> int:
        """Smallest VLEN the compiled code assumes: the highest ``+zvlNb`` (128 for plain +v)."""
        sizes = [int(m.group(1)) for f in self.features if (m := _ZVL.match(f))]
        if sizes:
            return max(sizes)
        return 128 if self.arch == RISCV64 and "+v" in self.features else 0

    @property
    def emulator_vlen(self) -> int | None:
        """The ``vlen=`` in the QEMU CPU string, if any."""
        match = _QEMU_VLEN.search(self.emulator_cpu)
        return int(match.group(1)) if match else None

    @property
    def is_emulated(self) -> bool:
        return self.arch != HOST

    def check_emulator_vlen(self) -> None:
        """Refuse an emulator VLEN below what the code was compiled for: results would be wrong."""
        if self.arch != RISCV64 or not self.has_vector:
            return
        vlen = self.emulator_vlen
        if vlen is None:
            raise ConfigError(
                f"target {self.name!r}: emulator-cpu {self.emulator_cpu!r} sets no vlen=; "
                f"add vlen={self.min_vlen} or more (the code assumes VLEN >= {self.min_vlen})"
            )
        if vlen < self.min_vlen:
            raise ConfigError(
                f"target {self.name!r}: QEMU vlen={vlen} is smaller than the compiled +zvl{self.min_vlen}b; "
                f"it would run with silently wrong results: use vlen>={self.min_vlen} in emulator-cpu"
            )

    @property
    def emulator_gated(self) -> tuple[str, ...]:
        """The target's extensions that QEMU must be told to enable (``EMULATOR_GATED``)."""
        return tuple(e for e in EMULATOR_GATED if f"+{e}" in self.features)

    def check_emulator_extensions(self) -> None:
        """Refuse an emulator CPU that lacks an extension the code is compiled for: it would trap or mislead."""
        if self.arch != RISCV64 or not self.emulator_cpu:
            return
        model, *props = self.emulator_cpu.split(",")
        given = {p.split("=")[0] for p in props if p.split("=")[-1] in ("true", "on")}
        enabled = given | set(_CPU_MODEL_IMPLIES.get(model, ()))
        enabled |= {ext for ext, wider in _IMPLIED_BY.items() if wider in enabled}
        missing = [e for e in self.emulator_gated if e not in enabled]
        if missing:
            raise ConfigError(
                f"target {self.name!r}: compiled with {', '.join('+' + e for e in missing)} but QEMU -cpu "
                f"{self.emulator_cpu!r} does not enable it (its instructions would trap): add "
                f"{','.join(e + '=true' for e in missing)} to emulator-cpu"
            )

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
        if not target.has_vector:
            return "rv64,v=false"
        gated = "".join(f",{e}=true" for e in target.emulator_gated)
        return f"rv64,v=true,vlen={target.min_vlen},elen=64,vext_spec=v1.0{gated}"
    if target.arch == AARCH64:
        return "max"
    return ""


def _rvv(vlen: int) -> Target:
    return Target(
        name=f"rv64gcv-zvl{vlen}b",
        arch=RISCV64,
        features=(*RV64GC_FEATURES, "+v", f"+zvl{vlen}b"),
        description=f"RV64GC + RVV 1.0, VLEN >= {vlen}",
        builtin=True,
    )


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
        Target(
            name="rv64gcv-zvl256b-mmt4d",
            arch=RISCV64,
            features=(*RV64GC_FEATURES, "+v", "+zvl256b"),
            extra_flags=DATA_TILING_UKERNELS,
            description="RV64GCV, VLEN >= 256, data-tiled: matmuls as linalg.mmt4d on IREE's riscv_64 mmt4d "
                        "microkernels (--iree-opt-data-tiling --iree-llvmcpu-enable-ukernels=mmt4d)",
            builtin=True,
        ),
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
    )
}

_TARGET_KEYS = {
    "extends", "arch", "features", "extra-flags", "cpu", "emulator-cpu", "triple", "abi", "description", "silicon",
    "board",
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
    if base is None:
        return Target(features=features or (), extra_flags=extra, **fields)
    derived = {
        "features": features if features is not None else base.features,
        "extra_flags": base.extra_flags + extra,
        # a changed feature list must re-derive the emulator CPU unless given explicitly
        "emulator_cpu": fields.pop("emulator_cpu", "" if features is not None else base.emulator_cpu),
        "description": fields.pop("description", f"{base.description}, customised"),
    }
    return replace(base, **derived, **fields)


def microkernel_pairs(targets: Mapping[str, Target]) -> list[tuple[str, str]]:
    """(default path, data-tiled microkernel path) target pairs: the same features, and the second's flags are
    the first's plus ``DATA_TILING_UKERNELS`` (e.g. rv64gcv-zvl256b and rv64gcv-zvl256b-mmt4d)."""
    pairs = []
    for tiled in targets.values():
        if not set(DATA_TILING_UKERNELS) <= set(tiled.extra_flags):
            continue
        rest = tuple(f for f in tiled.extra_flags if f not in DATA_TILING_UKERNELS)
        pairs += [(base.name, tiled.name) for base in targets.values()
                  if base is not tiled and base.arch == tiled.arch and base.features == tiled.features
                  and base.extra_flags == rest and base.emulator_cpu == tiled.emulator_cpu]
    return pairs


def resolve_targets(names: list[str], available: Mapping[str, Target]) -> list[Target]:
    """Look up targets by name, in the given order, with a clear error for unknown ones."""
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ConfigError(
            f"--rvv-targets: unknown target(s) {', '.join(unknown)}; known: {', '.join(available)} "
            "(define more under [tool.pytest_rvv.targets.NAME] in pyproject.toml)"
        )
    return [available[n] for n in dict.fromkeys(names)]
