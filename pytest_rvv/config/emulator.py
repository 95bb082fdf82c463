"""The emulator: what QEMU knows of RISC-V CPUs, and the ``-cpu`` string a target's code runs under.

A riscv64 target runs under ``qemu-riscv64 -cpu CPU`` (an aarch64 one under ``qemu-aarch64 -cpu max``). Here, as
measured with QEMU ``QEMU_MEASURED``:

- which user-level extensions each QEMU CPU model enables (``QEMU_CPU_EXTENSIONS``), which ones ``NAME=true`` adds
  (``QEMU_OFF_BY_DEFAULT``), which need others (``QEMU_NEEDS``) and which QEMU refuses (``QEMU_CANNOT``);
- the extensions a list of LLVM ``+feature``s names (a profile stands for QEMU's CPU of that name);
- the CPU string derived from a target's extensions and VLEN, and the ``vlen=`` a CPU string sets;
- the checks a target's CPU passes before its code runs: a VLEN at least the compiled one, every compiled extension
  enabled (or, for one QEMU cannot emulate, a refusal before the run).

config/targets.py's ``Target`` calls these with its own values; tests/test_emulator_cpu.py measures the tables
against QEMU again and fails when a QEMU upgrade changes them.
"""

from __future__ import annotations

import functools
import re

from pytest_rvv.base.errors import ConfigError

VLEN_FEATURE = re.compile(r"^\+zvl(\d+)b$")  # LLVM's +zvlNb: the code assumes VLEN >= N
_QEMU_VLEN = re.compile(r"(?:^|,)vlen=(\d+)(?:,|$)")
AARCH64_CPU = "max"  # qemu-aarch64's CPU for aarch64 targets

