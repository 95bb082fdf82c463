"""End to end on real tools: a small onnx.helper model compiled for RVV and run on host and aarch64."""

import pytest

from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.judge.checks import agreement_verdict, check_compiles
from pytest_rvv.judge.outcome import PASSED
from pytest_rvv.measure.agreement import measure_agreement
from pytest_rvv.model.manifest import model_from_table
from pytest_rvv.session import RvvSession

from .conftest import USER_CACHE, mlp_model

EM_RISCV = 243  # ELF e_machine of RISC-V


@pytest.fixture(scope="module")
def session_and_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("e2e")
    mlp_model(folder / "mlp.onnx")
    model = model_from_table("mlp", {"path": "mlp.onnx", "inputs": [{"name": "x", "shape": [4, 64]}]}, folder)
    settings = Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)}, folder)
    return RvvSession(settings), model


def test_compiles_for_rvv_zvl256b_into_a_riscv64_module(session_and_model):
    session, model = session_and_model
    assert check_compiles(session, model, BUILTIN_TARGETS["rv64gcv-zvl256b"]).outcome == PASSED
    artifact = session.artifact(model, BUILTIN_TARGETS["rv64gcv-zvl256b"])
    assert "--iree-llvmcpu-target-cpu-features=+m,+a,+f,+d,+c,+v,+zvl256b" in artifact.flags
    data = artifact.path.read_bytes()
    elf = data.index(b"\x7fELF")  # the embedded dispatch library
    assert int.from_bytes(data[elf + 18:elf + 20], "little") == EM_RISCV
    assert artifact.function == "mlp"


@pytest.mark.parametrize("target", ["host", "aarch64"])
def test_runs_and_agrees_with_onnxruntime(session_and_model, target, tmp_path):
    session, model = session_and_model
    runner = session.runner(BUILTIN_TARGETS[target])
    checked = measure_agreement(session.cell(model, runner.target, runner), tmp_path)
    assert agreement_verdict(checked).outcome == PASSED
    assert 0 < checked.agreement.max_abs < 1e-5, "softmax outputs must agree closely, and not trivially"
    if target == "host":  # run here; an emulated run is recorded by content (tests/test_recorded_runs.py)
        assert (tmp_path / "output_0.npy").is_file()


def test_a_different_module_would_be_caught(session_and_model, tmp_path):
    """The comparison is not vacuous: outputs for other inputs disagree with the reference."""
    from pytest_rvv.measure.agreement import compare

    session, model = session_and_model
    runner = session.runner(BUILTIN_TARGETS["host"])
    reference = session.oracle(model)
    shifted = [x + 1.0 for x in reference.inputs]
    outcome = runner.run(session.artifact(model, runner.target), shifted, tmp_path, 1, 60)
    assert not compare(outcome.outputs, reference.outputs, model.tolerance).ok
