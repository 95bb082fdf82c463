"""Specification: targets that differ only in their CPU share one compile up to codegen, and every module made from
the shared phase is byte-identical to the module a full compile makes (compile/phases.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import CompileFailed
from pytest_rvv.base.store import Store
from pytest_rvv.compile.compiler import Compiler, ImportedModel
from pytest_rvv.compile.phases import global_groups, global_key, group_key, occurrences, retarget, shared_groups
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import HOST, Target
from pytest_rvv.toolchain.toolchain import find_toolchain
from tests.conftest import save_model, unsupported_model

KNOWN = Settings.resolve(lambda option: None, {}, Path(".")).known_targets


def _groups() -> dict[tuple[str, ...], list[Target]]:
    groups: dict[tuple[str, ...], list[Target]] = {}
    for target in KNOWN.values():
        if target.arch != HOST:
            groups.setdefault(group_key(target.compiler_flags()), []).append(target)
    return {key: members for key, members in groups.items() if len(members) > 1}


GROUPS = _groups()


def conv_matmul_model(path: Path) -> Path:
    """A conv, a matmul and constants folded at compile time: what every path and global optimization touch."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
               for name, shape in (("w", (16, 8, 3, 3)), ("m", (64, 24)), ("s", (64, 24)))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["f"]),
        helper.make_node("Add", ["m", "s"], ["ms"]),  # constant work, hoisted and evaluated by the compiler
        helper.make_node("MatMul", ["f", "ms"], ["y"]),
    ]
    shape = numpy_helper.from_array(np.array([16, 64], dtype=np.int64), "shape")
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 24])], [*weights, shape],
                      name="convmm")


def gru_model(path: Path) -> Path:
    """A GRU over 6 steps, as nsnet2 has: IREE lowers it to a loop, whose block arguments carry locations."""
    rng = np.random.default_rng(1)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)
               for name, shape in (("W", (1, 24, 4)), ("R", (1, 24, 8)))]
    nodes = [helper.make_node("GRU", ["x", "W", "R"], ["", "h"], hidden_size=8)]
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, 4])],
                      [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 1, 8])], weights, name="gru")


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ImportedModel]:
    root = tmp_path_factory.mktemp("phases")
    path = conv_matmul_model(root / "convmm.onnx")
    return root, Compiler(find_toolchain(), Store(root / "import")).import_onnx("convmm", path, 17)


def _module(compiler: Compiler, imported: ImportedModel, target: Target) -> tuple[dict[str, bytes], dict]:
    artifact = compiler.compile("convmm", imported, target)
    meta = json.loads((artifact.path.parent / "manifest.json").read_text())["meta"]
    files = {"module.vmfb": artifact.path.read_bytes()} | {p.name: p.read_bytes() for p in artifact.executables}
    return files, meta


def test_the_default_targets_share_one_phase_and_the_host_and_aarch64_compile_in_full():
    defaults = {t.name: t for t in KNOWN.values() if t.selected}
    (group,) = shared_groups(t.compiler_flags() for t in defaults.values() if t.arch != HOST)
    sharing = sorted(name for name, t in defaults.items() if group_key(t.compiler_flags()) == group)
    assert sharing == ["rv64gc", "rv64gcv-zvl128b", "rv64gcv-zvl256b", "rv64gcv-zvl512b", "rva23u64"]
    assert {"rv64gcv-zvl256b-dt", "rv64gcv-zvl256b-zvfh-dt"} <= {t.name for m in GROUPS.values() for t in m}


