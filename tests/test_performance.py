"""Performance baselines: recording, checking with a table, atomic updates, merging xdist workers."""

import json
import re
import shlex
import shutil

import pytest

from pytest_rvv.judge.baselines import Baseline, load_baseline
from pytest_rvv.judge.baselines import write_baselines as write_portable
from pytest_rvv.judge.policy import DEFAULT_TOLERANCES, Row, compare, mann_whitney_greater, table, tolerances
from pytest_rvv.measure.performance import PerfResult

from .conftest import SUITE_COPY_IGNORE, SUITES

ARGS = ("performance", "--rvv-models=mlp", "--rvv-targets=host,aarch64,rv64gc")


def performance_project(project):
    project.write(suite=False)
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=SUITE_COPY_IGNORE)
    return project


def recorded_elsewhere(project):
    """mlp on rv64gc recorded as machine "recorder", judged as machine "elsewhere": only its portable
    metrics apply here, whatever the load. Returns the run's arguments and the portable baseline."""
    performance_project(project)
    args = ("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc", "--rvv-machine=elsewhere")
    project.run(*args[:-1], "--update-baselines", "--rvv-machine=recorder").assert_outcomes(passed=1)
    return args, project.path / "baselines" / "performance" / "rv64gc" / "mlp.json"


def baselines(project):
    return {p.relative_to(project.path).as_posix(): json.loads(p.read_text())
            for p in sorted((project.path / "baselines" / "performance").rglob("*.json"))}


def stored(metrics, samples=None):
    """A baseline of these metrics (and timed runs)."""
    return Baseline("m", "t", {}, metrics, samples=samples)


def test_workers_hand_results_to_the_controller_which_writes_each_baseline_once(project):
    performance_project(project)
    result = project.run(*ARGS, "-n", "2", "--update-baselines", "--rvv-machine=box", "-v")  # -v: Table 1
    result.assert_outcomes(passed=3)
    written = baselines(project)
    assert sorted(written) == [
        "baselines/performance/aarch64/mlp.json", "baselines/performance/machines/box/aarch64/mlp.json",
        "baselines/performance/machines/box/host/mlp.json", "baselines/performance/machines/box/rv64gc/mlp.json",
        "baselines/performance/rv64gc/mlp.json"]  # host has no portable metric: its code follows the CPU
    assert result.stdout.str().count("recorded  ") == 5
    host = written["baselines/performance/machines/box/host/mlp.json"]
    rv = written["baselines/performance/rv64gc/mlp.json"]
    rv_times = written["baselines/performance/machines/box/rv64gc/mlp.json"]
    assert {"wall_s_min", "cpu_s_min", "peak_rss_kb", "iree_peak_bytes", "module_bytes"} <= set(host["metrics"])
    assert host["machine"]["name"] == "box" and host["machine"]["fingerprint"]["cores"]
    assert {"executed_dispatch_instructions", "iree_peak_bytes", "module_bytes", "peak_rss_kb"} <= set(rv["metrics"])
    assert rv["metrics"]["static_vector"] == 0 and "wall_s_min" not in rv["metrics"]  # portable only
    assert {"wall_s_min", "cpu_s_min", "compile_s"} == set(rv_times["metrics"]) - {"wall_s_median", "cpu_s_median"}
    assert rv["toolchain"]["iree_compile"].startswith("IREE compiler version")
    assert "/" not in rv["toolchain"]["runtime"]  # no machine's paths in a portable baseline
    result.stdout.fnmatch_lines(["| Model | Target | work per call (M instr) | work vs rv64gc | est. X60 ms per call | "
                                 "est. speedup vs rv64gc on X60 | est. X280 Mcycles per call | * | static vector "
                                 "instr | executed vector % | QEMU time (min s) | QEMU speedup vs rv64gc | Mem (peak "
                                 "RSS MB) |"])
    assert {"est_cycles@spacemit-x60", "est_cycles@sifive-x280", "est_cycles@sifive-p670"} <= set(rv["metrics"])
    assert rv["toolchain"]["llvm_mca"].startswith("LLVM version 22.")
    assert sum(rv["silicon"]["spacemit-x60"].values()) == rv["metrics"]["est_cycles@spacemit-x60"]


