"""Boards: RISC-V machines reached over SSH, declared as ``[tool.pytest_rvv.boards.NAME]`` tables.

```toml
[tool.pytest_rvv.boards.bpi-f3]
host = "user@bpi-f3.local"     # anything OpenSSH accepts, ~/.ssh/config aliases included
workdir = "/tmp/pytest-rvv"     # default
# launcher = "qemu-riscv64 -cpu rv64,v=true,vlen=256"   a prefix for every command (a host that needs one)
# ssh-options = ["-p", "2222"]                          extra ssh arguments
```
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_rvv.base.errors import ConfigError

BOARD_KEYS = frozenset({"host", "workdir", "launcher", "ssh-options"})
DEFAULT_WORKDIR = "/tmp/pytest-rvv"


@dataclass(frozen=True)
class Board:
    """A board from ``[tool.pytest_rvv.boards.NAME]``."""

    name: str
    host: str  # anything OpenSSH accepts: user@host, an ~/.ssh/config alias
    workdir: str = DEFAULT_WORKDIR
    launcher: tuple[str, ...] = ()  # a prefix for every command on the board (a host that needs an emulator)
    ssh_options: tuple[str, ...] = ()  # extra ssh arguments, e.g. ["-p", "2222", "-i", "key"]

    @classmethod
    def from_table(cls, name: str, table: Mapping[str, Any]) -> Board:
        where = f"[tool.pytest_rvv.boards.{name}]"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table (host = \"user@board\")")
        unknown = sorted(set(table) - BOARD_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(BOARD_KEYS))}")
        host = table.get("host")
        if not isinstance(host, str) or not host.strip():
            raise ConfigError(f"{where}: give host = \"user@board\" (anything OpenSSH accepts)")
        workdir = str(table.get("workdir", DEFAULT_WORKDIR))
        if not workdir.startswith("/"):
            raise ConfigError(f"{where}: workdir {workdir!r} must be an absolute path on the board")

        def words(key: str) -> tuple[str, ...]:
            value = table.get(key, ())
            if isinstance(value, str):
                return tuple(shlex.split(value))
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{where}: {key} must be a string or a list of strings")
            return tuple(value)

        return cls(name, host.strip(), workdir.rstrip("/") or "/", words("launcher"), words("ssh-options"))
