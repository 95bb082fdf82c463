"""Progress lines: one updating line on a terminal, plain lines in CI logs."""

import io

from pytest_rvv.base.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_in_a_ci_log_every_step_is_a_plain_line_with_the_time_so_far():
    log = io.StringIO()
    progress = Progress("bisect", log)
    progress.step(1, "at most 4", "3.9.0 ...")
    progress.line("3.9.0: good (12 s)")
    assert log.getvalue() == "[bisect] step 1 of at most 4, 0 s: 3.9.0 ...\n[bisect] 3.9.0: good (12 s)\n"


def test_on_a_terminal_the_step_line_updates_in_place():
    screen = Terminal()
    progress = Progress("build-runtime", screen)
    progress.step(1, 4, "configure")
    progress.step(2, 4, "build")
    progress.line("built")
    assert screen.getvalue() == ("\r\x1b[2K[build-runtime] step 1 of 4, 0 s: configure"
                                 "\r\x1b[2K[build-runtime] step 2 of 4, 0 s: build\n[build-runtime] built\n")


def test_the_long_running_functions_log_lines_become_steps_or_plain_lines():
    log = io.StringIO()
    progress = Progress("sweep", log)
    progress.log("step 2 of 5: 3.10.0")
    progress.log("step 1 of at most 4: 3.9.0 ...")
    progress.log("3.10.0: cached (rvv-history/3.10.0/results.json)")
    assert log.getvalue() == ("[sweep] step 2 of 5, 0 s: 3.10.0\n[sweep] step 1 of at most 4, 0 s: 3.9.0 ...\n"
                              "[sweep] 3.10.0: cached (rvv-history/3.10.0/results.json)\n")