def test_an_edited_baseline_fails_the_right_test_with_a_table(project):
    performance_project(project)
    project.run(*ARGS, "--update-baselines", "--rvv-machine=recorder").assert_outcomes(passed=3)
    path = project.path / "baselines" / "performance" / "aarch64" / "mlp.json"
    data = json.loads(path.read_text())
    data["metrics"]["module_bytes"] -= 100
    path.write_text(json.dumps(data))
    result = project.run(*ARGS, "--rvv-machine=elsewhere")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "FAILED performance/test_performance.py::test_no_slower_or_bigger[[]mlp-aarch64[]]*",
    ])
    result.stdout.fnmatch_lines([
        "performance regression: mlp on aarch64",
        "portable metrics vs */baselines/performance/aarch64/mlp.json:",
        "metric * baseline * now * change * allowed  verdict",
        "module_bytes * +* exact  REGRESSED",
    ])


def test_an_improvement_passes_and_is_listed_but_fails_when_strict(project):
    args, path = recorded_elsewhere(project)
    data = json.loads(path.read_text())
    data["metrics"]["executed_dispatch_instructions"] += 1000  # the code now executes fewer: better
    path.write_text(json.dumps(data))
    result = project.run(*args)
    result.assert_outcomes(passed=1)
    assert "REGRESSED" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*rvv improvements*",
                                 "mlp on rv64gc: executed_dispatch_instructions -*% (record: pytest "
                                 "performance/test_performance.py --rvv-models=mlp --rvv-targets=rv64gc "
                                 "--update-baselines -k '[[]mlp-rv64gc]')"])  # [[] is fnmatch's literal [
    strict = project.run(*args, "--rvv-strict-baselines")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["differs from its baseline (strict): mlp on rv64gc",
                                 "*executed_dispatch_instructions * exact  improved"])
    # the line's command, run as it stands, records this cell's baseline and no other
    (command,) = re.findall(r"\(record: pytest (.*)\)$", result.stdout.str(), re.MULTILINE)
    project.run(*shlex.split(command)).assert_outcomes(passed=1)
    assert json.loads(path.read_text())["metrics"]["executed_dispatch_instructions"] == \
        data["metrics"]["executed_dispatch_instructions"] - 1000
    project.run(*args, "--rvv-strict-baselines").assert_outcomes(passed=1)


def test_times_gate_only_against_a_baseline_from_this_machine(project):
    performance_project(project)
    args = ("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc")
    project.run(*args, "--update-baselines", "--rvv-machine=fast-box").assert_outcomes(passed=1)
    path = project.path / "baselines" / "performance" / "machines" / "fast-box" / "rv64gc" / "mlp.json"
    data = json.loads(path.read_text())
    for metric in ("wall_s_min", "cpu_s_min"):
        data["metrics"][metric] /= 3  # another machine, three times faster
        data["metrics"][metric] -= 0.06  # and beyond the 50 ms noise floor
    data["samples"] = {k: [v / 3 - 0.06 for v in vs] for k, vs in data["samples"].items()}
    path.write_text(json.dumps(data))
    portable = project.path / "baselines" / "performance" / "rv64gc" / "mlp.json"
    work = json.loads(portable.read_text())
    same_work = portable.read_text()
    # no counted work to hold the times to (with the same or less, a slower emulated run is the machine's or the
    # emulator's: tests/test_verdicts.py), so the times are judged as measured
    del work["metrics"]["executed_dispatch_instructions"]
    portable.write_text(json.dumps(work))
    elsewhere = project.run(*args, "--rvv-machine=new-runner")
    elsewhere.assert_outcomes(passed=1)
    elsewhere.stdout.fnmatch_lines(["machine-bound metrics shown, not gated: no baseline from machine new-runner "
                                    "(baselines exist for fast-box); record one here with pytest "
                                    "performance/test_performance.py --rvv-models=mlp --rvv-targets=rv64gc "
                                    "--update-baselines"])
    here = project.run(*args, "--rvv-machine=fast-box")
    here.assert_outcomes(failed=1)
    here.stdout.fnmatch_lines(["performance regression: mlp on rv64gc", "machine-bound metrics vs *fast-box*",
                               "*", "wall_s_min * REGRESSED*"])
    portable.write_text(same_work)  # exactly the recorded work: slower times are the machine's
    same = project.run(*args, "--rvv-machine=fast-box")
    same.assert_outcomes(passed=1)
    assert "REGRESSED" not in same.stdout.str()


