"""``python -m pytest_rvv.cli``: the ``pytest-rvv`` command."""

import sys

from pytest_rvv.cli.main import main

sys.exit(main())
