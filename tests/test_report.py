"""The run report: index.html of a small real run, opened in headless Chromium; results.json, JUnit, GitHub."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from pytest_rvv.report.html import badges, verdict
from pytest_rvv.report.results import schema
from pytest_rvv.report.terminal import ExpectedFailureSeen, expected_failure_lines, shared_text

from .conftest import SUITE_COPY_IGNORE, SUITES

CHROMIUM = "chromium"


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which(CHROMIUM)
    if path is None:
        pytest.skip("chromium not installed: apt-get install chromium (bash scripts/setup.sh system)")
    return subprocess.run([path, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                           *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def reported(project, tmp_path, monkeypatch):
    """mlp (agrees) and strings (IREE cannot compile it) on rv64gc and zvl256b, every suite, report and JUnit XML."""
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.write(models=("mlp", "strings"))
    for suite in ("vectorization", "performance"):
        shutil.copytree(SUITES / suite, project.path / suite, ignore=SUITE_COPY_IGNORE)
    report = tmp_path / "report"
    result = project.run("correctness", "vectorization", "performance", "--rvv-models=mlp,strings",
                         "--rvv-targets=rv64gc,rv64gcv-zvl256b", f"--rvv-report={report}",
                         f"--junitxml={tmp_path / 'junit.xml'}")
    return result, report, summary, tmp_path / "junit.xml"


def test_the_page_loads_offline_in_chromium_with_a_cell_per_model_and_target(reported, tmp_path):
    result, report, _, _ = reported
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # strings cannot compile
    page = report / "index.html"
    result.stdout.fnmatch_lines([f"report: {page} and results.json (* KiB, written in * s)"])
    html = page.read_text()
    assert not re.search(r"""(?:src|href)=["'](?:https?:)?//""", html)  # nothing fetched: self-contained
    loaded = chromium("--dump-dom", page.as_uri())
    assert "CONSOLE" not in loaded.stderr, loaded.stderr  # no console message: no script error, no failed load
    dom = loaded.stdout
    cells = re.findall(r'<td class="cell (\w+)" data-verdict="\w+"><a href="#([^"]+)"', dom)
    assert sorted(cells) == [("failed", "cell-strings-rv64gc"), ("failed", "cell-strings-rv64gcv-zvl256b"),
                             ("passed", "cell-mlp-rv64gc"), ("passed", "cell-mlp-rv64gcv-zvl256b")]
    section = dom[dom.index('id="cell-strings-rv64gc"'):]
    assert 'class="failure"' in section.split("</section>")[0]  # the failing cell links to its failure block
    assert "CompileFailed: iree-compile rejected model 'strings'" in section
    # the RVV cell's dispatch table carries lane occupancy; the scalar one has no such column
    rvv = dom[dom.index('id="cell-mlp-rv64gcv-zvl256b"'):].split("</section>")[0]
    scalar = dom[dom.index('id="cell-mlp-rv64gc"'):].split("</section>")[0]
    assert "lane occupancy %" in rvv and "lane occupancy %" not in scalar
    occupancy = [float(v) for v in re.findall(r"lane occupancy: ([\d.]+) % of VLMAX", rvv)]
    assert len(occupancy) == 1 and 0 < occupancy[0] <= 100
    shot = tmp_path / "page.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,900", page.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 900 and pixels.std() > 0.05  # not blank