def test_host_code_is_gated_only_on_the_machine_that_compiled_it(project):
    performance_project(project)
    args = ("performance", "--rvv-models=mlp", "--rvv-targets=host")
    project.run(*args, "--update-baselines").assert_outcomes(passed=1)  # the fingerprint's own name
    [path] = (project.path / "baselines" / "performance" / "machines").glob("*/host/mlp.json")
    data = json.loads(path.read_text())
    data["metrics"]["dispatch_code_bytes"] -= 64  # as if another CPU's code were recorded here
    path.write_text(json.dumps(data))
    project.run(*args, "--rvv-machine=other-cpu").assert_outcomes(passed=1)
    same = project.run(*args)
    same.assert_outcomes(failed=1)
    same.stdout.fnmatch_lines(["*dispatch_code_bytes * exact  REGRESSED"])


def test_re_recording_on_a_second_machine_leaves_portable_baselines_byte_identical(project):
    """Counts, sizes and silicon estimates: the same under -n 2 and without xdist, under another machine name."""
    performance_project(project)
    args = ("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b,aarch64")
    project.run(*args, "-n", "2", "--update-baselines", "--rvv-machine=first").assert_outcomes(passed=3)
    portable = {p: p.read_bytes() for p in (project.path / "baselines" / "performance").glob("*/mlp.json")}
    assert "est_cycles@spacemit-x60" in json.loads(portable[project.path / "baselines" / "performance" /
                                                            "rv64gcv-zvl256b" / "mlp.json"])["metrics"]
    second = project.run(*args, "-p", "no:xdist", "--update-baselines", "--rvv-machine=second", "-v")  # -v: each file
    second.assert_outcomes(passed=3)
    assert {p: p.read_bytes() for p in portable} == portable
    assert (project.path / "baselines" / "performance" / "machines" / "second" / "rv64gc" / "mlp.json").is_file()
    second.stdout.fnmatch_lines(["unchanged */baselines/performance/rv64gc/mlp.json"])


def test_missing_baseline_passes_unless_strict(project):
    performance_project(project)
    note = project.run("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc")
    note.assert_outcomes(passed=1)
    note.stdout.fnmatch_lines(["baseline needed: */rv64gc/mlp.json (record it with --update-baselines)"])
    strict = project.run("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc", "--rvv-strict-baselines")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["no performance baseline */rv64gc/mlp.json: record one with --update-baselines"])