# What QEMU's riscv64 CPUs enable, measured with QEMU 10.0.2: `qemu-riscv64 -cpu CPU` running a static riscv64
# program that prints /proc/cpuinfo, whose `isa` line is QEMU's riscv_isa_string (every enabled extension). Only
# user-level extensions are kept (s*, h: no user-mode instructions). tests/test_emulator_cpu.py measures it again
# and fails when a QEMU upgrade changes any of it.
QEMU_MEASURED = "10.0.2"
QEMU_CPU_EXTENSIONS = {
    "rv64": "i m a f d c zic64b zicbom zicbop zicboz ziccamoa ziccif zicclsm ziccrse zicntr zicsr zifencei zihintntl "
            "zihintpause zihpm zmmul za64rs zaamo zalrsc zawrs zfa zca zcd zba zbb zbc zbs",
    "rva22u64": "i m a f d c b zic64b zicbom zicbop zicboz ziccamoa ziccif zicclsm ziccrse zicntr zicsr zihintpause "
                "zihpm zmmul za64rs zaamo zalrsc zfhmin zca zcd zba zbb zbs zkt",
    "rva22s64": "i m a f d c b zic64b zicbom zicbop zicboz ziccamoa ziccif zicclsm ziccrse zicntr zicsr zifencei "
                "zihintpause zihpm zmmul za64rs zaamo zalrsc zfhmin zca zcd zba zbb zbs zkt",
    "rva23u64": "i m a f d c b v zic64b zicbom zicbop zicboz ziccamoa ziccif zicclsm ziccrse zicond zicntr zicsr "
                "zihintntl zihintpause zihpm zimop zmmul za64rs zaamo zalrsc zawrs zfa zfhmin zca zcb zcd zcmop zba "
                "zbb zbs zkt zvbb zve32f zve32x zve64f zve64d zve64x zvfhmin zvkb zvkt",
    "rva23s64": "i m a f d c b v zic64b zicbom zicbop zicboz ziccamoa ziccif zicclsm ziccrse zicond zicntr zicsr "
                "zifencei zihintntl zihintpause zihpm zimop zmmul za64rs zaamo zalrsc zawrs zfa zfhmin zca zcb zcd "
                "zcmop zba zbb zbs zkt zvbb zve32f zve32x zve64f zve64d zve64x zvfhmin zvkb zvkt",
    "max": "i m a f d c b v zic64b zicbom zicbop zicboz ziccamoa ziccif zicclsm ziccrse zicfilp zicfiss zicond zicntr "
           "zicsr zifencei zihintntl zihintpause zihpm zimop zmmul za64rs zaamo zabha zacas zama16b zalrsc zawrs zfa "
           "zfbfmin zfh zfhmin zca zcb zcd zcmop zba zbb zbc zbkb zbkc zbkx zbs zk zkn zknd zkne zknh zkr zks zksed "
           "zksh zkt ztso zvbb zvbc zve32f zve32x zve64f zve64d zve64x zvfbfmin zvfbfwma zvfh zvfhmin zvkb zvkg zvkn "
           "zvknc zvkned zvkng zvknha zvknhb zvks zvksc zvksed zvksg zvksh zvkt",
}
# Every extension LLVM accepts that `-cpu rv64` leaves off (same measurement, QEMU 10.0.2): the QEMU property of its
# own name enables it (`NAME=true`), with the extensions listed here that QEMU turns on with it (measured under
# v=true for the vector ones; v itself is v=true). The first five come in the order earlier versions derived them,
# so existing emulator-cpu strings (and the recorded runs keyed on them) stay the same.
QEMU_OFF_BY_DEFAULT: dict[str, tuple[str, ...]] = {
    "zvfh": ("zvfhmin", "zfhmin"), "zvfhmin": (), "zvfbfmin": (), "zvfbfwma": ("zvfbfmin", "zfbfmin"),
    "zvbb": ("zvkb",),
    "zfh": ("zfhmin",), "zfhmin": (), "zfbfmin": (),
    "zvbc": (), "zvkb": (), "zvkg": (), "zvkned": (), "zvknha": (), "zvknhb": (), "zvksed": (), "zvksh": (),
    "zvkt": (), "zvkn": ("zvkb", "zvkned", "zvknhb", "zvkt"),
    "zvknc": ("zvbc", "zvkb", "zvkn", "zvkned", "zvknhb", "zvkt"),
    "zvkng": ("zvkb", "zvkg", "zvkn", "zvkned", "zvknhb", "zvkt"), "zvks": ("zvkb", "zvksed", "zvksh", "zvkt"),
    "zvksc": ("zvbc", "zvkb", "zvks", "zvksed", "zvksh", "zvkt"),
    "zvksg": ("zvkb", "zvkg", "zvks", "zvksed", "zvksh", "zvkt"),
    "b": (), "zicond": (), "zimop": (), "zcmop": (), "zcb": (), "zabha": (), "zacas": (), "zama16b": (), "ztso": (),
    "zbkb": (), "zbkc": (), "zbkx": (), "zknd": (), "zkne": (), "zknh": (), "zkr": (), "zksed": (), "zksh": (),
    "zkt": (), "zkn": ("zbkb", "zbkc", "zbkx", "zknd", "zkne", "zknh"),
    "zks": ("zbkb", "zbkc", "zbkx", "zksed", "zksh"),
    "zk": ("zbkb", "zbkc", "zbkx", "zkn", "zknd", "zkne", "zknh", "zkr", "zkt"),
    "zicfilp": (), "zicfiss": (),
    "xtheadba": (), "xtheadbb": (), "xtheadbs": (), "xtheadcmo": (), "xtheadcondmov": (), "xtheadfmemidx": (),
    "xtheadmac": (), "xtheadmemidx": (), "xtheadmempair": (), "xtheadsync": (), "xventanacondops": (),
    "v": ("zve32f", "zve32x", "zve64f", "zve64d", "zve64x"), "zve64d": ("zve32f", "zve32x", "zve64f", "zve64x"),
    "zve64f": ("zve32f", "zve32x", "zve64x"), "zve64x": ("zve32x",), "zve32f": ("zve32x",), "zve32x": (),
}
# QEMU 10.0.2 refuses zicfiss alone ("requires zimop extension", "with zca requires zcmop extension")
QEMU_NEEDS = {"zicfiss": ("zimop", "zcmop")}
# LLVM extensions QEMU 10.0.2 has but refuses on rv64 with F, D and C (its own words). Any other extension LLVM accepts
# is unknown to QEMU 10.0.2 (q, zilsd, zalasr, vendor x* such as xsmtvdot, experimental ones such as zvqdotq).
QEMU_CANNOT = {
    "e": "I and E extensions are incompatible", "zfinx": "Zfinx cannot be supported together with F extension",
    "zdinx": "Zfinx cannot be supported together with F extension",
    "zhinx": "Zfinx cannot be supported together with F extension",
    "zhinxmin": "Zfinx cannot be supported together with F extension",
    "zce": "Zcmp/Zcmt extensions are incompatible with Zcd extension",
    "zcmp": "Zcmp/Zcmt extensions are incompatible with Zcd extension",
    "zcmt": "Zcmp/Zcmt extensions are incompatible with Zcd extension", "zcf": "Zcf extension is only relevant to RV32",
}
QEMU_KNOWN = frozenset(QEMU_OFF_BY_DEFAULT).union(*(set(e.split()) for e in QEMU_CPU_EXTENSIONS.values()))
# the vector extensions: QEMU's v=true (the derived CPUs) enables them all
VECTOR_EXTENSIONS = ("v", "zve32x", "zve32f", "zve64x", "zve64f", "zve64d")
_EXTENSION = re.compile(r"[a-gi-rt-z]|[zx][a-z0-9]+")  # s* and h are privileged: no user-mode instructions
_PROFILE_ALIASES = {"rva20u64": "rv64", "rvi20u64": "rv64"}  # LLVM profile features within what rv64 enables
_NO_INSTRUCTIONS = ("za128rs", "ziccamoc")  # memory-system guarantees QEMU does not name: nothing to trap on
_PROFILE = re.compile(r"rv[abi]\d\d[us]\d\d")


