"""IREE beside its peer: the peer runner, its per-call work, and the opt-in peer suite (--rvv-peers) end to end.

Real tools: Debian's riscv64 ONNX Runtime in its sysroot, the harness, QEMU and its counting plugin, iree-compile, and
onnxruntime on the host. Without the sysroot (no network) the tests that need it skip with its one line.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Store
from pytest_rvv.comparison.record import ComparisonRecord, PerCall
from pytest_rvv.config.settings import default_cache_dir
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure import peers as peers_module
from pytest_rvv.measure.counts import parse
from pytest_rvv.measure.peers import PeerRow, by_library, kept_by_library
from pytest_rvv.report.peers import (
    PUBLISHED,
    STUDIES_TITLE,
    moved_lines,
    peers_markdown,
    peers_table,
    studies,
    studies_lines,
    studies_table,
)
from pytest_rvv.report.results import results, schema
from pytest_rvv.report.sections import Sections
from pytest_rvv.report.terminal import tables
from pytest_rvv.run.kept import KeptRuns
from pytest_rvv.run.peer import COUNTED_ONE, COUNTED_TWO, PeerRunner, PeerRuns, peer_runner
from pytest_rvv.run.peer import NAMESPACE as PEER_RUNS
from pytest_rvv.run.qemu_plugin import plugin_option

from .conftest import SUITE_COPY_IGNORE, SUITES, mlp_model

TARGETS = ("rv64gc", "rv64gcv-zvl256b")


def runner_for(target: str) -> PeerRunner:
    try:
        return peer_runner(BUILTIN_TARGETS[target])
    except ToolMissing as exc:  # no sysroot (no network), no harness compiler, no QEMU: its one line
        pytest.skip(str(exc))


def test_the_peer_runner_declares_itself_emulated_counted_and_what_it_runs():
    runner = runner_for("rv64gcv-zvl256b")
    capabilities = runner.capabilities
    assert capabilities.emulated and capabilities.counted and capabilities.recorded and capabilities.threads == 1
    assert not capabilities.replays and capabilities.core is None
    assert capabilities.peer is not None and capabilities.peer.startswith("ONNX Runtime 1.21.0")
    assert "rv64gc" in capabilities.peer  # what Debian builds it for, whatever the target's CPU
    # the same CPU string (and VLEN pairing) as the IREE cell of that target
    assert capabilities.where.endswith(f"-cpu {BUILTIN_TARGETS['rv64gcv-zvl256b'].emulator_cpu}")
    with pytest.raises(ValueError, match="riscv64 targets under QEMU, not aarch64"):
        PeerRunner(BUILTIN_TARGETS["aarch64"], runner.qemu, runner.sysroot, runner.harness)


def test_a_call_s_work_is_the_same_each_call_and_leaves_session_creation_out(tmp_path: Path, plugin: Path):
    runner = runner_for("rv64gc")
    model = mlp_model(tmp_path / "model.onnx")
    inputs = [np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)]
    totals = []
    for repeat in (1, 2, 3):
        out = tmp_path / f"{repeat}.counts"
        runner.run(model, inputs, tmp_path / str(repeat), 1, repeat=repeat, qemu_args=plugin_option(plugin, out, False),
                   maps=True, timings=False)  # as the recorded counted runs
        totals.append(parse(out.read_text(), out).total)
    second, third = totals[1] - totals[0], totals[2] - totals[1]
    # each further call adds one call's work (measured: 52,486 and 52,570 instructions; ONNX Runtime's allocator
    # differs by a few dozen between the second and later calls), and a one-call run is mostly session creation,
    # which the difference leaves out
    assert second > 0 and abs(third - second) < 0.01 * second
    assert totals[0] > 10 * second
    # the recorded runs (run/peer.py) give the same difference, attributed by library
    runs = PeerRuns(Store(default_cache_dir()), None)
    (one, vector_one), (two, vector_two) = (by_library(runs.run(kind, runner, model, inputs, 1, "all"))
                                            for kind in (COUNTED_ONE, COUNTED_TWO))
    assert sum(two.values()) - sum(one.values()) == second  # exact from run to run: what the snapshot holds
    assert vector_two - vector_one == 0  # Debian's rv64gc build: no vector instruction in a call


def test_a_counted_runs_work_per_library_is_kept_and_read_back_without_parsing_the_run_again(tmp_path: Path,
                                                                                              monkeypatch):
    """Summed once per counted run and code ranges: a rerun reads each library's instructions back, the same."""
    runner = runner_for("rv64gc")
    model = mlp_model(tmp_path / "model.onnx")
    inputs = [np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)]
    run = PeerRuns(Store(default_cache_dir()), None).run(COUNTED_ONE, runner, model, inputs, 1, "all")
    store = Store(tmp_path / "kept")
    made = kept_by_library(run, store)
    assert made == by_library(run) and len(made[0]) > 1
    monkeypatch.setattr(peers_module, "parse", lambda *args: pytest.fail("a kept run was parsed again"))
    assert kept_by_library(run, store) == made