def test_an_interrupted_update_leaves_the_old_baselines_intact(tmp_path, monkeypatch):
    record = PerfResult("m", "host", {"iree_compile": "x"}, {"module_bytes": 1})

    def write_baselines(root, records):
        return write_portable(root, records, {"name": "m1"}, lambda target, metrics: {"portable": metrics,
                                                                                    "machine-bound": {}})

    write_baselines(tmp_path, [record])
    before = (tmp_path / "host" / "m.json").read_bytes()

    def crash(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", crash)
    with pytest.raises(KeyboardInterrupt):
        write_baselines(tmp_path, [PerfResult("m", "host", {"iree_compile": "x"}, {"module_bytes": 2})])
    assert (tmp_path / "host" / "m.json").read_bytes() == before
    assert [p.name for p in (tmp_path / "host").iterdir()] == ["m.json"]  # no half-written temporary left


def test_dram_traffic_is_recorded_per_dispatch_and_a_move_within_the_model_s_noise_leaves_the_file_as_it_was(tmp_path):
    def record(dram):
        return PerfResult("mm", "t", {"iree_compile": "x"}, {"module_bytes": 1},
                          traffic={"spacemit-x60": {"dispatch_0": {"dram_bytes": dram, "at_load": 0},
                                                    "dispatch_1": {"dram_bytes": 5, "at_load": 1}}})

    def write(dram):
        return write_portable(tmp_path, [record(dram)], {"name": "m1"},
                              lambda target, metrics: {"portable": metrics, "machine-bound": {}})

    write(1_200_000)
    stored = (tmp_path / "t" / "mm.json").read_bytes()
    assert json.loads(stored)["traffic"] == {"spacemit-x60": {"dispatch_0": 1_200_000}}  # one call's dispatches
    assert write(1_205_000)[0].startswith("unchanged ")  # +0.4 %: the cache model's run-to-run noise
    assert (tmp_path / "t" / "mm.json").read_bytes() == stored
    assert write(2_400_000)[0].endswith("mm.json: traffic")
    assert load_baseline(tmp_path / "t" / "mm.json").traffic == {"spacemit-x60": {"dispatch_0": 2_400_000}}


def test_a_damaged_baseline_is_one_clear_line(tmp_path):
    path = tmp_path / "m.json"
    path.write_text("{ not json")
    with pytest.raises(Exception, match=r"m.json: unreadable baseline .*restore it from git or rerun with"):
        load_baseline(path)


def test_deterministic_metrics_are_exact_and_time_is_a_ratio():
    limits = tolerances({}, under_xdist=False)
    rows = compare(stored({"module_bytes": 100, "wall_s_min": 1.0}),
                   {"module_bytes": 101, "wall_s_min": 1.2}, {}, limits)
    assert [(r.metric, r.ok) for r in rows] == [("module_bytes", False), ("wall_s_min", True)]
    assert "module_bytes" in table(rows) and "REGRESSED" in table(rows)
    assert tolerances({}, under_xdist=True)["wall_s_min"] > DEFAULT_TOLERANCES["wall_s_min"]


def test_slower_beyond_the_ratio_but_not_significantly_is_not_a_regression():
    base = stored({"wall_s_min": 1.0}, {"wall_s": [1.0, 3.0, 3.1, 2.9, 3.2]})
    now = [1.5, 1.2, 3.0, 2.8, 3.1]
    [row] = compare(base, {"wall_s_min": 1.0 * 1.3 + 0.1}, {"wall_s": now}, {"wall_s_min": 1.3})
    assert row.ok and row.note.startswith("p=")


def test_mann_whitney_detects_a_real_shift():
    assert mann_whitney_greater([2.0, 2.1, 2.2, 2.3, 2.4], [1.0, 1.1, 1.2, 1.3, 1.4]) < 0.01
    assert mann_whitney_greater([1.0, 1.1, 1.2, 1.3, 1.4], [1.0, 1.1, 1.2, 1.3, 1.4]) == pytest.approx(0.5, abs=0.1)


def test_bad_tolerance_names_the_metric():
    with pytest.raises(Exception, match=r"\[tool.pytest_rvv.tolerances\] wall_time: unknown metric"):
        tolerances({"wall_time": 2}, under_xdist=False)
    assert Row("x", 1, 2, 0.0, "REGRESSED").allowance() == "exact"


def test_lower_is_better_for_every_gated_metric():
    limits = {"wall_s_min": 1.3}
    [exact] = compare(stored({"dispatch_code_bytes": 172209}), {"dispatch_code_bytes": 159249}, {}, limits)
    assert exact.ok and exact.status == "improved" and "REGRESSED" not in table([exact])
    [faster] = compare(stored({"wall_s_min": 2.0}), {"wall_s_min": 1.0}, {}, limits)
    assert faster.ok and faster.status == "improved"
    [noise] = compare(stored({"wall_s_min": 1.0}), {"wall_s_min": 0.9}, {}, limits)
    assert noise.status == "ok"
    [diagnostic] = compare(stored({"static_vector": 10}), {"static_vector": 5}, {}, {},
                           frozenset({"static_vector"}))
    assert diagnostic.ok and diagnostic.status == "changed"


def test_tiny_slowdowns_below_the_noise_floor_pass_and_large_ones_fail():
    limits = {"wall_s_min": 1.3}
    assert compare(stored({"wall_s_min": 0.014}), {"wall_s_min": 0.019}, {}, limits)[0].ok
    assert not compare(stored({"wall_s_min": 1.0}), {"wall_s_min": 1.5}, {}, limits)[0].ok
    # exactly the floor is within it, though 0.14 - 0.09 is 0.05000000000000002 in floating point (GNU time's CPU
    # seconds come in 10 ms ticks: a board's 0.1 s run once moved by exactly five)
    assert compare(stored({"cpu_s_min": 0.09}), {"cpu_s_min": 0.14}, {}, {"cpu_s_min": 1.3})[0].ok
    assert not compare(stored({"cpu_s_min": 0.09}), {"cpu_s_min": 0.15}, {}, {"cpu_s_min": 1.3})[0].ok


def test_a_machine_name_is_a_folder_name_or_one_clear_line(project):
    performance_project(project)
    result = project.run("performance", "--rvv-models=mlp", "--rvv-targets=host", "--rvv-machine=../etc")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rvv-machine '../etc': a machine name is 1-64 letters, digits, '.', '_' "
                                 "or '-' (it names a folder under baselines/performance/machines/)"])


