"""The facts probe: a static riscv64 program that says what machine it runs on, as ``key=value`` lines.

V (HWCAP), VLEN (the vlenb CSR, read only when HWCAP says V: the probe is built for rv64gc and runs anywhere) and
/proc/cpuinfo's ``isa``, ``uarch``, ``mvendorid``, ``marchid``, ``mimpid``, ``model name`` and hart count. A board
over SSH (run/ssh_board.py) and a bundle's run.sh (bundle/) run the same probe.
"""

from __future__ import annotations

from pathlib import Path

from pytest_rvv.base.cbuild import build_riscv64_static
from pytest_rvv.base.store import Store

FACTS_C = r"""
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

static void field(const char *line, const char *key)
{
    size_t n = strlen(key);
    const char *colon = strchr(line, ':');
    if (strncmp(line, key, n) == 0 && colon && (line[n] == ' ' || line[n] == '\t' || line[n] == ':')) {
        char value[512] = "";
        sscanf(colon + 1, " %511[^\n]", value);
        printf("%s=%s\n", key, value);
    }
}

int main(void)
{
    unsigned long hwcap = getauxval(AT_HWCAP), vlenb = 0;
    int v = (hwcap >> ('V' - 'A')) & 1, harts = 0, first = 1;
    if (v) {
        __asm__ volatile("csrr %0, 0xc22" : "=r"(vlenb)); /* vlenb, by number: the probe is built without V */
    }
    printf("v=%d\nvlen=%lu\n", v, vlenb * 8);
    char line[1024];
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    while (cpuinfo && fgets(line, sizeof line, cpuinfo)) {
        if (strncmp(line, "processor", 9) == 0) {
            harts++;
            first = harts == 1;
        }
        if (first) {
            field(line, "isa");
            field(line, "uarch");
            field(line, "mvendorid");
            field(line, "marchid");
            field(line, "mimpid");
            field(line, "model name");
        }
    }
    printf("harts=%d\n", harts);
    return 0;
}
"""


def build_facts_probe(store: Store) -> Path:
    """The facts probe, cross-built once into the cache."""
    return build_riscv64_static(store, FACTS_C, "facts", "the riscv64 facts probe")


def parse_facts(text: str) -> dict[str, str]:
    """The probe's ``key=value`` lines (other lines are ignored)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
