"""Targets: built-in flag sets, emulator CPU strings, and refusing a too-small QEMU vlen."""

import pytest

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.config.targets import BUILTIN_TARGETS, Target, microkernel_pairs, path_twins, target_from_table


def test_builtin_targets_run_by_default_are_the_documented_set():
    assert [n for n, t in BUILTIN_TARGETS.items() if t.selected] == [
        "rv64gc", "rv64gcv-zvl128b", "rv64gcv-zvl256b", "rv64gcv-zvl512b", "rv64gcv-zvl256b-mmt4d", "rva23u64",
        "aarch64", "host"]


def test_the_vlen_256_families_have_a_twin_on_every_matmul_path_named_by_suffix():
    twins = path_twins(BUILTIN_TARGETS)
    for base in ("rv64gcv-zvl256b", "rv64gcv-zvl256b-zvfh", "rv64gcv-zvl256b-zvfhmin", "rv64gcv-zvl256b-zvfbfwma"):
        ukernels_all = {"ukernels-all": f"{base}-ukall"} if base == "rv64gcv-zvl256b" else {}
        assert twins[base] == {"default": base, "data-tiled": f"{base}-dt", "mmt4d": f"{base}-mmt4d",
                               "inner-tiled": f"{base}-inner"} | ukernels_all
        for path, name in twins[base].items():
            assert BUILTIN_TARGETS[name].path == path
            assert BUILTIN_TARGETS[name].emulator_cpu == BUILTIN_TARGETS[base].emulator_cpu
    inner = BUILTIN_TARGETS["rv64gcv-zvl256b-inner"].compiler_flags()
    assert inner[-3:] == ["--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=none",
                          "--iree-llvmcpu-enable-inner-tiled"]


def test_a_target_table_chooses_a_path_by_name_and_an_unknown_path_is_one_line():
    target = target_from_table("mine", {"extends": "rv64gcv-zvl512b", "path": "inner-tiled"}, BUILTIN_TARGETS)
    assert target.path == "inner-tiled" and target.emulator_cpu == BUILTIN_TARGETS["rv64gcv-zvl512b"].emulator_cpu
    moved = target_from_table("back", {"extends": "rv64gcv-zvl256b-mmt4d", "path": "default"}, BUILTIN_TARGETS)
    assert moved.compiler_flags() == BUILTIN_TARGETS["rv64gcv-zvl256b"].compiler_flags()
    with pytest.raises(ConfigError, match=r"^\[tool.pytest_rvv.targets.bad\]: unknown matmul path 'ukernel'; "
                                          r"known: default, data-tiled, mmt4d, inner-tiled, ukernels-all$"):
        target_from_table("bad", {"extends": "rv64gcv-zvl256b", "path": "ukernel"}, BUILTIN_TARGETS)


def test_the_ukernels_all_twin_is_iree_issue_24932s_ukernel_side_flag_for_flag():
    """The issue's "ukernel" compile: every microkernel (pack and unpack too) and inner_tiled off, on
    +m,+a,+f,+d,+c,+v,+zvl256b, run where its default twin runs."""
    default, ukall = BUILTIN_TARGETS["rv64gcv-zvl256b"], BUILTIN_TARGETS["rv64gcv-zvl256b-ukall"]
    assert ukall.compiler_flags() == [*default.compiler_flags(), "--iree-opt-data-tiling",
                                      "--iree-llvmcpu-enable-ukernels=all", "--iree-llvmcpu-enable-inner-tiled=false"]
    assert ukall.features == ("+m", "+a", "+f", "+d", "+c", "+v", "+zvl256b") and ukall.path == "ukernels-all"
    assert ukall.emulator_cpu == default.emulator_cpu and not ukall.selected
    # the flag that restates iree-compile's default is not needed to be on the path; =mmt4d is another path
    spelled = target_from_table("mine", {"extends": "rv64gcv-zvl256b", "extra-flags": [
        "--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=all"]}, BUILTIN_TARGETS)
    assert spelled.path == "ukernels-all" and BUILTIN_TARGETS["rv64gcv-zvl256b-mmt4d"].path == "mmt4d"
    assert "rv64gcv-zvl256b-zvfh-ukall" not in BUILTIN_TARGETS  # only the family iree issue 24932's rows run on


def test_microkernel_target_is_the_default_path_plus_data_tiling_and_mmt4d_ukernels():
    default, mmt4d = BUILTIN_TARGETS["rv64gcv-zvl256b"], BUILTIN_TARGETS["rv64gcv-zvl256b-mmt4d"]
    assert mmt4d.compiler_flags() == [*default.compiler_flags(), "--iree-opt-data-tiling",
                                      "--iree-llvmcpu-enable-ukernels=mmt4d"]
    assert mmt4d.emulator_cpu == default.emulator_cpu


def test_rva23_target_runs_on_qemus_profile_cpu_with_the_optional_extensions_it_compiles_for():
    target = BUILTIN_TARGETS["rva23u64"]
    assert {"+v", "+zvbb", "+zvfhmin", "+zvfh", "+zvfbfmin", "+zba", "+zicond"} <= set(target.features)
    assert target.emulator_cpu.startswith("rva23u64,") and "zvfh=true" in target.emulator_cpu
    assert target.emulator_vlen == target.min_vlen == 128


