"""Static analysis of real compiled modules: objdump output attributed to dispatches via DWARF."""

import json

import pytest

from pytest_rvv.base.stages import Stages
from pytest_rvv.base.store import Store
from pytest_rvv.config.settings import Settings
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.static import analyze
from pytest_rvv.model.manifest import model_from_table
from pytest_rvv.session import RvvSession

from .conftest import USER_CACHE, mlp_model


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    folder = tmp_path_factory.mktemp("static")
    mlp_model(folder / "mlp.onnx")
    model = model_from_table("mlp", {"path": "mlp.onnx", "inputs": [{"name": "x", "shape": [4, 64]}]}, folder)
    session = RvvSession(Settings.resolve(lambda option: None, {"cache-dir": str(USER_CACHE)}, folder))
    return lambda target: session.artifact(model, BUILTIN_TARGETS[target])


def test_scalar_build_has_no_vector_instruction(compiled):
    analysis = analyze(compiled("rv64gc"))
    assert analysis.total.instructions > 100
    assert analysis.total.vector == 0
    assert analysis.not_vectorized == sorted(analysis.dispatches)


@pytest.mark.parametrize("target", ["rv64gcv-zvl128b", "rv64gcv-zvl256b", "rv64gcv-zvl512b", "aarch64"])
def test_vector_build_is_vectorized_in_named_dispatches(compiled, target):
    analysis = analyze(compiled(target))
    assert analysis.total.vector > 0
    assert all(key.startswith("dispatch_") for key in analysis.dispatches)
    assert any("matmul" in key for key in analysis.dispatches), list(analysis.dispatches)
    assert sum(c.instructions for c in analysis.dispatches.values()) + analysis.library.instructions \
        == analysis.total.instructions
    if target.startswith("rv64"):
        assert analysis.total.classes["vector_config"] > 0  # vsetvli/vsetivli


def test_snapshot_record_is_deterministic_and_json(compiled):
    first = analyze(compiled("rv64gcv-zvl256b")).snapshot()
    second = analyze(compiled("rv64gcv-zvl256b")).snapshot()
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["totals"]["vector_share_percent"] == round(
        100 * first["totals"]["vector"] / first["totals"]["instructions"], 2)


def test_an_analysis_kept_in_the_store_equals_a_fresh_one_and_other_libraries_are_analyzed_again(compiled,
                                                                                                  tmp_path):
    store, stages = Store(tmp_path / "store"), Stages()
    artifact = compiled("rv64gcv-zvl256b")
    fresh = json.dumps(analyze(artifact).snapshot())
    assert json.dumps(analyze(artifact, store, stages).snapshot()) == fresh  # analyzed, then kept
    assert json.dumps(analyze(artifact, store, stages).snapshot()) == fresh  # read back
    assert stages.totals["analyze"][2:] == [1, 1]  # worked once, answered once by the store
    other = compiled("rv64gcv-zvl512b")  # other library bytes: analyzed again, never answered by the first
    assert json.dumps(analyze(other, store, stages).snapshot()) == json.dumps(analyze(other).snapshot()) != fresh
    assert stages.totals["analyze"][2:] == [2, 1]
    for entry in (tmp_path / "store" / "static").glob("*/*/static.json"):
        entry.write_text(entry.read_text().replace('"instructions": ', '"instructions": 1'))  # damaged
    assert json.dumps(analyze(artifact, store, stages).snapshot()) == fresh  # detected by hash, analyzed again
    assert stages.totals["analyze"][2:] == [3, 1]
