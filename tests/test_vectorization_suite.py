"""The vectorization suite end to end: snapshots recorded, kept, gated and reported."""

import json
import shutil

import pytest

from .conftest import SUITES

NO_VECTOR = ('[tool.pytest_rvv.targets.rv64gcv-zvl256b]\narch = "riscv64"\nfeatures = ["+m", "+a", "+f", "+d", "+c"]\n'
             'emulator-cpu = "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0"\n')
ARGS = ("vectorization/test_static_vectorization.py", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b")


def vectorization_project(project, extra=""):
    project.write(extra=extra, suite=False)
    shutil.copytree(SUITES / "vectorization", project.path / "vectorization",
                    ignore=shutil.ignore_patterns("__pycache__", "__snapshots__"))
    return project


def snapshots(project):
    folder = project.path / "vectorization" / "__snapshots__" / "test_static_vectorization"
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.json"))}


def test_missing_snapshot_passes_with_a_note_and_fails_when_strict(project):
    vectorization_project(project)
    result = project.run(*ARGS)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*change: no snapshot recorded yet (test_still_vectorized[[]mlp-rv64gc[]].json)*"])
    strict = project.run(*ARGS, "--rvv-strict-baselines")
    strict.assert_outcomes(failed=2)


def test_update_baselines_records_one_json_per_model_and_target_identically_with_xdist(project):
    vectorization_project(project)
    project.run(*ARGS, "--update-baselines").assert_outcomes(passed=2)
    first = snapshots(project)
    assert sorted(first) == ["test_still_vectorized[mlp-rv64gc].json",
                             "test_still_vectorized[mlp-rv64gcv-zvl256b].json"]
    for path in (project.path / "vectorization" / "__snapshots__").rglob("*.json"):
        path.unlink()
    project.run(*ARGS, "--update-baselines", "-n", "2").assert_outcomes(passed=2)
    assert snapshots(project) == first
    project.run(*ARGS).assert_outcomes(passed=2)


def test_losing_v_fails_the_gate_with_a_dispatch_level_diff(project):
    vectorization_project(project)
    project.run(*ARGS, "--update-baselines").assert_outcomes(passed=2)
    (project.path / "pyproject.toml").write_text((project.path / "pyproject.toml").read_text() + "\n" + NO_VECTOR)
    result = project.run(*ARGS)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "static vectorization regression: mlp on rv64gcv-zvl256b",
        "  dispatch_*matmul*: was vectorized (* vector of * instructions), now scalar (0 vector of * instructions)",
        "  vector share fell from *% to 0.00% (-* points; allowed -5)",
        "snapshot: */test_still_vectorized[[]mlp-rv64gcv-zvl256b[]].json",
    ])