def test_the_default_machine_name_follows_the_fingerprint():
    from pytest_rvv.config.machine import derived_name, this_machine

    here = this_machine(None, "qemu 10.0.2 plugins")
    assert here.name == derived_name(here.fingerprint) and here.named_by == "fingerprint"
    other_cpu = {**here.fingerprint, "cpu": "Other CPU 9000", "features": "avx512f"}
    assert derived_name(other_cpu) != here.name
    assert this_machine(None, "qemu 9.2.0").name != here.name  # another QEMU build: another machine
    assert this_machine("ci-runner", "qemu 10.0.2").name == "ci-runner"


def test_after_an_upgrade_sizes_and_small_moves_pass_and_added_work_fails(project):
    args, path = recorded_elsewhere(project)
    recorded = json.loads(path.read_text())

    def recorded_with_old_compiler(work_growth: float) -> None:
        data = json.loads(json.dumps(recorded))
        data["toolchain"]["iree_compile"] = "IREE compiler version 3.12.0rc20260917 @ 2b05c5db"
        data["metrics"]["module_bytes"] -= 64  # the new compiler's module is 64 bytes bigger
        data["metrics"]["executed_dispatch_instructions"] = round(
            recorded["metrics"]["executed_dispatch_instructions"] / work_growth)
        path.write_text(json.dumps(data))

    recorded_with_old_compiler(1.02)
    review = project.run(*args)
    review.assert_outcomes(passed=1)
    review.stdout.fnmatch_lines(["rvv: upgrade review: baselines recorded with IREE compiler version 3.12.0rc20260917 "
                                 "@ 2b05c5db; now IREE compiler version 3.13*"])
    assert project.run(*args, "--rvv-strict-baselines").ret == 1
    recorded_with_old_compiler(1.5)
    worse = project.run(*args)
    worse.assert_outcomes(failed=1)
    worse.stdout.fnmatch_lines([
        "performance regression: mlp on rv64gc",
        "upgrade review: baseline recorded with IREE compiler version 3.12.0rc20260917 @ 2b05c5db; now *",
        "*",
        "executed_dispatch_instructions * +50.0%    exact  REGRESSED upgrade: fails above +5%",
        "module_bytes * changed upgrade"])