def test_results_json_junit_properties_and_the_github_summary(reported):
    _, report, summary, junit = reported
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())  # the schema file shipped in pytest_rvv/report/
    assert document["schema"] == "pytest-rvv-results/1"
    outcomes = {(t["model"], t["check"]): t["outcome"] for t in document["tests"]}
    assert outcomes[("strings", "compiles")] == "failed" and outcomes[("mlp", "correct")] == "passed"
    metrics = {m["metric"]: m for m in document["metrics"] if m["model"] == "mlp"}
    assert metrics["executed_dispatch_instructions"]["kind"] == "portable"
    assert metrics["executed_dispatch_instructions"]["unit"] == "instr"
    assert metrics["wall_s_min"]["kind"] == "machine-bound"
    lanes = [m for m in document["metrics"] if m["metric"] == "lane_occupancy_percent"]
    assert [(m["model"], m["target"], m["kind"], m["verdict"]) for m in lanes] == [
        ("mlp", "rv64gcv-zvl256b", "diagnostic", None)]
    # recorded with the same compiler line as the cell's gated metrics: a sweep's history keys them alike
    same_cell = [m for m in document["metrics"] if (m["model"], m["target"]) == ("mlp", "rv64gcv-zvl256b")]
    assert {m["toolchain"]["iree_compile"] for m in same_cell} == {lanes[0]["toolchain"]["iree_compile"]}
    assert document["run"]["toolchain"].startswith("IREE compiler version")
    # each checked cell's dispatch table (pytest-rvv history reads it): its executed rows sum to the gated metric
    tables = {(t["model"], t["target"]): t["dispatches"] for t in document["dispatch_tables"]}
    assert set(tables) == {("mlp", "rv64gc"), ("mlp", "rv64gcv-zvl256b")}
    executed = next(m["value"] for m in same_cell if m["metric"] == "executed_dispatch_instructions")
    assert sum(r.get("executed", 0) for r in tables[("mlp", "rv64gcv-zvl256b")]) == executed
    assert all("spilled_registers" in r and "instructions" in r for r in tables[("mlp", "rv64gcv-zvl256b")])
    per_call = next(m["value"] for m in same_cell if m["metric"] == "executed_per_call_instructions")
    assert sum(r["executed"] - r["one_time"] for r in tables[("mlp", "rv64gcv-zvl256b")]) == per_call
    properties = {p.get("name") for p in ET.parse(junit).iter("property")}
    assert {"rvv.module_bytes", "rvv.executed_dispatch_instructions", "rvv.wall_s_min",
            "rvv.lane_occupancy_percent"} <= properties
    text = summary.read_text()
    assert "| strings | failed | failed |" in text and "| mlp | passed | passed |" in text
    assert "correctness/test_compile.py::test_compiles[strings-rv64gc]" in text


