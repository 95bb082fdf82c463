"""The ``pytest-rvv`` commands (doctor, models, build-runtime, merge, bisect, sweep): a top layer beside plugin.py,
may import everything below it.
"""

from pytest_rvv.cli.main import main

__all__ = ["main"]
