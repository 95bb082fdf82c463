"""Under xdist (-n), each model x target cell runs on one worker, the heaviest cells first (scheduling.py): a cell's
tests read the same compile, runs and estimates, so on two workers one of them waited on the other's lock."""

from __future__ import annotations

import json
import re

from pytest_rvv.xdist.scheduling import heaviest_first
from pytest_rvv.xdist.shards import cell_of_nodeid

TARGETS = ("host", "rv64gc", "rv64gcv-zvl256b", "rv64gcv-zvl256b-mmt4d")
ARGS = ("correctness", "--rvv-models=mlp,convs", "--rvv-targets=host,rv64gc", "-n", "2", "-v")


def test_a_test_id_names_its_cell_by_the_longest_target_it_ends_with():
    assert cell_of_nodeid("suites/a.py::test[squeezenet1.1-int8-rv64gcv-zvl256b-mmt4d]", TARGETS) == \
        "squeezenet1.1-int8|rv64gcv-zvl256b-mmt4d"
    assert cell_of_nodeid("suites/a.py::test[squeezenet1.1-rv64gcv-zvl256b]", TARGETS) == \
        "squeezenet1.1|rv64gcv-zvl256b"
    assert cell_of_nodeid("suites/c.py::test_onnx_node[test_abs-host]", TARGETS) == "test_abs|host"
    assert cell_of_nodeid("suites/b.py::test_targets[rv64gc]", TARGETS) == "rv64gc"
    for alone in ("tests/test_x.py::test_y", "tests/test_x.py::test_y[other-thing]", "a.py::t[-rv64gc]"):
        assert cell_of_nodeid(alone, TARGETS) == alone


def test_the_heaviest_cell_goes_first_and_equal_weights_keep_collection_order():
    units = {"a|host": ["t[a-host]"], "b|rv64gc": ["t[b-rv64gc]", "u[b-rv64gc]"], "c|host": ["t[c-host]"]}
    assert heaviest_first(units, {"t[a-host]": 1.0, "t[b-rv64gc]": 2.0, "u[b-rv64gc]": 2.0, "t[c-host]": 3.0}) == \
        ["b|rv64gc", "c|host", "a|host"]
    # an unrecorded test weighs the recorded mean (3.0): b's two tests 6.0, then a and c tied in collection order
    assert heaviest_first(units, {"t[c-host]": 3.0}) == ["b|rv64gc", "a|host", "c|host"]
    assert heaviest_first({"x": ["t[x]"], "y": ["t[y]"]}, {}) == ["x", "y"]


def test_under_xdist_every_test_of_a_cell_runs_on_one_worker(project):
    project.write(models=("mlp", "convs"))
    result = project.run(*ARGS)
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["rvv: xdist: each model x target cell on one worker, in collection order (no "
                                 "*/.test_durations to weigh them)"])
    workers: dict[str, set[str]] = {}
    for worker, nodeid in re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", result.stdout.str()):
        workers.setdefault(nodeid.rsplit("[", 1)[1], set()).add(worker)
    assert len(workers) == 4 and all(len(w) == 1 for w in workers.values()), workers
    assert len(set().union(*workers.values())) == 2, "both workers ran cells"


def test_recorded_durations_order_the_cells_and_a_damaged_file_is_one_line(project):
    project.write(models=("mlp",))
    (project.path / ".test_durations").write_text(json.dumps({
        "correctness/test_agreement.py::test_matches_onnxruntime[mlp-rv64gc]": 9.0}))
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=host,rv64gc", "-n", "2")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["rvv: xdist: each model x target cell on one worker, heaviest first by "
                                 "*/.test_durations (1 tests recorded)"])
    (project.path / ".test_durations").write_text("{not json")
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=host", "-n", "2")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: */.test_durations: not a durations file (*); re-record it with pytest "
                                 "suites/ -n auto --store-durations, or delete it"])
    without_xdist = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=host")
    without_xdist.assert_outcomes(passed=2)  # there the file is not read