def test_no_cache_emulates_the_peers_runs_again_and_keeps_none_of_them(tmp_path: Path):
    """--rvv-no-cache reaches the peers' runs (run/kept.py): nothing is looked up or kept, each content is emulated
    once per session, and the fresh run's work is the recorded run's."""
    runner = runner_for("rv64gc")
    model = mlp_model(tmp_path / "model.onnx")
    inputs = [np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)]
    recorded = PeerRuns(Store(default_cache_dir()), None).run(COUNTED_ONE, runner, model, inputs, 1, "all")
    store = Store(tmp_path / "cache")
    runs = PeerRuns(store, None, kept=KeptRuns(store, fresh=True))
    fresh = runs.run(COUNTED_ONE, runner, model, inputs, 1, "all")
    again = runs.run(COUNTED_ONE, runner, model, inputs, 1, "all")
    assert not fresh.cached and fresh.counts is not None and again.counts == fresh.counts  # once, not per ask
    assert not (tmp_path / "cache" / PEER_RUNS).exists()  # nothing kept (and so nothing could be looked up)
    assert by_library(fresh) == by_library(recorded)
    assert all(np.array_equal(a, b) for a, b in zip(fresh.outputs, recorded.outputs, strict=True))


@pytest.fixture
def peers_project(project):
    """A project with the mlp model, a model Debian's ONNX Runtime 1.21 refuses (opset 23, newer than it knows) and
    the peer suite."""
    runner_for("rv64gc")  # skips here, with its line, without the sysroot
    project.write(models=("mlp",), suite=False)
    refused = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                                [numpy_helper.from_array(np.ones(8, np.float32), "unused")])
    proto = helper.make_model(refused, opset_imports=[helper.make_opsetid("", 23)])
    proto.ir_version = 10
    onnx.save(proto, str(project.path / "newer.onnx"))
    with (project.path / "pyproject.toml").open("a") as f:
        f.write('\n[tool.pytest_rvv.models.newer]\npath = "newer.onnx"\ninputs = [{ name = "x", shape = [2, 8] }]\n')
    shutil.copytree(SUITES / "peers", project.path / "peers", ignore=SUITE_COPY_IGNORE)
    return project