def test_gaining_v_is_reported_as_an_improvement(project):
    vectorization_project(project, extra=NO_VECTOR)
    project.run(*ARGS, "--update-baselines").assert_outcomes(passed=2)
    (project.path / "pyproject.toml").write_text((project.path / "pyproject.toml").read_text().replace(NO_VECTOR, ""))
    result = project.run(*ARGS)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*improvement: dispatch_*: now vectorized (0 vector of * -> * vector of *"])
    result.stdout.fnmatch_lines(["*change: vector share rose from 0.00% to *% (a diagnostic, not an improvement "
                                 "by itself)"])
    strict = project.run(*ARGS, "--rvv-strict-baselines")
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(["  differs from the recorded snapshot (--rvv-strict-baselines): dispatch_*"])


@pytest.mark.parametrize(("damage", "reason"), [('{"totals": {"vector": 0', "unreadable snapshot (*)"),
                                                 ("[]\n", "not a pytest-rvv snapshot (no totals/dispatches)")],
                         ids=["invalid-json", "not-a-snapshot"])
def test_a_snapshot_that_does_not_parse_fails_naming_the_file_and_is_never_rewritten(project, damage, reason):
    vectorization_project(project)
    project.run(*ARGS, "--update-baselines").assert_outcomes(passed=2)
    [path] = (project.path / "vectorization" / "__snapshots__").rglob("*mlp-rv64gc].json")
    path.write_text(damage)
    untouched = path.stat()
    for extra in ((), ("--snapshot-update",), ("-n", "2"), ("--update-baselines", "-n", "2")):
        result = project.run(*ARGS, *extra)
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines([f"*mlp-rv64gc].json: {reason}; restore it from git (no update "
                                     "option rewrites it)"])
        # syrupy counts the damaged snapshot as failed: never as unused, so it never offers to delete it, or does
        result.stdout.fnmatch_lines(["*1 snapshot failed.*"])
        for false_line in ("*unused*", "*Deleted*", "*deleted*"):
            result.stdout.no_fnmatch_line(false_line)
        assert path.read_text() == damage, extra
        now = path.stat()  # not deleted and put back either: the very same file, never written
        assert (now.st_ino, now.st_mtime_ns) == (untouched.st_ino, untouched.st_mtime_ns), extra


def test_vector_code_on_a_scalar_target_fails_even_when_updating(project):
    # a CPU with V (sifive-x280) behind scalar features: LLVM emits RVV for a "scalar" target
    vectorization_project(project, extra='[tool.pytest_rvv.targets.x280-scalar]\nextends = "rv64gc"\n'
                                          'cpu = "sifive-x280"\n')
    result = project.run("vectorization/test_static_vectorization.py", "--rvv-models=mlp", "--rvv-targets=x280-scalar",
                         "--update-baselines")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  x280-scalar is a scalar target but its code has * vector instructions: dispatch_*"])


def test_stale_snapshot_of_an_unregistered_model_is_reported(project):
    vectorization_project(project)
    project.run(*ARGS, "--update-baselines").assert_outcomes(passed=2)
    folder = project.path / "vectorization" / "__snapshots__" / "test_static_vectorization"
    shutil.copy(folder / "test_still_vectorized[mlp-rv64gc].json", folder / "test_still_vectorized[gone-rv64gc].json")
    result = project.run(*ARGS)
    result.stdout.fnmatch_lines(["unused snapshot (its model or target is not registered): "
                                 "*test_still_vectorized[[]gone-rv64gc[]].json"])


def test_executed_snapshots_are_identical_with_and_without_xdist(project):
    vectorization_project(project)
    args = ("vectorization/test_executed_vectorization.py", "--rvv-models=mlp", "--rvv-targets=aarch64,host")
    project.run(*args, "--update-baselines", "-n", "2").assert_outcomes(passed=1)
    folder = project.path / "vectorization" / "__snapshots__" / "test_executed_vectorization"
    [path] = folder.glob("*.json")
    first = path.read_bytes()
    path.unlink()
    project.run(*args, "--update-baselines", "-p", "no:xdist").assert_outcomes(passed=1)
    assert path.read_bytes() == first
    assert b'"dispatch_' in first
    result = project.run(*args, "-v")  # -v: every result's vector share
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["mlp @ aarch64: */* instructions executed in dispatches vector (*%)"])


OLD_COMPILER = "IREE compiler version 3.12.0rc20260917 @ 2b05c5db0000000000000000000000000000000"


