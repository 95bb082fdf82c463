"""Root conftest: pytest-rvv itself is loaded through its pytest11 entry point.

``pytester`` must be enabled here (the root), because the plugin's own tests in tests/ run
pytest-in-pytest, and pytest only honours ``pytest_plugins`` in the rootdir's conftest.
"""

pytest_plugins = ["pytester"]
