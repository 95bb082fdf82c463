"""Shared helpers for pytest-rvv's own tests: small ONNX models and pytester projects."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Store
from pytest_rvv.config.settings import Settings, default_cache_dir, default_tools_dir
from pytest_rvv.run.qemu import find_qemu
from pytest_rvv.run.qemu_plugin import build_plugin, check_plugin_support
from pytest_rvv.session import RvvSession

SUITES = Path(__file__).resolve().parent.parent / "suites"
# what a project copied from suites/ leaves out: caches, committed snapshots, and the estimator's per-instruction
# tests (suites/performance/test_estimator.py: not per model x target; tests/test_calibration.py covers them)
SUITE_COPY_IGNORE = shutil.ignore_patterns("__pycache__", "__snapshots__", "test_estimator.py")
# pytester points HOME at a temporary directory: pin the real cache and QEMU locations first, so
# inner sessions reuse compiled modules, the downloaded aarch64 runtime and the setup's QEMU build.
USER_CACHE = default_cache_dir()
USER_TOOLS = default_tools_dir()
# These tests start about 150 inner pytest sessions and CLI runs. With PYTHONDONTWRITEBYTECODE set (some CI images
# set it), each one compiles pytest-rvv's modules and rewrites the inner suites' assertions again, which costs
# about 0.2 s per session. Let the inner processes keep their bytecode as Python does by default.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def save_model(path: Path, nodes, inputs, outputs, initializers=(), name: str = "graph") -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def mlp_model(path: Path, seed: int = 0) -> Path:
    """x[4,64] -> MatMul[64,32] -> Add -> Relu -> MatMul[32,8] -> Softmax: a small real network."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array((rng.standard_normal((64, 32)) * 0.2).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 8)) * 0.2).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])], [w1, b1, w2],
                      name="mlp")


def slow_model(path: Path, layers: int = 6) -> Path:
    """A chain of [256,512]x[512,512] MatMuls: seconds under QEMU, for timeout tests."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((512, 512)) * 0.04).astype(np.float32), "w")
    nodes, previous = [], "x"
    for i in range(layers):
        nodes.append(helper.make_node("MatMul", [previous, "w"], [f"m{i}"]))
        previous = f"m{i}"
    nodes.append(helper.make_node("Tanh", [previous], ["y"]))
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [256, 512])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 512])], [w], name="slow")


def convs_model(path: Path) -> Path:
    """Two 3x3 convs on 4x4 and 2x2 maps (squeezenet1.1's late shapes), compiled in about a second. Their code moved
    between releases, measured on rv64gcv-zvl256b: 3.12.0 -> 3.13.0 executes ``conv_192x2x2x48x3x3`` in 779,364 ->
    787,524 instructions (+1.0 %); 3.11.0 -> 3.12.0 cuts the whole model from 10.9 M to 1.6 M."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
               for name, shape in (("w1", (128, 32, 3, 3)), ("w2", (48, 128, 1, 1)), ("w3", (192, 48, 3, 3)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["s1"]),
        helper.make_node("Conv", ["s1", "w3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["y"]),
    ]
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 4, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 192, 1, 1])], weights, name="convs")


def unsupported_model(path: Path) -> Path:
    """StringNormalizer: valid ONNX that onnxruntime runs but IREE cannot compile."""
    nodes = [helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER")]
    return save_model(path, nodes, [helper.make_tensor_value_info("x", TensorProto.STRING, [4])],
                      [helper.make_tensor_value_info("y", TensorProto.STRING, [4])], name="strings")


MODEL_TABLES = {
    "mlp": 'path = "mlp.onnx"\ninputs = [{ name = "x", shape = [4, 64], generator = "normal", low = 0, high = 1 }]\n',
    "slow": 'path = "slow.onnx"\ninputs = [{ name = "x", shape = [256, 512] }]\ntolerance = { atol = 1e-3 }\n',
    "strings": 'path = "strings.onnx"\ninputs = [{ name = "x", shape = [4], dtype = "str" }]\n',
    "convs": 'path = "convs.onnx"\ninputs = [{ name = "x", shape = [1, 32, 4, 4] }]\n',
    "gemm": 'path = "gemm.onnx"\ninputs = [{ name = "a", shape = [16, 32] }, { name = "b", shape = [32, 8] }]\n',
    "sum64": 'path = "sum64.onnx"\ninputs = [{ name = "x", shape = [16, 64], dtype = "int64", generator = "integers", '
             'low = -1000, high = 1000 }]\n',
    "rowsum4": 'path = "rowsum4.onnx"\ninputs = [{ name = "x", shape = [16, 4] }]\n',
}


def gemm_model(path: Path) -> Path:
    """a[16,32] x b[32,8]: a matmul alone, both operands inputs (what every matmul path compiles in IREE 3.13.0)."""
    return save_model(path, [helper.make_node("MatMul", ["a", "b"], ["y"])],
                      [helper.make_tensor_value_info("a", TensorProto.FLOAT, [16, 32]),
                       helper.make_tensor_value_info("b", TensorProto.FLOAT, [32, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 8])])


def sum64_model(path: Path) -> Path:
    """x[16,64] int64 -> ReduceSum over each row: IREE 3.13's RVV code seeds each row's vredsum.vs with vmv.s.x at
    e64,m2 (which the X60 estimate reads as the splat at e32,mf2: config/cores.py)."""
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    return save_model(path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                      [helper.make_tensor_value_info("x", TensorProto.INT64, [16, 64])],
                      [helper.make_tensor_value_info("y", TensorProto.INT64, [16])], [axes], name="sum64")


def rowsum4_model(path: Path) -> Path:
    """x[16,4] float32 -> ReduceSum over each row: with reassociation allowed (``REASSOCIATED``), IREE 3.13's RVV code
    sums each row with vfredusum.vs at e32,mf2, which LLVM 22's X60 model times 8 cycles against rvv-bench's 5.00 and
    no instruction of its operands is timed as measured (measure/calibration.py MODEL_ERRORS)."""
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    return save_model(path, [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])], [axes], name="rowsum4")