@functools.cache
def riscv_extensions(features: tuple[str, ...]) -> tuple[str, ...]:
    """The RISC-V extensions ``+feature``s name, lower case, in order: a profile feature (``+rva23u64``) stands for
    what QEMU's CPU of that name enables; ``+zvlNb``, ``-`` features, LLVM tuning features, privileged s*/h
    extensions and ``_NO_INSTRUCTIONS`` (nothing in user mode to trap on) are left out."""
    found: list[str] = []
    for feature in features:
        if not feature.startswith("+") or VLEN_FEATURE.match(feature):
            continue
        name = feature[1:].lower().removeprefix("experimental-")
        profile = _PROFILE_ALIASES.get(name, name)
        if _PROFILE.fullmatch(name):  # a profile QEMU has no CPU for stays a name QEMU does not know
            found += QEMU_CPU_EXTENSIONS[profile].split() if profile in QEMU_CPU_EXTENSIONS else [name]
        elif _EXTENSION.fullmatch(name) and name not in _NO_INSTRUCTIONS:
            found.append(name)
    return tuple(dict.fromkeys(found))


def qemu_cpu_extensions(cpu: str) -> frozenset[str] | None:
    """The user-level extensions QEMU enables for ``-cpu CPU`` (``QEMU_CPU_EXTENSIONS`` plus each ``NAME=true``
    with what it turns on, minus each ``NAME=false``); None for a CPU model not measured."""
    model, *props = cpu.split(",")
    if model not in QEMU_CPU_EXTENSIONS:
        return None
    enabled = set(QEMU_CPU_EXTENSIONS[model].split())
    for prop in props:
        name, _, value = (part.strip().lower() for part in prop.partition("="))
        if value in ("true", "on"):
            enabled |= {name, *QEMU_OFF_BY_DEFAULT.get(name, ())}
        elif value in ("false", "off"):
            enabled.discard(name)
    return frozenset(enabled)


