"""The QEMU CPU a riscv64 target runs on enables every extension the target compiles for.

The tables in config/emulator.py are checked against QEMU itself: a static riscv64 program built here prints
/proc/cpuinfo, whose ``isa`` line QEMU linux-user fills with every extension the CPU enables. A SIGILL names its
instruction and the extension the CPU lacks, through the real compiler, runtime, QEMU and llvm-mc.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import ConfigError, RunFailed, RuntimeNotProvided
from pytest_rvv.config.emulator import (
    QEMU_CANNOT,
    QEMU_CPU_EXTENSIONS,
    QEMU_NEEDS,
    QEMU_OFF_BY_DEFAULT,
    qemu_cpu_extensions,
)
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS, RISCV64, Target, target_from_table
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.runner import Runner
from pytest_rvv.session import RvvSession
from pytest_rvv.toolchain.runtimes import Runtime

from .conftest import USER_CACHE, save_model

CROSS_GCC = "riscv64-linux-gnu-gcc"
CLANG = "clang-22"
CPUINFO = r"""
#include <stdio.h>
int main(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char buf[4096];
    size_t n;
    if (!f) return 1;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
    return 0;
}
"""
# The user target of the issue: f16 through IREE's data-tiled mmt4d microkernels (iree PR 22231's features).
F16_TABLE = {
    "arch": "riscv64",
    "features": ["+m", "+a", "+f", "+d", "+zvl256b", "+v", "+zfhmin", "+zvfhmin"],
    "extra-flags": ["--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=mmt4d"],
}
F16_CPU = "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0,zvfhmin=true,zfhmin=true"
WITHOUT_ZFHMIN = "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0,zvfhmin=true"  # the CPU: SIGILL
F16_TOML = """
[tool.pytest_rvv.targets.f16]
arch = "riscv64"
features = ["+m", "+a", "+f", "+d", "+zvl256b", "+v", "+zfhmin", "+zvfhmin"]
extra-flags = ["--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=mmt4d"]
{cpu}
[tool.pytest_rvv.models.f16mm]
path = "f16mm.onnx"
inputs = [{{ name = "x", shape = [4, 64] }}]
tolerance = {{ atol = 2e-2, rtol = 2e-2 }}
"""


def f16_target() -> Target:
    return target_from_table("f16", F16_TABLE, BUILTIN_TARGETS)


def f16_model(path: Path) -> Path:
    """x f32 -> Cast f16 -> MatMul (f16 weights, data-tiled: mmt4d) -> Add -> Mul -> Cast f32."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float16), "w")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float16), "b")
    nodes = [helper.make_node("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
             helper.make_node("MatMul", ["xh", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Mul", ["a", "a"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])], [w, b], name="f16mm")


# --- what QEMU enables, read from QEMU itself -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cpuinfo(tmp_path_factory) -> Path:
    """A static riscv64 program that prints /proc/cpuinfo (built here; no binary is committed)."""
    if shutil.which(CROSS_GCC) is None:
        pytest.skip(f"{CROSS_GCC} not installed: apt-get install gcc-riscv64-linux-gnu (bash scripts/setup.sh system)")
    folder = tmp_path_factory.mktemp("cpuinfo")
    (folder / "cpuinfo.c").write_text(CPUINFO)
    subprocess.run([CROSS_GCC, "-O1", "-static", "-o", folder / "cpuinfo", folder / "cpuinfo.c"], check=True)
    return folder / "cpuinfo"


def qemu_isa(program: Path, cpu: str) -> frozenset[str] | str:
    """The user-level extensions of QEMU's isa line under ``-cpu cpu``, or QEMU's error line."""
    proc = subprocess.run([str(find_qemu(RISCV64).path), "-cpu", cpu, str(program)], capture_output=True, text=True,
                          timeout=60)
    match = re.search(r"^isa\s*:\s*rv64([a-z]*)((?:_\w+)*)$", proc.stdout, re.M)
    if match is None:
        return proc.stderr.strip().splitlines()[0].removeprefix("qemu-riscv64: ")
    letters, rest = match.group(1), match.group(2).split("_")[1:]
    return frozenset([c for c in letters if c != "h"] + [e for e in rest if not e.startswith(("s", "h"))])


def isas(program: Path, cpus: list[str]) -> dict[str, frozenset[str] | str]:
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(cpus, pool.map(lambda cpu: qemu_isa(program, cpu), cpus), strict=True))


def test_each_qemu_cpu_model_enables_what_the_table_says(cpuinfo):
    measured = isas(cpuinfo, list(QEMU_CPU_EXTENSIONS))
    for model, table in QEMU_CPU_EXTENSIONS.items():
        assert measured[model] == frozenset(table.split()), model


def test_each_extension_rv64_leaves_off_is_enabled_by_its_property_with_what_the_table_says(cpuinfo):
    def start(ext: str) -> str:  # the vector unit's own extensions from plain rv64, the others with v=true
        return "rv64" if ext == "v" or ext.startswith("zve") else "rv64,v=true"

    def cpu(ext: str) -> str:
        return ",".join([start(ext), *(f"{need}=true" for need in QEMU_NEEDS.get(ext, ())), f"{ext}=true"])

    base = isas(cpuinfo, ["rv64", "rv64,v=true"])
    measured = isas(cpuinfo, [cpu(ext) for ext in QEMU_OFF_BY_DEFAULT])
    for ext, implied in QEMU_OFF_BY_DEFAULT.items():
        assert ext not in base["rv64"], f"QEMU's rv64 now enables {ext} by default"
        added = measured[cpu(ext)] - base[start(ext)] - set(QEMU_NEEDS.get(ext, ()))
        assert added == {ext, *implied}, ext
        assert qemu_cpu_extensions(cpu(ext)) == measured[cpu(ext)], ext  # the model the checks use


def test_every_extension_llvm_knows_is_in_the_tables_or_unknown_to_qemu(cpuinfo):
    """So a feature of any target is enabled, enabled by NAME=true, or refused: never ignored (but za128rs and
    ziccamoc, which have no instructions)."""
    if shutil.which(CLANG) is None:
        pytest.skip(f"{CLANG} not installed (bash scripts/setup.sh system)")
    listing = subprocess.run([CLANG, "--target=riscv64-linux-gnu", "--print-supported-extensions"],
                             capture_output=True, text=True, check=True).stdout
    names = [m.group(1) for m in re.finditer(r"^\s+([a-z][a-z0-9]*)\s+\d+\.\d+\s", listing, re.M)]
    user = [n for n in names if not n.startswith(("s", "h")) and not re.fullmatch(r"zvl\d+b", n)]
    assert {"zfhmin", "zvfh", "xsmtvdot"} <= set(user)
    rv64 = frozenset(QEMU_CPU_EXTENSIONS["rv64"].split())
    rest = [n for n in user if n not in rv64 and n not in QEMU_OFF_BY_DEFAULT]
    measured = isas(cpuinfo, [f"rv64,v=true,{n}=true" for n in rest])
    for name in rest:
        answer = measured[f"rv64,v=true,{name}=true"]
        if name in QEMU_CANNOT:
            assert answer == QEMU_CANNOT[name], name
        else:
            assert answer == f"can't apply global rv64-riscv-cpu.{name}=true: Property 'rv64-riscv-cpu.{name}' " \
                             "not found", name


@pytest.mark.parametrize("target", [
    f16_target(),
    BUILTIN_TARGETS["rva23u64"],
    Target("crypto", RISCV64, features=("+m", "+a", "+f", "+d", "+c", "+v", "+zvl128b", "+zvkn", "+zvbc", "+zbkb",
                                        "+zfh", "+zicond", "+zfbfmin", "+zcb", "+zacas")),
    Target("profile", RISCV64, features=("+rva23u64", "+zvl256b")),
], ids=lambda t: t.name)
def test_qemu_enables_every_extension_of_the_target_under_its_emulator_cpu(cpuinfo, target):
    enabled = qemu_isa(cpuinfo, target.emulator_cpu)
    assert isinstance(enabled, frozenset), enabled
    assert set(target.extensions) <= enabled
    assert target.emulator_missing() == ()


# --- deriving and refusing emulator CPUs -----------------------------------------------------------------------


def test_the_f16_user_target_runs_on_a_cpu_with_zfhmin():
    target = f16_target()
    assert target.emulator_cpu == F16_CPU
    assert "zfhmin" in qemu_cpu_extensions(target.emulator_cpu)


def test_the_builtin_targets_keep_their_emulator_cpus():
    """Recorded runs are keyed on the emulator CPU string: the built-ins' must not move."""
    assert {name: t.emulator_cpu for name, t in BUILTIN_TARGETS.items() if t.selected} == {
        "rv64gc": "rv64,v=false",
        "rv64gcv-zvl128b": "rv64,v=true,vlen=128,elen=64,vext_spec=v1.0",
        "rv64gcv-zvl256b": "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0",
        "rv64gcv-zvl512b": "rv64,v=true,vlen=512,elen=64,vext_spec=v1.0",
        "rv64gcv-zvl256b-mmt4d": "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0",
        "rva23u64": "rva23u64,zvfh=true,zvfbfmin=true,vlen=128,elen=64",
        "aarch64": "max",
        "host": "",
    }
    twins = {name: t.emulator_cpu for name, t in BUILTIN_TARGETS.items() if not t.selected}
    plain = BUILTIN_TARGETS["rv64gcv-zvl256b"].emulator_cpu
    assert twins["rv64gcv-zvl256b-inner"] == twins["rv64gcv-zvl256b-dt"] == plain
    assert twins["rv64gcv-zvl256b-zvfh-mmt4d"] == "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0,zvfh=true,zfh=true"


def test_a_scalar_extension_is_derived_on_a_scalar_target_too():
    target = Target("half", RISCV64, features=("+m", "+a", "+f", "+d", "+c", "+zfh", "+zicond"))
    assert target.emulator_cpu == "rv64,v=false,zfh=true,zicond=true"


def test_a_user_emulator_cpu_without_zfhmin_is_refused_in_one_line_naming_it():
    with pytest.raises(ConfigError) as refused:
        target_from_table("f16", {**F16_TABLE, "emulator-cpu": WITHOUT_ZFHMIN}, BUILTIN_TARGETS)
    assert str(refused.value) == (f"target 'f16': compiled with +zfhmin but QEMU -cpu '{WITHOUT_ZFHMIN}' does not "
                                  "enable it (its instructions would trap): add zfhmin=true to emulator-cpu")


def test_a_profile_cpu_lacking_an_extension_is_refused_and_one_having_it_is_not():
    features = ("+m", "+a", "+f", "+d", "+c", "+v", "+zvl128b", "+zfh", "+zvbb")
    with pytest.raises(ConfigError, match=r"compiled with \+zfh but QEMU -cpu 'rva23u64,vlen=128'.*add zfh=true"):
        Target("x", RISCV64, features=features, emulator_cpu="rva23u64,vlen=128")  # it has zfhmin, not zfh
    assert Target("x", RISCV64, features=features, emulator_cpu="max,vlen=128").emulator_missing() == ()
    with pytest.raises(ConfigError, match=r"compiled with \+zba but .*'rv64,v=true,vlen=128,zba=false'"):
        Target("x", RISCV64, features=("+v", "+zba"), emulator_cpu="rv64,v=true,vlen=128,zba=false")


@pytest.mark.parametrize(("feature", "reason"), [
    ("+xsmtvdot", "it has no xsmtvdot"),
    ("+experimental-zvqdotq", "it has no zvqdotq"),
    ("+zcmp", "Zcmp/Zcmt extensions are incompatible with Zcd extension"),
])
def test_an_extension_qemu_cannot_emulate_is_refused_when_the_target_runs_under_qemu(feature, reason):
    """A board runs it (the target is made), QEMU does not (the runner refuses it in one line)."""
    target = Target("ime", RISCV64, features=("+m", "+a", "+f", "+d", "+c", "+v", "+zvl256b", feature))
    ext = feature.removeprefix("+").removeprefix("experimental-")
    assert ext in target.emulator_missing() and f"{ext}=true" not in target.emulator_cpu
    runtime = Runtime(RISCV64, Path("/bin/true"), None, "not run")
    with pytest.raises(ConfigError) as refused:
        Runner(target, runtime, find_qemu(RISCV64))
    assert str(refused.value) == (
        f"target 'ime': compiled with +{ext}, which QEMU 10.0.2 cannot emulate ({reason}; its instructions would "
        f"trap): run it on a board (--rvv-board), drop +{ext} from features, or add {ext}=true to emulator-cpu for "
        "a QEMU that has it")
    named = dataclasses.replace(target, emulator_cpu=f"{target.emulator_cpu},{ext}=true")
    Runner(named, runtime, find_qemu(RISCV64))  # a QEMU that has it: the CPU string names it


# --- end to end ----------------------------------------------------------------------------------------------------


@pytest.fixture
def f16_session(tmp_path):
    f16_model(tmp_path / "f16mm.onnx")
    models = {"f16mm": {"path": "f16mm.onnx", "inputs": [{"name": "x", "shape": [4, 64]}],
                        "tolerance": {"atol": 2e-2, "rtol": 2e-2}}}
    settings = Settings.resolve(lambda option: None, {"models": models}, tmp_path)
    session = RvvSession(dataclasses.replace(settings, cache_dir=USER_CACHE))
    return session, dict(settings.known_models)["f16mm"]


def test_the_f16_model_on_the_f16_target_with_data_tiling_agrees_with_onnxruntime(project):
    f16_model(project.path / "f16mm.onnx")
    project.write(models=(), extra=F16_TOML.format(cpu=""))
    result = project.run("correctness/test_agreement.py", "--rvv-models=f16mm", "--rvv-targets=f16")
    result.assert_outcomes(passed=1)


def test_the_f16_target_with_an_emulator_cpu_lacking_zfhmin_is_refused_in_the_session(project):
    f16_model(project.path / "f16mm.onnx")
    project.write(models=(), extra=F16_TOML.format(cpu=f'emulator-cpu = "{WITHOUT_ZFHMIN}"'))
    result = project.run("correctness/test_agreement.py", "--rvv-models=f16mm", "--rvv-targets=f16")
    assert result.ret != 0
    assert f"ERROR: target 'f16': compiled with +zfhmin but QEMU -cpu '{WITHOUT_ZFHMIN}' does not enable it (its " \
           "instructions would trap): add zfhmin=true to emulator-cpu" in result.stderr.lines


@pytest.mark.parametrize(("cpu", "named"), [
    (WITHOUT_ZFHMIN, r"flh f\w+, 0\(\w+\) at 0x[0-9a-f]+ needs \+zfhmin, which QEMU -cpu '{cpu}' does not enable "
                     r"\(add zfhmin=true to emulator-cpu\)"),
    ("rv64,v=true,vlen=256,elen=64,vext_spec=v1.0,zfhmin=true",
     r"vf\S+ v\d+, v\d+ at 0x[0-9a-f]+ decodes with what QEMU -cpu '{cpu}' enables, so its operands need one of the "
     r"target's extensions the CPU lacks: \+zvfhmin \(add zvfhmin=true to emulator-cpu\)"),
], ids=["scalar-flh", "vector-sew16"])
def test_a_sigill_names_the_instruction_and_the_extension_the_cpu_lacks(f16_session, tmp_path, cpu, named):
    """The issue's run, made by hand: the module compiled for the f16 target, run on a CPU the target refuses."""
    session, model = f16_session
    artifact = session.artifact(model, f16_target())
    lacking = copy.copy(artifact.target)
    object.__setattr__(lacking, "emulator_cpu", cpu)  # past the refusal a user target gets when it is made
    try:
        runner = Runner(lacking, session.runtime(RISCV64), session.qemu(RISCV64))
    except RuntimeNotProvided as exc:
        pytest.skip(str(exc))
    with pytest.raises(RunFailed) as failure:
        runner.run(dataclasses.replace(artifact, target=lacking), session.oracle(model).inputs, tmp_path / "run",
                   1, timeout_s=60)
    message = str(failure.value)
    assert "\n" not in message
    assert re.search(r"killed by SIGILL running f16mm for f16 under qemu-riscv64 [\d.]+ -cpu \S+: "
                     + named.format(cpu=re.escape(cpu)) + "$", message), message
    assert "--- SIGILL at 0x" in failure.value.details and "llvm-mc-22 with the CPU's extensions" in \
        failure.value.details