def test_wall_time_slower_without_more_cpu_time_is_machine_load_not_a_regression():
    limits = {"wall_s_min": 1.3, "cpu_s_min": 1.3}
    base = stored({"wall_s_min": 0.46, "cpu_s_min": 0.30})
    loaded = {r.metric: r for r in compare(base, {"wall_s_min": 0.66, "cpu_s_min": 0.32}, {}, limits)}
    assert loaded["wall_s_min"].ok and "load on the machine" in loaded["wall_s_min"].note
    slower = {r.metric: r for r in compare(base, {"wall_s_min": 0.66, "cpu_s_min": 0.45}, {}, limits)}
    assert not slower["wall_s_min"].ok and not slower["cpu_s_min"].ok


def test_after_an_upgrade_the_host_targets_sizes_are_churn_on_its_own_machine_too(tmp_path):
    """Every metric of the host target is machine-bound: its code sizes follow the upgrade review there as well."""
    from pytest_rvv.config.machine import this_machine
    from pytest_rvv.config.targets import BUILTIN_TARGETS
    from pytest_rvv.judge.applicable import ApplicableBaselines
    from pytest_rvv.judge.verdict import judge
    from pytest_rvv.measure.performance import PerfResult

    old = {"iree_compile": "IREE compiler version 3.12.0"}
    machine = Baseline("m", "host", old, {"module_bytes": 1000, "cpu_s_min": 1.0}, samples={})
    applicable = ApplicableBaselines(None, tmp_path / "p.json", machine, tmp_path / "m.json", ())
    now = PerfResult("m", "host", {"iree_compile": "IREE compiler version 3.13.0"},
                     {"module_bytes": 1010, "cpu_s_min": 1.0})
    verdict = judge(applicable, now, BUILTIN_TARGETS["host"], tolerances(None, False), this_machine("box", "qemu"))
    assert not verdict.regressed and verdict.upgrade == ("IREE compiler version 3.12.0", "IREE compiler version 3.13.0")
    assert [r.status for r in verdict.machine_bound if r.metric == "module_bytes"] == ["changed"]
    strict = judge(applicable, now, BUILTIN_TARGETS["host"], tolerances(None, False), this_machine("box", "qemu"),
                   strict=True)
    assert strict.regressed


def test_portable_metrics_do_not_depend_on_the_user_home_or_cache_location(project, tmp_path, monkeypatch):
    """Recorded by one user (HOME, cache) and checked by another whose paths differ in length: module bytes, code
    sizes, executed counts and silicon estimates identical (the cache's path once reached the module)."""
    performance_project(project)
    args = ("performance", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b")
    for user, cache in (("a", tmp_path / "c"), ("second-user", tmp_path / "a-much-longer-cache-folder" / "pytest-rvv")):
        monkeypatch.setenv("HOME", str(tmp_path / "home" / user))
        monkeypatch.setenv("PYTEST_RVV_CACHE_DIR", str(cache))
        run = project.run(*args, "--update-baselines", f"--rvv-machine={user}", "-v")  # -v: each file written
        run.assert_outcomes(passed=2)
        if user == "a":
            portable = {p: p.read_bytes() for p in (project.path / "baselines" / "performance").glob("*/mlp.json")}
            assert len(portable) == 2
            recorded = json.loads(portable[project.path / "baselines" / "performance" / "rv64gcv-zvl256b" /
                                           "mlp.json"])["metrics"]
            assert {"module_bytes", "dispatch_code_bytes", "executed_dispatch_instructions",
                    "est_cycles@spacemit-x60"} <= set(recorded)
    assert {p: p.read_bytes() for p in portable} == portable
    run.stdout.fnmatch_lines(["unchanged */baselines/performance/rv64gcv-zvl256b/mlp.json"])