def test_a_sweep_over_releases_fills_the_reports_history_once_per_version(project, tmp_path):
    """pytest-rvv sweep runs the selection with 3.12.0 and 3.13.0 (cached per version); the report draws both."""
    project.write(suite=False)
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=SUITE_COPY_IGNORE)
    selection = ["performance/test_performance.py", "--rvv-models=mlp", "--rvv-targets=aarch64", "-p",
                 "no:cacheprovider"]
    sweep = [sys.executable, "-m", "pytest_rvv.cli", "sweep", "--versions", "3.12.0..3.13.0", "--", *selection]
    first = subprocess.run(sweep, cwd=project.path, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stdout[-2000:]
    assert "[sweep] step 1 of 2, " in first.stdout and "[sweep] 2 of 2 releases in " in first.stdout
    again = subprocess.run(sweep, cwd=project.path, capture_output=True, text=True, timeout=600)
    assert again.stdout.count(": cached (") == 2  # nothing reran
    report = tmp_path / "report"
    project.run(*selection, f"--rvv-report={report}").assert_outcomes(passed=1)
    page = (report / "index.html").read_text()
    history = page[page.index("History across toolchain versions"):page.index("Per model and target")]
    assert "<h3>mlp on aarch64</h3>" in history
    assert "3.12.0rc" in history and "3.13.0rc" in history and "executed_dispatch_instructions" in history


def test_a_sweep_range_that_is_not_a_range_is_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "pytest_rvv.cli", "sweep", "--versions", "3.12.0", "--", "-q"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == "pytest-rvv: --versions '3.12.0': give a range of releases, e.g. 3.9.0..3.13.0"


def test_the_results_schema_refuses_a_record_without_its_verdict():
    document = {"schema": "pytest-rvv-results/1", "tests": [], "run": {
        "command": "pytest", "date": "2026-11-23 12:00:00 UTC", "machine": {"name": "m"}, "machine_text": "m"},
        "metrics": [{"model": "mlp", "target": "rv64gc", "metric": "module_bytes", "value": 1, "unit": "B",
                     "kind": "portable", "baseline": None, "machine": "m", "toolchain": {}}]}
    with pytest.raises(jsonschema.ValidationError, match="'verdict' is a required property"):
        jsonschema.validate(document, schema())
    document["metrics"][0]["verdict"] = "ok"
    jsonschema.validate(document, schema())


def test_a_grid_cell_shows_one_badge_per_check_with_its_worst_outcome_and_counts():
    tests = [{"check": "compiles", "outcome": "passed", "nodeid": "c[m-t]"}] + [
        {"check": "conformance", "outcome": o, "nodeid": f"n{i}"}
        for i, o in enumerate(["passed", "xfailed", "passed", "failed"])]
    assert badges(tests) == [
        {"check": "compiles", "outcome": "passed", "count": 1, "title": "c[m-t]"},
        {"check": "conformance", "outcome": "failed", "count": 4, "title": "1 failed, 2 passed, 1 xfailed"}]
    assert verdict(tests) == "failed" and verdict([]) == "none"


# This repository's addopts (pyproject.toml), as `pytest suites/` runs with them; the projects below use them too.
ADDOPTS = tomllib.loads((SUITES.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
SCREEN = 40  # lines: what a passing run may print
QUIET = ("correctness", "vectorization", "performance", "--rvv-models=mlp,strings",
         "--rvv-targets=rv64gc,rv64gcv-zvl256b")


@pytest.fixture
def recorded(project):
    """mlp (passes) and strings (an expected compile failure on both targets) through every per-cell suite, with
    this repository's addopts; snapshots, baselines and expected failures recorded by a first run. Runs pytest in
    the project with more arguments."""
    project.write(models=("mlp", "strings"), extra=f'[tool.pytest.ini_options]\naddopts = "{ADDOPTS}"\n')
    for suite in ("vectorization", "performance"):
        shutil.copytree(SUITES / suite, project.path / suite, ignore=SUITE_COPY_IGNORE)
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "expected-failures.toml").write_text("".join(
        f'[{target}]\nstrings = {{ phase = "compile", reason = "StringNormalizer is not supported" }}\n'
        for target in ("rv64gc", "rv64gcv-zvl256b")))

    def run(*args: str) -> pytest.RunResult:
        return project.pytester.runpytest_subprocess(*QUIET, *args)

    first = run("--update-baselines")
    assert first.ret == 0, first.stdout.str()
    return run


def test_a_passing_run_fits_one_screen_with_its_expected_failures_by_cause_and_where_the_report_is(recorded, tmp_path):
    for verbosity in ((), ("-q",)):
        result = recorded(*verbosity)
        assert result.ret == 0, result.stdout.str()
        xfailed = result.parseoutcomes()["xfailed"]
        assert xfailed >= 6 and len(result.outlines) <= SCREEN, result.stdout.str()
        assert not [line for line in result.outlines if line.startswith(("| Model |", "mlp @ ", "XFAIL correctness"))]
        result.stdout.fnmatch_lines([
            "*- rvv summary -*",
            "agreement with onnxruntime: 2 model x target cells, largest max abs error * (mlp on *)",
            "vectorization: 4 results (2 executed, 2 static) of 2 model x target cells: nothing changed",
            "performance: 2 model x target cells measured (Table 1: -v prints it)",
            f"XFAIL [[]{xfailed}[]] expected compile failure on <target>: StringNormalizer is not supported "
            "(<target>: rv64gc, rv64gcv-zvl256b)",
            "report: -v prints every table; --rvv-report=DIR writes the whole run (index.html, results.json, Table 1, "
            "plots)"])
    report = tmp_path / "report"
    written = recorded(f"--rvv-report={report}")
    assert written.ret == 0 and len(written.outlines) <= SCREEN, written.stdout.str()
    written.stdout.fnmatch_lines([f"report: {report / 'index.html'} and results.json (* KiB, written in * s)",
                                  f"report: {report}: performance.json, performance.md and 6 plots"])


def test_under_v_the_tables_appear(recorded):
    result = recorded("-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*- rvv agreement with onnxruntime (max abs error) -*", "model * rv64gc * rv64gcv-zvl256b", "mlp *",
        "*- rvv performance (Table 1) -*",
        "| Model | Target | work per call (M instr) | work vs rv64gc | est. X60 ms per call |*", "| mlp | rv64gc |*",
        "*- rvv vectorization -*", "mlp @ rv64gc: */* instructions executed in dispatches vector (*%)",
        "*- rvv summary -*", "performance: 2 model x target cells measured (Table 1: above)"])


def test_a_regressed_run_still_shows_its_regressed_rows_and_failure(recorded, project):
    path = project.path / "baselines" / "performance" / "rv64gc" / "mlp.json"
    data = json.loads(path.read_text())
    data["metrics"]["module_bytes"] -= 100
    path.write_text(json.dumps(data))
    result = recorded("-q")
    assert result.parseoutcomes()["failed"] == 1
    now = data["metrics"]["module_bytes"] + 100
    result.stdout.fnmatch_lines(["performance regression: mlp on rv64gc", "*module_bytes * +* exact  REGRESSED",
                                 "*- rvv summary -*", f"REGRESSED mlp on rv64gc: module_bytes {now - 100} -> {now}",
                                 "FAILED performance/test_performance.py::test_no_slower_or_bigger[[]mlp-rv64gc[]]*"])


def test_a_cause_told_once_keeps_what_its_targets_share():
    """Where targets' messages differ (natively, under an emulator), the line keeps their common start and end."""
    assert shared_text(["exit 1 running t for <target> natively: UNIMPLEMENTED; x",
                        "exit 1 running t for <target> under qemu-riscv64 -cpu rv64,v=false: UNIMPLEMENTED; x"]) \
        == "exit 1 running t for <target> …: UNIMPLEMENTED; x"
    assert shared_text(["a b", "a b"]) == "a b"
    assert shared_text(["aaa", "aa"]) == "…"  # start and end never overlap


def test_expected_failures_are_one_line_per_cause_naming_its_targets_once():
    """A cause is what failed and how: the same message on two targets, apart from the target and its emulator's CPU,
    is one line, which tells no one target's CPU as every target's; another test's failure is its own."""
    seen = [ExpectedFailureSeen(f"expected run failure: test_cast for {target} under qemu -cpu {cpu}: UNIMPLEMENTED",
                                "test_cast", target)
            for target, cpu in (("rv64gcv-zvl256b", "rv64,v=true,vlen=256"), ("rv64gc", "rv64,v=false"))]
    seen += [ExpectedFailureSeen("LLVM's X60 model is 4x slow at m8", "spacemit-x60-vmacc.vv-e32m8"),
             ExpectedFailureSeen("expected compile failure on rv64gcv-zvl256b: no f16 without +zvfh (try rv64gc)",
                                 "squeezenet1.1-f16", "rv64gcv-zvl256b")]
    assert expected_failure_lines(seen) == [
        "XFAIL [2] expected run failure: test_cast for <target> under qemu -cpu …: UNIMPLEMENTED "
        "(<target>: rv64gc, rv64gcv-zvl256b)",
        "XFAIL [1] LLVM's X60 model is 4x slow at m8",
        "XFAIL [1] expected compile failure on rv64gcv-zvl256b: no f16 without +zvfh (try rv64gc)"]
