"""The run report: index.html of a small real run, opened in headless Chromium; results.json, JUnit, GitHub."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from .conftest import SUITES

CHROMIUM = "chromium"


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    path = shutil.which(CHROMIUM)
    if path is None:
        pytest.skip("chromium not installed: apt-get install chromium (bash scripts/setup.sh system)")
    return subprocess.run([path, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                           *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def reported(project, tmp_path, monkeypatch):
    """mlp (agrees) and strings (IREE cannot compile it) on rv64gc, every suite, with a report and JUnit XML."""
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.write(models=("mlp", "strings"))
    for suite in ("vectorization", "performance"):
        shutil.copytree(SUITES / suite, project.path / suite,
                        ignore=shutil.ignore_patterns("__pycache__", "__snapshots__"))
    report = tmp_path / "report"
    result = project.run("correctness", "vectorization", "performance", "--rvv-models=mlp,strings",
                         "--rvv-targets=rv64gc", f"--rvv-report={report}", f"--junitxml={tmp_path / 'junit.xml'}")
    return result, report, summary, tmp_path / "junit.xml"


def test_the_page_loads_offline_in_chromium_with_a_cell_per_model_and_target(reported, tmp_path):
    result, report, _, _ = reported
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # strings cannot compile
    page = report / "index.html"
    result.stdout.fnmatch_lines([f"report: {page} and results.json"])
    html = page.read_text()
    assert not re.search(r"""(?:src|href)=["'](?:https?:)?//""", html)  # nothing fetched: self-contained
    loaded = chromium("--dump-dom", page.as_uri())
    assert "CONSOLE" not in loaded.stderr, loaded.stderr  # no console message: no script error, no failed load
    dom = loaded.stdout
    cells = re.findall(r'<td class="cell (\w+)" data-verdict="\w+"><a href="#([^"]+)"', dom)
    assert sorted(cells) == [("failed", "cell-strings-rv64gc"), ("passed", "cell-mlp-rv64gc")]
    section = dom[dom.index('id="cell-strings-rv64gc"'):]
    assert 'class="failure"' in section.split("</section>")[0]  # the failing cell links to its failure block
    assert "CompileFailed: iree-compile rejected model 'strings'" in section
    shot = tmp_path / "page.png"
    chromium(f"--screenshot={shot}", "--window-size=1200,900", page.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 900 and pixels.std() > 0.05  # not blank


def test_results_json_junit_properties_and_the_github_summary(reported):
    _, report, summary, junit = reported
    document = json.loads((report / "results.json").read_text())
    assert document["schema"] == "pytest-rvv-results/1"
    outcomes = {(t["model"], t["check"]): t["outcome"] for t in document["tests"]}
    assert outcomes[("strings", "compiles")] == "failed" and outcomes[("mlp", "correct")] == "passed"
    metrics = {m["metric"]: m for m in document["metrics"] if m["model"] == "mlp"}
    assert metrics["executed_dispatch_instructions"]["kind"] == "portable"
    assert metrics["executed_dispatch_instructions"]["unit"] == "instr"
    assert metrics["wall_s_min"]["kind"] == "machine-bound"
    assert document["run"]["toolchain"].startswith("IREE compiler version")
    properties = {p.get("name") for p in ET.parse(junit).iter("property")}
    assert {"rvv.module_bytes", "rvv.executed_dispatch_instructions", "rvv.wall_s_min"} <= properties
    text = summary.read_text()
    assert "| strings | failed |" in text and "| mlp | passed |" in text
    assert "correctness/test_compile.py::test_compiles[strings-rv64gc]" in text