def test_extensions_qemu_must_be_told_about_are_derived_into_the_emulator_cpu():
    target = Target("half", "riscv64", features=("+v", "+zvl256b", "+zvfh", "+zvbb"))
    assert target.emulator_cpu == "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0,zvfh=true,zvbb=true"


@pytest.mark.parametrize(("cpu", "missing"), [
    ("rv64,v=true,vlen=128", "+zvfh"),
    ("rva23u64,vlen=128", "+zvfh"),  # the profile CPU implies zvfhmin and zvbb, not zvfh
])
def test_an_emulator_cpu_without_an_extension_the_code_uses_is_refused(cpu, missing):
    refused = rf"compiled with \{missing}.* but QEMU -cpu .* does not enable it.*zvfh=true"
    with pytest.raises(ConfigError, match=refused):
        Target("half", "riscv64", features=("+v", "+zvl128b", "+zvfh", "+zvbb"), emulator_cpu=cpu)


def test_a_profile_cpu_enables_what_the_profile_mandates():
    target = Target("rva23", "riscv64", features=("+v", "+zvl128b", "+zvfhmin", "+zvbb"),
                    emulator_cpu="rva23u64,vlen=128")
    assert target.emulator_gated == ("zvfhmin", "zvbb")


def test_scalar_target_compiles_rv64gc_and_runs_without_vector_unit():
    target = BUILTIN_TARGETS["rv64gc"]
    assert "--iree-llvmcpu-target-cpu-features=+m,+a,+f,+d,+c" in target.compiler_flags()
    assert "--iree-llvmcpu-target-triple=riscv64-unknown-linux-gnu" in target.compiler_flags()
    assert "--iree-llvmcpu-target-abi=lp64d" in target.compiler_flags()
    assert target.emulator_cpu == "rv64,v=false"
    assert not target.has_vector


@pytest.mark.parametrize("vlen", [128, 256, 512])
def test_vector_target_pairs_qemu_vlen_with_zvl(vlen):
    target = BUILTIN_TARGETS[f"rv64gcv-zvl{vlen}b"]
    assert f"+v,+zvl{vlen}b" in " ".join(target.compiler_flags())
    assert target.emulator_cpu == f"rv64,v=true,vlen={vlen},elen=64,vext_spec=v1.0"
    assert target.min_vlen == target.emulator_vlen == vlen


def test_qemu_vlen_smaller_than_compiled_zvl_is_refused():
    with pytest.raises(ConfigError, match=r"vlen=128 is smaller than the compiled \+zvl512b.*silently wrong"):
        Target("bad", "riscv64", features=("+v", "+zvl512b"), emulator_cpu="rv64,v=true,vlen=128,elen=64")


def test_qemu_vlen_larger_than_zvl_is_allowed():
    target = Target("wide", "riscv64", features=("+v", "+zvl128b"), emulator_cpu="rv64,v=true,vlen=1024,elen=64")
    assert target.emulator_vlen == 1024


def test_user_target_extends_a_builtin_and_rederives_vlen():
    target = target_from_table("rv64gcv-zvl1024b", {
        "extends": "rv64gcv-zvl512b",
        "features": ["+m", "+a", "+f", "+d", "+c", "+v", "+zvl1024b"],
        "extra-flags": ["--iree-opt-data-tiling"],
    }, BUILTIN_TARGETS)
    assert target.min_vlen == 1024
    assert "vlen=1024" in target.emulator_cpu
    assert target.compiler_flags()[-1] == "--iree-opt-data-tiling"


def test_user_target_with_unknown_key_names_the_table_and_key():
    with pytest.raises(ConfigError, match=r"\[tool.pytest_rvv.targets.x\]: unknown key\(s\) fetures"):
        target_from_table("x", {"extends": "rv64gc", "fetures": []}, BUILTIN_TARGETS)


def test_user_target_extending_unknown_target_is_refused():
    with pytest.raises(ConfigError, match="extends unknown target 'rv32'"):
        target_from_table("x", {"extends": "rv32"}, BUILTIN_TARGETS)


def test_a_user_defined_data_tiled_twin_at_vlen_512_pairs_with_its_default_path_on_the_x280():
    """The microkernel comparison for the X280 (VLEN 512): one table in pyproject.toml, no code."""
    twin = target_from_table("rv64gcv-zvl512b-mmt4d", {
        "extends": "rv64gcv-zvl512b",
        "extra-flags": ["--iree-opt-data-tiling", "--iree-llvmcpu-enable-ukernels=mmt4d"]}, BUILTIN_TARGETS)
    targets = {**BUILTIN_TARGETS, twin.name: twin}
    assert ("rv64gcv-zvl512b", "rv64gcv-zvl512b-mmt4d") in microkernel_pairs(targets)
    assert "sifive-x280" in [c.name for c in twin.cores()]
    assert twin.emulator_cpu == BUILTIN_TARGETS["rv64gcv-zvl512b"].emulator_cpu


def test_a_module_on_another_matmul_path_runs_where_its_twin_runs_and_nowhere_else():
    """The runtime probe is compiled off the path (it has no matmul): the twin's runner must accept it."""
    default, inner = BUILTIN_TARGETS["rv64gcv-zvl256b"], BUILTIN_TARGETS["rv64gcv-zvl256b-inner"]
    assert inner.runs_as(default) and default.runs_as(inner)
    assert not BUILTIN_TARGETS["rv64gcv-zvl512b"].runs_as(default)
    assert not BUILTIN_TARGETS["rv64gcv-zvl256b-zvfh"].runs_as(default)
