"""Progress of long work (runtime build, bisect): what step of how many, and the time so far.

On a terminal the step line updates in place; in CI logs (not a terminal) each step is a plain line.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


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