def test_without_rvv_peers_nothing_is_collected(peers_project):
    result = peers_project.run("peers", "--rvv-models=mlp", "--rvv-targets=rv64gc", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "test_peer" not in result.stdout.str().replace("suites/peers", "")
    assert "3 deselected" in result.stdout.str()


def test_the_peer_agrees_and_its_table_appears_under_v_and_in_results_json(peers_project, tmp_path: Path):
    report = tmp_path / "report"
    result = peers_project.run("peers", "--rvv-peers=onnxruntime", "--rvv-models=mlp",
                               f"--rvv-targets={','.join(TARGETS)}", "-v", f"--rvv-report={report}")
    result.assert_outcomes(passed=6)  # per target: agreement, work (no snapshot yet: a note), the table's row
    out = result.stdout.str()
    assert "rvv peers: IREE beside its peers on the same QEMU CPU" in out
    rows = [line for line in out.splitlines() if line.startswith("| mlp |") and " | onnxruntime | " in line]
    assert [row.split(" | ")[1] for row in rows] == list(TARGETS)
    # the gap table leads: IREE's best path (here its RVV target) beside the fastest peer
    assert [line for line in out.splitlines() if line.startswith("| mlp | rv64gcv-zvl256b |")
            and "| ONNX Runtime (" in line], out
    assert "peers: 2 model x target cells beside ONNX Runtime 1.21.0" in out
    assert "no snapshot of the peer's work recorded yet" in out
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    peers = document["peers"]
    assert [(r["model"], r["target"]) for r in peers] == [("mlp", t) for t in TARGETS]
    for row in peers:
        iree, ort = row["iree"]["per_call_instructions"], row["peer_work"]["per_call_instructions"]
        assert iree > 0 and ort > 0 and row["ratio"] == round(iree / ort, 4)
        assert row["peer_work"]["vector_share_percent"] == 0.0 and row["peer_work"]["max_abs_error"] < 1e-4
        # est. ms on the modelled core on both sides; the peer's from its own blocks, nearly all of them estimated
        assert row["iree"]["est_ms"] > 0 and row["peer_work"]["est_ms"] > 0
        assert row["peer_work"]["est_covered_percent"] > 90 and row["peer_name"] == "onnxruntime"
        assert max(row["peer_work"]["libraries"], key=row["peer_work"]["libraries"].get).startswith(
            "libonnxruntime") and row["peer_work"]["library"] == "libonnxruntime"
    assert peers[1]["iree"]["vector_share_percent"] > 0 == peers[0]["iree"]["vector_share_percent"]
    assert "## IREE beside its peers" in (report / "performance.md").read_text()
    assert 'id="peers"' in (report / "index.html").read_text()
    # without -v: one summary line, no table
    quiet = peers_project.run("peers", "--rvv-peers=onnxruntime", "--rvv-models=mlp", "--rvv-targets=rv64gc")
    assert "| mlp |" not in quiet.stdout.str() and "(-v prints the tables)" in quiet.stdout.str()


def test_a_model_the_peer_refuses_is_one_line_and_an_expected_failure(peers_project):
    result = peers_project.run("peers", "--rvv-peers=onnxruntime", "--rvv-models=newer", "--rvv-targets=rv64gc")
    result.assert_outcomes(xfailed=3)
    lines = [line for line in result.stdout.str().splitlines() if "newer: ONNX Runtime (riscv64, rv64gc)" in line]
    assert lines, result.stdout.str()
    assert "failed (exit code 1): loading the model" in lines[0] and "till opset 22" in lines[0]
    assert "model_load_utils.h" not in lines[0]  # ONNX Runtime's source location and C++ signature left out


def test_a_change_in_the_peer_s_work_fails_naming_it(peers_project):
    selection = ("peers/test_peers.py::test_peer_work_is_as_recorded", "--rvv-peers=onnxruntime",
                 "--rvv-models=mlp", "--rvv-targets=rv64gc")
    peers_project.run(*selection, "--snapshot-update").assert_outcomes(passed=1)
    snapshot = next((peers_project.path / "peers" / "__snapshots__").rglob("*.json"))
    peers_project.run(*selection).assert_outcomes(passed=1)
    recorded = json.loads(snapshot.read_text())
    recorded["per_call_instructions"] -= 1000
    recorded["libraries"]["libonnxruntime.so.1.21.0"] -= 1000
    snapshot.write_text(json.dumps(recorded, indent=2) + "\n")
    result = peers_project.run(*selection)
    result.assert_outcomes(failed=1)
    assert "'s work per call on mlp at rv64gc changed" in result.stdout.str()
    assert "libonnxruntime.so.1.21.0" in result.stdout.str()
    # a change outside the peer's own library (libc from a newer Debian package on a fresh fetch) is not the peer's
    # code: it passes, named in a note
    recorded["per_call_instructions"] += 1000 - 7
    recorded["libraries"]["libonnxruntime.so.1.21.0"] += 1000
    recorded["libraries"]["libc.so.6"] = recorded["libraries"].get("libc.so.6", 0) - 7
    snapshot.write_text(json.dumps(recorded, indent=2) + "\n")
    outside = peers_project.run(*selection, "-rA")
    outside.assert_outcomes(passed=1)
    assert "own code (libonnxruntime*) does the same work per call on mlp at rv64gc; outside it: libc.so.6" in \
        outside.stdout.str()


def test_in_an_ab_the_peer_is_a_fixed_point_iree_moves_against():
    # a row as results.json files before peers were plug-ins hold it (the peer's side under "onnxruntime")
    recorded = _recorded("mobilenetv2", "rv64gcv-zvl256b", 0.51, 1.0)
    del recorded["peer_name"]
    recorded["onnxruntime"] = recorded.pop("peer_work") | {"per_call_instructions": 1000}
    row = PeerRow.from_json(recorded)
    compared = ComparisonRecord("mobilenetv2", "rv64gcv-zvl256b", reference="3.12.0", under_test="3.13.0",
                                per_call=PerCall(executed=(420, 510)))
    assert moved_lines([row], [compared]) == [
        "IREE moved from 0.42x to 0.51x of ONNX Runtime's work on mobilenetv2 at rv64gcv-zvl256b (3.12.0 -> 3.13.0)"]
    # a move too small for two decimals shows in four; toolchains by their release
    small = dataclasses.replace(compared, reference="IREE compiler version 3.12.0rc20260917 @ 2b05c5db",
                                under_test="IREE compiler version 3.13.0rc20261016 @ 89ece87b",
                                per_call=PerCall(executed=(1701, 1700)))
    assert moved_lines([row], [small]) == [
        "IREE moved from 1.7010x to 1.7000x of ONNX Runtime's work on mobilenetv2 at rv64gcv-zvl256b "
        "(3.12.0rc20260917 -> 3.13.0rc20261016)"]
    # a cell without the peer's row, or a comparison without per-call counts, says nothing
    assert moved_lines([], [compared]) == []
    assert moved_lines([row], [dataclasses.replace(compared, per_call=None)]) == []


def test_without_the_sysroot_the_peer_tests_skip_with_setup_s_one_line(peers_project, without_riscv64_runtime,
                                                                      monkeypatch):
    monkeypatch.setenv("PYTEST_RVV_DEBIAN_MIRROR", "http://127.0.0.1:9/debian")  # a closed port: as without network
    result = peers_project.run("peers", "--rvv-peers=onnxruntime", "--rvv-models=mlp", "--rvv-targets=rv64gc")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["SKIPPED [[]3[]] *ONNX Runtime's riscv64 build could not be fetched*setup.sh peers*"])
    assert not list(without_riscv64_runtime.glob("onnxruntime-riscv64-*/"))  # nothing half-made is left