@pytest.mark.parametrize("key", list(GROUPS), ids=[GROUPS[k][0].name + "-group" for k in GROUPS])
def test_a_module_made_from_the_shared_phase_is_the_full_compile_byte_for_byte(key, imported, tmp_path):
    _, model = imported
    members = [GROUPS[key][0], GROUPS[key][-1]]  # the first makes the phase, the last is retargeted from it
    shared = Compiler(find_toolchain(), Store(tmp_path / "shared"), targets=members)
    full = Compiler(find_toolchain(), Store(tmp_path / "full"))
    for target in members:
        made, meta = _module(shared, model, target)
        assert meta["made"].startswith("shared executable-sources phase"), (target.name, meta["made"])
        expected, full_meta = _module(full, model, target)
        assert full_meta["made"] == "full"
        assert made.keys() == expected.keys(), target.name
        differ = [name for name in made if made[name] != expected[name]]
        assert not differ, f"{target.name}: {differ} differ from the full compile"
        assert "--compile-from" not in meta["command"]  # the line a user reruns is the full compile's


def test_a_damaged_phase_is_compiled_again_and_the_module_is_still_the_full_compile(imported, tmp_path):
    _, model = imported
    first, second = KNOWN["rv64gc"], KNOWN["rv64gcv-zvl128b"]
    shared = Compiler(find_toolchain(), Store(tmp_path / "shared"), targets=[first, second])
    _module(shared, model, first)
    (phase,) = (tmp_path / "shared" / "phases").glob("*/*/sources.mlir")
    phase.write_text(phase.read_text()[:1000])  # cut short, as a full disk or a killed copy leaves it
    made, meta = _module(shared, model, second)
    assert meta["made"].startswith("shared executable-sources phase")
    assert len(phase.read_text()) > 1000  # compiled again
    expected, _ = _module(Compiler(find_toolchain(), Store(tmp_path / "full")), model, second)
    assert made == expected


def test_a_copy_retargeted_by_its_kept_offsets_is_the_text_with_every_attribute_replaced(tmp_path):
    given, wanted = '<"llvm-cpu", {cpu_features = "+v,+zvl256b"}>', '<"llvm-cpu", {cpu_features = "+v,+zvl512b,+zfh"}>'
    # several variants, a location with a multi-byte name (byte offsets, not characters) and a long weight in hex
    text = (f"#hal.device.target<\"local\", [#hal.executable.target{given}]>\n"
            f'loc("w\u00e4gen.onnx":1:1) {given}{given}\n dense<"0x{"0A" * 300_000}">\n{given} end\n')
    phase = tmp_path / "sources.mlir"
    phase.write_text(text)
    offsets = occurrences(phase, given)
    assert len(offsets) == 4
    for kept in (offsets, None):  # kept with the phase, or found again (an entry made before offsets were kept)
        retarget(phase, given, wanted, tmp_path / "copy.mlir", kept)
        assert (tmp_path / "copy.mlir").read_text() == text.replace(given, wanted)
    retarget(phase, given, given, tmp_path / "same.mlir", offsets)
    assert (tmp_path / "same.mlir").read_bytes() == phase.read_bytes()
    with pytest.raises(ValueError, match="does not carry the target attribute"):  # offsets that miss it: refused
        retarget(phase, given, wanted, tmp_path / "off.mlir", [offsets[0], offsets[1] + 1])
    with pytest.raises(ValueError, match="does not carry the target attribute"):
        retarget(phase, wanted, given, tmp_path / "none.mlir")


def test_a_model_the_compiler_rejects_fails_with_the_full_compiles_line_when_its_targets_share_a_phase(tmp_path):
    path = unsupported_model(tmp_path / "strings.onnx")
    group = [KNOWN["rv64gc"], KNOWN["rv64gcv-zvl256b"]]
    lines = []
    for name, targets in (("shared", group), ("full", ())):
        compiler = Compiler(find_toolchain(), Store(tmp_path / name), targets=targets)
        try:
            imported = compiler.import_onnx("strings", path, 17)
            compiler.compile("strings", imported, group[1])
        except CompileFailed as exc:  # imported fine, rejected by iree-compile
            lines.append(str(exc))
    assert len(lines) == 2 and lines[0] == lines[1]