def cpu_vlen(cpu: str) -> int | None:
    """The ``vlen=`` a QEMU CPU string sets, if any."""
    match = _QEMU_VLEN.search(cpu)
    return int(match.group(1)) if match else None


def gated(extensions: tuple[str, ...]) -> tuple[str, ...]:
    """The ``extensions`` that ``-cpu rv64`` leaves off (``QEMU_OFF_BY_DEFAULT``, in its order), vector unit aside
    (``v=true``): each needs ``NAME=true`` in the QEMU CPU string."""
    wanted = set(extensions) | {need for ext in extensions for need in QEMU_NEEDS.get(ext, ())}
    return tuple(e for e in QEMU_OFF_BY_DEFAULT if e in wanted and e not in VECTOR_EXTENSIONS)


def riscv64_cpu(extensions: tuple[str, ...], min_vlen: int) -> str:
    """The QEMU CPU derived for riscv64 code with ``extensions``: ``rv64`` with the vector unit at ``min_vlen``
    (or off) and every gated extension turned on."""
    turned_on = "".join(f",{e}=true" for e in gated(extensions))
    if not any(e in VECTOR_EXTENSIONS for e in extensions):
        return f"rv64,v=false{turned_on}"
    return f"rv64,v=true,vlen={min_vlen},elen=64,vext_spec=v1.0{turned_on}"


def missing_extensions(cpu: str, extensions: tuple[str, ...]) -> tuple[str, ...]:
    """The ``extensions`` QEMU's ``cpu`` does not enable; () for a CPU model not measured (a vendor core)."""
    enabled = qemu_cpu_extensions(cpu)
    return () if enabled is None else tuple(e for e in extensions if e not in enabled)


def check_vlen(target: str, cpu: str, min_vlen: int) -> None:
    """Refuse a vector CPU whose VLEN is below what the code was compiled for: results would be wrong."""
    vlen = cpu_vlen(cpu)
    if vlen is None:
        raise ConfigError(
            f"target {target!r}: emulator-cpu {cpu!r} sets no vlen=; "
            f"add vlen={min_vlen} or more (the code assumes VLEN >= {min_vlen})"
        )
    if vlen < min_vlen:
        raise ConfigError(
            f"target {target!r}: QEMU vlen={vlen} is smaller than the compiled +zvl{min_vlen}b; "
            f"it would run with silently wrong results: use vlen>={min_vlen} in emulator-cpu"
        )


def check_enabled(target: str, cpu: str, missing: tuple[str, ...]) -> None:
    """Refuse a CPU that lacks (``missing``) an extension QEMU can enable: its instructions would trap.

    Those QEMU cannot enable are refused when the target runs under QEMU (``check_runs``), since a board may run
    them."""
    can = [e for e in missing if e in QEMU_KNOWN]
    if can:
        raise ConfigError(
            f"target {target!r}: compiled with {', '.join('+' + e for e in can)} but QEMU -cpu "
            f"{cpu!r} does not enable it (its instructions would trap): add "
            f"{','.join(e + '=true' for e in can)} to emulator-cpu"
        )


def check_runs(target: str, missing: tuple[str, ...]) -> None:
    """Refuse, before a run under QEMU, an extension (of the CPU's ``missing`` ones) QEMU (as measured:
    ``QEMU_MEASURED``) does not have or cannot enable with F, D and C: its instructions would trap."""
    for ext in missing:
        if ext in QEMU_KNOWN:
            continue  # refused when the target was made (check_enabled)
        reason = QEMU_CANNOT.get(ext, f"it has no {ext}")
        raise ConfigError(
            f"target {target!r}: compiled with +{ext}, which QEMU {QEMU_MEASURED} cannot emulate ({reason}; "
            f"its instructions would trap): run it on a board (--rvv-board), drop +{ext} from features, or add "
            f"{ext}=true to emulator-cpu for a QEMU that has it"
        )