def _recorded(model: str, target: str, ratio: float, est_ratio: float) -> dict:
    """A peers table row as measure/peers.py's PeerComparison.row writes it (the figures made up)."""
    return {"model": model, "target": target, "toolchain": "IREE compiler version 3.13.0rc20261016 @ 89ece87b",
            "peer": "ONNX Runtime 1.21.0", "ratio": ratio, "est_ratio": est_ratio, "notes": [],
            "iree": {"per_call_instructions": int(ratio * 1e9), "vector_share_percent": 40.0, "est_ms": est_ratio,
                     "top_dispatches": [{"dispatch": "conv_0", "share_percent": 30.0}], "pack_share_percent": 5.0},
            "peer_name": "onnxruntime",
            "peer_work": {"per_call_instructions": 10**9, "vector_share_percent": 0.0, "est_ms": 1.0,
                          "libraries": {"libonnxruntime.so.1.21.0": 99 * 10**7}, "peak_rss_kb": 90000,
                          "library": "libonnxruntime", "library_share_percent": 99.0, "max_abs_error": 1e-6}}


def _row(model: str, target: str, ratio: float, est_ratio: float) -> PeerRow:
    """That row as the reports read it."""
    return PeerRow.from_json(_recorded(model, target, ratio, est_ratio))


def test_iree_issue_24772_s_measured_ratio_stands_beside_ours_with_what_differs():
    recorded = [_recorded("resnet18", "rv64gcv-zvl256b-mmt4d", 0.31, 0.42),
                _recorded("resnet18", "rv64gcv-zvl256b", 1.7, 2.9), _recorded("mlp", "rv64gc", 1.0, 1.0)]
    # --rvv-wall-time=x60:1,8 measured the zvl256b cell at the study's 8 threads too (measure/peer_threads.py)
    from pytest_rvv.measure.peers import PeerThreads, ThreadsBeside, WallBeside

    pool = PeerThreads(8, (900, 700, 700, 600, 600, 500, 500, 400), 0, 1.6e6, 99.0, 1.6, (1.6e6,) * 8)
    recorded[1]["threads"] = ThreadsBeside(8, 0.9, pool, (WallBeside(1, 22.0, "compute", 10.0, "compute"),
                                                          WallBeside(8, 5.5, "DRAM", 10.0, "imbalance")), 4096).row()
    rows = [PeerRow.from_json(row) for row in recorded]
    # the quoted figures: fp32 IREE 117.0 ms, ONNX Runtime 418.0 ms; int8 83.9 and 406.1 (K3, 8 threads)
    quoted = {p.model: (p.iree_ms, p.peer_ms) for p in PUBLISHED}
    assert quoted == {"resnet18": (117.0, 418.0), "resnet18-int8": (83.9, 406.1)}
    entries = studies(rows)
    assert [e.published.model for e in entries] == ["resnet18"]  # only a published model that ran; mlp has no study
    entry = entries[0].to_json()
    assert entry["measured_ratio"] == 0.2799 and "https://github.com/iree-org/iree/issues/24772" in entry["source"]
    assert [(o["target"], o["ratio"], o["est_ratio"], o["wall_ratio"]) for o in entry["ours"]] == [
        ("rv64gcv-zvl256b", 1.7, 2.9, 0.55), ("rv64gcv-zvl256b-mmt4d", 0.31, 0.42, None)]
    differs = " ".join(entry["differs"])
    for difference in ("X100", "X60", "8", "1 on both sides", "--rvv-wall-time=x60:1,8", "no RVV instruction",
                       "execution provider not stated", "IMAGENET1K_V1", "1x3x224x224"):
        assert difference in differs, difference
    lines = studies_table(entries)
    assert lines[2:] == ["| resnet18 | 0.28x (117 / 418) | rv64gcv-zvl256b | 1.70x | 2.90x | 0.55x (8 threads) |",
                         "| resnet18 | 0.28x (117 / 418) | rv64gcv-zvl256b-mmt4d | 0.31x | 0.42x | - |"]
    told = studies_lines(entries)
    assert len(told) == 1 and told[0].startswith("resnet18: iree issue 24772 (https://github.com/iree-org/iree/")
    assert "SpacemiT K3" in told[0] and "8 threads" in told[0] and "IREE 117 ms, ONNX Runtime 418 ms" in told[0]
    assert all(difference in told[0] for difference in entry["differs"])
    # the int8 row carries its quantization as a further difference
    int8 = studies([_row("resnet18-int8", "rv64gc", 2.0, 3.0)])[0].to_json()
    assert int8["measured_ratio"] == 0.2066 and "static QDQ" in int8["differs"][-1]
    # where it shows: the terminal (-v), performance.md, results.json (schema-valid, additive)
    assert (STUDIES_TITLE, [*lines, *told]) in tables(Sections(peers=rows))
    markdown = peers_markdown(rows, [])
    assert "### Beside the studies (measured on silicon)\n\n" + "\n".join(lines) in markdown
    assert f"- {told[0]}" in markdown
    document = results({"machine": {"name": "here"}}, [], {}, {}, {}, peers=rows)
    assert document["peers_published"] == [e.to_json() for e in entries]
    jsonschema.validate(document["peers_published"], schema()["properties"]["peers_published"])
    assert "peers_published" not in results({"machine": {"name": "here"}}, [], {}, {}, {},
                                            peers=[_row("mlp", "rv64gc", 1.0, 1.0)])