def test_after_an_upgrade_only_work_added_beyond_the_threshold_fails_and_is_ranked(project):
    vectorization_project(project)
    args = ("vectorization/test_executed_vectorization.py", "--rvv-models=mlp", "--rvv-targets=rv64gcv-zvl256b")
    project.run(*args, "--update-baselines").assert_outcomes(passed=1)
    [path] = (project.path / "vectorization" / "__snapshots__" / "test_executed_vectorization").glob("*.json")
    recorded = json.loads(path.read_text())
    assert recorded["iree_compile"].startswith("IREE compiler version 3.13")
    name, biggest = max(recorded["dispatches"].items(), key=lambda kv: kv[1]["instructions"])

    def recorded_with_old_compiler(growth: float) -> None:
        data = json.loads(json.dumps(recorded))
        data["iree_compile"] = OLD_COMPILER
        data["dispatches"][name]["instructions"] = round(biggest["instructions"] / growth)
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")  # as syrupy writes it

    recorded_with_old_compiler(1.03)  # the new compiler's code executes 3 % more: churn
    churn = project.run(*args)
    churn.assert_outcomes(passed=1)
    churn.stdout.fnmatch_lines(["*rvv upgrade review*",
                                f"recorded with {OLD_COMPILER}; now IREE compiler version 3.13*",
                                "work added (instructions executed per dispatch, most added first):",
                                f"  mlp @ rv64gcv-zvl256b {name}: * -> {biggest['instructions']} (+*, +3.0%)",
                                "churn: 1 dispatch moves within the --rvv-added-work threshold*"])
    assert project.run(*args, "--rvv-strict-baselines").ret == 1  # exactness for teams that want it

    recorded_with_old_compiler(1.2)  # 20 % more work: a regression of work, named by its dispatch
    worse = project.run(*args)
    worse.assert_outcomes(failed=1)
    worse.stdout.fnmatch_lines([f"  {name}: executes * -> {biggest['instructions']} instructions (+*, +20.0%)"])
    project.run(*args, "--rvv-added-work=25").assert_outcomes(passed=1)

    recorded_with_old_compiler(0.8)  # less work: an improvement, whatever the vector share does
    better = project.run(*args)
    better.assert_outcomes(passed=1)
    better.stdout.fnmatch_lines(["    improvement: *executes * -> * instructions (-*, -20.0%)", "work removed:"])


def test_the_snapshot_extension_answers_who_owns_a_file_as_syrupy_does(pytester):
    """SnapshotFiles only answers the cheap "no" first (syrupy resolves both paths for every test and unused file at
    the session's end, 14 s of a rerun): for owned, foreign, module-named, other-module and truncated long names,
    its answer is syrupy's own JSONSnapshotExtension's, and it claims exactly the files syrupy does."""
    from syrupy.extensions.json import JSONSnapshotExtension
    from syrupy.location import PyTestLocation

    from pytest_rvv.judge.snapshots import SnapshotFiles

    long_id = "m" * 300
    pytester.makepyfile(f"""
        import pytest
        @pytest.mark.parametrize("cell", ["mlp-rv64gc", "mlp-rv64gcv-zvl256b", "{long_id}"],
                                 ids=str)
        def test_still_vectorized(cell):
            pass
        def test_plain():
            pass
    """)
    items, _ = pytester.inline_genitems("-p", "no:syrupy", "-p", "no:cacheprovider", "-p", "no:rvv")  # plain items
    module = items[0].path.stem
    here = pytester.path / "__snapshots__" / module
    names = ["test_still_vectorized[mlp-rv64gc].json", "test_still_vectorized[mlp-rv64gcv-zvl256b].json",
             "test_still_vectorized[gone-rv64gc].json", f"{module}.json", "test_plain.json",
             "test_still_vectorized[mlp-rv64gc].1.json",
             ("test_still_vectorized[" + long_id + "]")[:250] + ".json",
             ("test_still_vectorized[" + long_id[:-1] + "x]")[:249] + "y.json"]
    places = [here / name for name in names] + [pytester.path / "elsewhere" / "__snapshots__" / module / names[0]]
    claimed = set()
    for item in items:
        location = PyTestLocation(item)
        for place in places:
            ours = SnapshotFiles.matches_test_location(test_location=location, snapshot_location=str(place))
            theirs = JSONSnapshotExtension.matches_test_location(test_location=location, snapshot_location=str(place))
            assert ours == theirs, (item.name, place.name)
            if ours:
                claimed.add((item.name, place.name))
    assert ("test_still_vectorized[mlp-rv64gc]", names[0]) in claimed  # the spec compares real answers, not two Falses
    assert ("test_still_vectorized[" + long_id + "]", names[6]) in claimed
    assert not any(name == names[2] for test, name in claimed if test != "test_plain")  # a plain test claims its module
