"""ONNX Runtime's own riscv64 build as IREE's peer: the sysroot from Debian 13 and the harness run under QEMU.

Real fetches (Debian's mirror), a real cross build, real QEMU and real onnxruntime on the host; the tests that need
the sysroot skip with its one line when it cannot be fetched (no network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_rvv.base.errors import RunFailed, ToolMissing
from pytest_rvv.config.settings import default_cache_dir
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.counts import parse
from pytest_rvv.model.prepare import graph_inputs, load_onnx, prepare
from pytest_rvv.model.registry import builtin_models
from pytest_rvv.run.onnxruntime import onnxruntime_outputs, reference_level
from pytest_rvv.run.ort_harness import ORACLE_LEVELS, build_harness, run_harness
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.qemu_plugin import plugin_option
from pytest_rvv.toolchain.peer_ort import (
    MARKER,
    MIRROR_ENV,
    PeerSysroot,
    SysrootUnavailable,
    cached_sysroot,
    damage,
    prepare_sysroot,
    sysroot_dir,
)

from .conftest import convs_model, mlp_model, save_model

TARGETS = ("rv64gc", "rv64gcv-zvl256b")  # what Debian builds ONNX Runtime for, and the suites' RVV target
UNREACHABLE = "http://127.0.0.1:9/debian"  # a closed port: apt fails at once, as without network


@pytest.fixture(scope="module")
def sysroot() -> PeerSysroot:
    try:
        return prepare_sysroot(log=lambda line: None)
    except SysrootUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def harness(sysroot: PeerSysroot) -> Path:
    try:
        return build_harness(sysroot)
    except ToolMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def qemu():
    try:
        return find_qemu("riscv64")
    except ToolMissing as exc:
        pytest.skip(str(exc))


def peer_outputs(harness, sysroot, qemu, target: str, model: Path, inputs, tmp_path: Path, **options):
    names = [i.name for i in graph_inputs(load_onnx(model))]
    expected = onnxruntime_outputs(model, names, inputs, reference_level(model))
    run = run_harness(harness, sysroot, qemu, BUILTIN_TARGETS[target], model, inputs, tmp_path / target,
                      len(expected), optimizations=ORACLE_LEVELS[reference_level(model)], **options)
    return run, expected


# the sysroot


def test_a_prepared_sysroot_is_used_as_it_is_and_nothing_is_fetched(sysroot: PeerSysroot) -> None:
    marker = sysroot.path / MARKER
    before = (sysroot.path.stat().st_ino, marker.stat().st_mtime_ns)
    again = prepare_sysroot(log=lambda line: pytest.fail(f"a second call fetched: {line}"))
    assert not again.fetched
    assert (again.path.stat().st_ino, marker.stat().st_mtime_ns) == before
    assert again.packages == sysroot.packages and again.version.startswith("1.21.0")
    assert again.library.is_file() and (again.include / "onnxruntime_c_api.h").is_file()
    assert (again.path / "lib").is_symlink() and (again.path / "lib/ld-linux-riscv64-lp64d.so.1").is_file()


def copy_of(sysroot: PeerSysroot, tools: Path) -> Path:
    shutil.copytree(sysroot.path, sysroot_dir(tools), symlinks=True)
    assert cached_sysroot(tools) is not None
    return sysroot_dir(tools)


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGES = {
    "marker missing (a fetch killed before it finished)": (lambda root, lib: (root / MARKER).unlink(), "no marker"),
    "library deleted": (lambda root, lib: lib.unlink(), "is missing"),
    "library changed, same size": (lambda root, lib: flip_a_byte(lib), "changed"),
    "loader link removed": (lambda root, lib: (root / "lib").unlink(), "lib is missing"),
}


@pytest.mark.parametrize("how", list(DAMAGES))
def test_a_damaged_sysroot_is_never_used(sysroot: PeerSysroot, tmp_path: Path, how: str) -> None:
    tools = tmp_path / "tools"
    root = copy_of(sysroot, tools)
    hurt, said = DAMAGES[how]
    hurt(root, (root / sysroot.library.relative_to(sysroot.path)).resolve())
    assert said in (damage(root) or "")
    assert cached_sysroot(tools) is None  # what the harness and its runs are given: never this folder


def test_a_damaged_sysroot_is_fetched_again(sysroot: PeerSysroot, tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    root = copy_of(sysroot, tools)
    library = (root / sysroot.library.relative_to(sysroot.path)).resolve()
    library.unlink()
    (tools / f".{root.name}.1234.partial").mkdir()  # and what a fetch killed midway left
    lines: list[str] = []
    fresh = prepare_sysroot(tools, log=lines.append)
    assert fresh.fetched and damage(fresh.path) is None
    assert any("is missing; fetching it again" in line for line in lines), lines
    assert library.read_bytes() == sysroot.library.resolve().read_bytes()
    assert not list(tools.glob(".*.partial")) and not list(tools.glob(".*.damaged.*"))


def test_without_network_it_is_one_line_and_nothing_is_left(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MIRROR_ENV, UNREACHABLE)
    tools = tmp_path / "tools"
    with pytest.raises(SysrootUnavailable) as caught:
        prepare_sysroot(tools, log=lambda line: None)
    message = str(caught.value)
    assert "\n" not in message
    assert UNREACHABLE in message and "Connection refused" in message and "setup.sh peers" in message
    assert [p.name for p in tools.iterdir() if not p.name.endswith(".lock")] == []


def test_the_setup_step_says_one_line_per_peer_and_exits_3_without_network(tmp_path: Path) -> None:
    """scripts/setup.sh's ``peers`` step prepares every peer plug-in: without network one line each, exit 3."""
    env = {**os.environ, MIRROR_ENV: UNREACHABLE, "PYTEST_RVV_TOOLS_DIR": str(tmp_path / "tools")}
    proc = subprocess.run([sys.executable, "-m", "pytest_rvv.run.peer"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["[peers] onnxruntime", "[peers] openblas", "[peers] ggml",
                                                      "[peers] ncnn"]
    assert lines[0].startswith("[peers] onnxruntime: ONNX Runtime's riscv64 build could not be fetched")
    assert lines[1].startswith("[peers] openblas: OpenBLAS's riscv64 build could not be fetched")
    assert lines[2].startswith("[peers] ggml: ggml's riscv64 build could not be fetched from "
                               f"{UNREACHABLE} sid/main riscv64")
    assert lines[3].startswith("[peers] ncnn: Python's riscv64 build could not be fetched from "
                               f"{UNREACHABLE} trixie/main riscv64")  # the interpreter its wheel runs in


# the harness


def test_the_harness_is_built_once(sysroot: PeerSysroot, harness: Path) -> None:
    built = harness.stat().st_mtime_ns
    assert build_harness(sysroot) == harness and harness.stat().st_mtime_ns == built


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("build", [mlp_model, convs_model], ids=["matmul-add", "conv"])
def test_onnxruntime_for_riscv64_agrees_with_host_onnxruntime(sysroot, harness, qemu, tmp_path: Path, target: str,
                                                              build) -> None:
    model = build(tmp_path / "model.onnx")
    shape = [d.dim_value or 4 for d in graph_inputs(load_onnx(model))[0].type.tensor_type.shape.dim]
    inputs = [np.random.default_rng(7).standard_normal(shape).astype(np.float32)]
    run, expected = peer_outputs(harness, sysroot, qemu, target, model, inputs, tmp_path)
    assert len(run.outputs) == len(expected)
    for got, want in zip(run.outputs, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert run.session_s > 0 and run.run_s > 0
    assert "Schema error" not in run.process.stderr  # Debian's libonnx's ~500 harmless lines are not passed on


@pytest.mark.parametrize("target", TARGETS)
def test_a_zoo_model_agrees_with_host_onnxruntime(sysroot, harness, qemu, tmp_path: Path, target: str) -> None:
    spec = builtin_models()["mobilenetv3-cls"]
    model = prepare(spec, default_cache_dir())
    by_name = dict(zip([i.name for i in spec.inputs], spec.generate_inputs(), strict=True))
    inputs = [by_name[i.name] for i in graph_inputs(load_onnx(model))]
    run, expected = peer_outputs(harness, sysroot, qemu, target, model, inputs, tmp_path)
    for got, want in zip(run.outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=spec.tolerance.atol, rtol=spec.tolerance.rtol)


def test_more_threads_give_the_same_outputs(sysroot, harness, qemu, tmp_path: Path) -> None:
    model = mlp_model(tmp_path / "model.onnx")
    inputs = [np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)]
    one, expected = peer_outputs(harness, sysroot, qemu, "rv64gc", model, inputs, tmp_path / "one")
    two, _ = peer_outputs(harness, sysroot, qemu, "rv64gc", model, inputs, tmp_path / "two", threads=2, repeat=2)
    np.testing.assert_allclose(two.outputs[0], one.outputs[0], atol=1e-6)
    np.testing.assert_allclose(two.outputs[0], expected[0], atol=1e-5)


def not_onnx(path: Path) -> Path:
    path.write_bytes(b"this is not a protobuf")
    return path


def unknown_operator(path: Path) -> Path:
    model = save_model(path, [helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    proto = onnx.load(str(model))
    proto.graph.node[0].op_type = "NoSuchOperator"
    onnx.save(proto, str(path))
    return path


@pytest.mark.parametrize(("build", "said"), [(not_onnx, "loading the model"), (unknown_operator, "NoSuchOperator")],
                         ids=["not-onnx", "unknown-operator"])
def test_a_model_it_cannot_load_is_one_line_naming_the_model(sysroot, harness, qemu, tmp_path: Path, build,
                                                             said: str) -> None:
    model = build(tmp_path / "broken.onnx")
    with pytest.raises(RunFailed) as caught:
        run_harness(harness, sysroot, qemu, BUILTIN_TARGETS["rv64gc"], model,
                    [np.zeros(4, np.float32)], tmp_path / "run", 1)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("broken.onnx: ONNX Runtime (riscv64, rv64gc) failed (exit code 1)")
    assert said in message


def test_its_executed_instructions_are_the_same_from_run_to_run(sysroot, harness, qemu, plugin: Path,
                                                                 tmp_path: Path) -> None:
    model = mlp_model(tmp_path / "model.onnx")
    inputs = [np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)]
    totals = []
    for run in ("first", "second"):
        out = tmp_path / f"{run}.counts"
        run_harness(harness, sysroot, qemu, BUILTIN_TARGETS["rv64gc"], model, inputs, tmp_path / run, 1,
                    qemu_args=plugin_option(plugin, out, False), timings=False)  # printed times' digits vary
        totals.append(parse(out.read_text(), out).total)
    assert totals[0] == totals[1] > 1_000_000


def test_its_work_per_run_is_attributed_to_onnxruntime_s_library(sysroot, harness, qemu, plugin: Path,
                                                                  tmp_path: Path) -> None:
    model = convs_model(tmp_path / "model.onnx")
    inputs = [np.random.default_rng(5).standard_normal((1, 32, 4, 4)).astype(np.float32)]
    per_library = []
    for repeat in (1, 2):
        out = tmp_path / f"{repeat}.counts"
        run = run_harness(harness, sysroot, qemu, BUILTIN_TARGETS["rv64gc"], model, inputs, tmp_path / str(repeat),
                          1, repeat=repeat, maps=True, qemu_args=plugin_option(plugin, out, False), timings=False)
        counted: dict[str | None, int] = {}
        for block in parse(out.read_text(), out).blocks:
            where = run.library_of(block.vaddr)
            counted[where] = counted.get(where, 0) + block.n_insns * block.execs
        per_library.append(counted)
    one_run = {name: per_library[1].get(name, 0) - per_library[0].get(name, 0) for name in per_library[1]}
    assert one_run[sysroot.library.resolve().name] > 0.9 * sum(one_run.values()) > 0
    assert per_library[0].get(None, 0) == 0  # every executed block lies in a mapped file's code