def test_a_report_folder_used_again_holds_the_peers_section_once(tmp_path):
    """``--rvv-report=DIR`` a second time, with only peer tests selected (no Table 1 written this run): the peers
    section replaces what the earlier run left in performance.md instead of being appended to it; after this run's
    Table 1 it is appended."""
    from pytest_rvv.report.peers import write_peers

    rows = [_row("resnet18", "rv64gcv-zvl256b", 1.7, 2.9)]
    path = tmp_path / "performance.md"
    for _ in range(2):
        assert write_peers(tmp_path, rows, []) == path
    assert path.read_text().count("## IREE beside its peers") == 1
    path.write_text("# pytest-rvv performance\n\nTable 1 of this run\n")
    write_peers(tmp_path, rows, [], after=[path])
    text = path.read_text()
    assert text.startswith("# pytest-rvv performance\n\nTable 1 of this run\n")
    assert text.count("## IREE beside its peers") == 1


def test_a_row_recorded_before_peers_were_plug_ins_reads_as_onnx_runtime_s():
    """results.json files from before the peer plug-ins name the peer's side ``onnxruntime``, its library share
    ``libonnxruntime_share_percent``, and have no ``peer_name``: ``PeerRow`` reads them as ONNX Runtime's rows, and
    keeps every row as recorded for results.json."""
    now = _recorded("resnet18", "rv64gcv-zvl256b", 1.7, 2.9)
    before = {k: v for k, v in now.items() if k not in ("peer_work", "peer_name")}
    side = dict(now["peer_work"])
    side["libonnxruntime_share_percent"] = side.pop("library_share_percent")
    before["onnxruntime"] = side
    old, new = PeerRow.from_json(before), PeerRow.from_json(now)
    assert old == new and old.name == "onnxruntime" and old.work.library_share == 99.0
    assert old.to_json() is before and new.to_json() is now
    assert peers_table([old]) == peers_table([new])