# a user's target that lets IREE reassociate float reductions (an unordered vfredusum.vs instead of vfredosum.vs)
REASSOCIATED = """
[tool.pytest_rvv.targets.rv64gcv-zvl256b-reassoc]
extends = "rv64gcv-zvl256b"
extra-flags = ["--iree-llvmcpu-reassociate-fp-reductions=true"]
"""

BUILDERS = {"gemm": gemm_model, "mlp": mlp_model, "slow": slow_model, "strings": unsupported_model,
            "convs": convs_model, "sum64": sum64_model, "rowsum4": rowsum4_model}


class RvvProject:
    """A pytester project with user models in pyproject.toml and the real correctness suite."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path = pytester.path

    def write(self, models: tuple[str, ...] = ("mlp",), extra: str = "", suite: bool = True) -> RvvProject:
        tables = "".join(f"\n[tool.pytest_rvv.models.{m}]\n{MODEL_TABLES[m]}" for m in models)
        for m in models:
            BUILDERS[m](self.path / f"{m}.onnx")
        self.pytester.makefile(".toml", pyproject=textwrap.dedent(extra) + tables)
        if suite:
            shutil.copytree(SUITES / "correctness", self.path / "correctness",
                            ignore=shutil.ignore_patterns("__pycache__"))
        return self

    def run(self, *args: str) -> pytest.RunResult:
        """Run pytest in a subprocess (the plugin keeps per-process state, like a real session)."""
        return self.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> RvvProject:
    monkeypatch.setenv("PYTEST_RVV_CACHE_DIR", str(USER_CACHE))
    monkeypatch.setenv("PYTEST_RVV_TOOLS_DIR", str(USER_TOOLS))
    monkeypatch.delenv("PYTEST_RVV_RUNTIME_RISCV64", raising=False)
    # an inner session is not an xdist worker, even when these tests run under -n: syrupy reads these to decide
    # whether to print its summary
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    return RvvProject(pytester)


@pytest.fixture
def kernel_project(project: RvvProject) -> RvvProject:
    """A project with the kernel suite (suites/kernels/, without its snapshots) and one user model."""
    project.write(models=("gemm",), suite=False)
    shutil.copytree(SUITES / "kernels", project.path / "kernels", ignore=shutil.ignore_patterns("__pycache__",
                                                                                                  "__snapshots__"))
    return project


@pytest.fixture
def without_riscv64_runtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A tools folder with the setup's QEMU but no riscv64 runtime, no IREE source and no git host (a machine
    where setup built none)."""
    tools = tmp_path / "tools-without-runtime"
    tools.mkdir()
    monkeypatch.delenv("PYTEST_RVV_IREE_SRC", raising=False)  # and no source to build one from
    monkeypatch.setenv("PYTEST_RVV_IREE_GIT", str(tmp_path / "no-git-host"))
    for qemu in USER_TOOLS.glob("qemu-*"):
        (tools / qemu.name).symlink_to(qemu)
    monkeypatch.setenv("PYTEST_RVV_TOOLS_DIR", str(tools))
    return tools


@pytest.fixture(scope="session")
def plugin() -> Path:
    """The rvv_counter QEMU plugin, built once into the cache (skips with the reason when it cannot be)."""
    try:
        check_plugin_support(find_qemu("riscv64"))
        return build_plugin(Store(USER_CACHE))
    except ToolMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def counted_session(tmp_path_factory: pytest.TempPathFactory) -> RvvSession:
    """A session over the user's cache whose riscv64 runs can be counted by QEMU plugins (skips with the reason when
    the emulator cannot load them)."""
    try:
        check_plugin_support(find_qemu("riscv64"))
    except ToolMissing as exc:
        pytest.skip(str(exc))
    return RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)},
                                       tmp_path_factory.mktemp("counted")))


def models_listing(selection: str) -> str:
    """What ``pytest-rvv models --rvv-models=SELECTION`` prints (over the user's cache); the command must succeed."""
    cli = Path(sys.executable).parent / "pytest-rvv"
    proc = subprocess.run([str(cli), "models", f"--rvv-models={selection}", f"--rvv-cache-dir={USER_CACHE}"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