# the default run's kinds of target and the kernel suite's inner-tiled path: three architectures, three paths
ACROSS = ["rv64gc", "rv64gcv-zvl256b", "rv64gcv-zvl256b-mmt4d", "rv64gcv-zvl256b-inner", "aarch64", "host"]


def test_targets_that_differ_in_where_the_code_runs_and_its_matmul_path_start_from_one_global_phase():
    targets = [KNOWN[name] for name in ACROSS]
    shared = shared_groups(t.compiler_flags() for t in targets if t.arch != HOST)
    assert global_groups((t.compiler_flags() for t in targets), shared) == {global_key(targets[0].compiler_flags())}
    alone = [KNOWN["rv64gc"], KNOWN["rv64gcv-zvl256b"]]  # one executable-sources group: nothing to share earlier
    assert not global_groups((t.compiler_flags() for t in alone), shared_groups(t.compiler_flags() for t in alone))
    reassociating = replace(KNOWN["aarch64"], extra_flags=("--iree-llvmcpu-reassociate-fp-reductions=true",))
    assert global_key(reassociating.compiler_flags()) != global_key(targets[0].compiler_flags())


@pytest.mark.parametrize("made", ["convmm", "gru"])
def test_every_module_made_from_the_global_phase_is_the_full_compile_byte_for_byte(made, imported, tmp_path):
    model = imported[1] if made == "convmm" else Compiler(find_toolchain(), Store(tmp_path / "import")).import_onnx(
        "gru", gru_model(tmp_path / "gru.onnx"), 17)
    # (not the GRU on the inner-tiled path: iree-compile 3.13 made 4 different modules of it in 9 full compiles: ci.md)
    targets = [KNOWN[name] for name in (ACROSS if made == "convmm" else ("rv64gc", "rv64gcv-zvl256b", "aarch64",
                                                                         "rv64gcv-zvl256b-mmt4d", "host"))]
    shared = Compiler(find_toolchain(), Store(tmp_path / "shared"), targets=targets)
    full = Compiler(find_toolchain(), Store(tmp_path / "full"))
    made_by = {}
    for target in targets:
        module, meta = _module(shared, model, target)
        made_by[target.name] = meta["made"].split(" phase ")[0]
        expected, full_meta = _module(full, model, target)
        assert full_meta["made"] == "full"
        differ = [n for n in module if module[n] != expected.get(n)] + sorted(expected.keys() - module.keys())
        assert not differ, f"{target.name}: {differ} differ from the full compile"
        assert "--compile-from" not in meta["command"]
    assert made_by == {t.name: "shared executable-sources" if t.name in ("rv64gc", "rv64gcv-zvl256b")
                       else "shared global-optimization" for t in targets}
    (phase,) = (tmp_path / "shared" / "phases").glob("*/*/global.mlir")  # one, for three architectures and three paths
    assert "util.global" in phase.read_text()


def test_a_toolchain_that_reads_the_target_in_global_optimization_gives_another_fingerprint(tmp_path):
    """The probe is what keeps such targets apart: data tiling from global optimization sets the matmuls' encodings
    there, so the probe's text differs by more than the target attribute."""
    compiler = Compiler(find_toolchain(), Store(tmp_path))
    plain = compiler._probe(KNOWN["rv64gcv-zvl256b"].compiler_flags())
    path = compiler._probe(KNOWN["rv64gcv-zvl256b-mmt4d"].compiler_flags())
    # (--iree-opt-data-tiling, the paths' flag, overrides this one: the target without it)
    early = compiler._probe([*KNOWN["rv64gcv-zvl256b"].compiler_flags(), "--iree-global-opt-data-tiling"])
    elsewhere = compiler._probe(KNOWN["aarch64"].compiler_flags())
    assert plain and path and early and elsewhere
    assert plain[1] == path[1] == elsewhere[1]  # this toolchain data-tiles after global optimization
    assert early[1] != plain[1]
    assert len({plain[0], path[0], elsewhere[0]}) == 3
