"""Progress of long work (runtime build, bisect, sweep): what step of how many, and the time so far.

On a terminal the step line updates in place; in CI logs (not a terminal) each step is a plain line.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TextIO

STEP = re.compile(r"step (\d+) of ((?:at most )?\d+): (.*)")  # how the long-running functions log a step


class Progress:
    """``[build-runtime] step 2 of 4, 31 s: build the host build tools``."""

    def __init__(self, name: str, stream: TextIO | None = None) -> None:
        self.name = name
        self.stream = stream or sys.stdout
        self.start = time.monotonic()
        self.open_line = False  # a step line waits to be overwritten (terminal only)

    @property
    def terminal(self) -> bool:
        return self.stream.isatty()

    def step(self, index: int, total: int | str, what: str) -> None:
        self._write(f"[{self.name}] step {index} of {total}, {time.monotonic() - self.start:.0f} s: {what}",
                    update=True)

    def log(self, text: str) -> None:
        """A log line of the long-running functions: "step i of n: what" is a step, anything else a line."""
        if step := STEP.match(text):
            self.step(int(step.group(1)), step.group(2), step.group(3))
        else:
            self.line(text)

    def line(self, text: str) -> None:
        self._write(f"[{self.name}] {text}", update=False)

    def _write(self, text: str, update: bool) -> None:
        if self.terminal and update:
            self.stream.write("\r\x1b[2K" + text)
            self.open_line = True
        else:
            self.stream.write(("\n" if self.open_line else "") + text + "\n")
            self.open_line = False
        self.stream.flush()
