"""CPU time the whole machine spent, from ``/proc/stat``: every process, the databases and brokers too.

The throughput benchmarks share two cores with PostgreSQL and RabbitMQ, so a system's real cost per
task is its own processes *plus* the server work it causes (transactions, persistent messages).
Comparing this machine-wide figure, on an otherwise idle machine, says which system costs more.
"""

from __future__ import annotations

import os
from pathlib import Path


def busy_seconds() -> float:
    """CPU seconds every core spent working since boot (user, nice, system, irq, softirq).

    Steal time (the hypervisor running another guest while this one waited) is left out: it is not
    work any process here did, and on a shared host it came and went with the neighbours' load.
    """
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    # proc(5): user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    user, nice, system, _idle, _iowait, irq, softirq, _steal = (int(value) for value in fields[:8])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU time of ``roots`` and all their live descendants, each with the children it reaped."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # exited meanwhile
                continue
            parents[int(entry.name)], stats[int(entry.name)] = int(fields[1]), fields
    members, frontier = set(roots), list(roots)
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in members]
        members.update(children)
        frontier.extend(children)
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(sum(int(v) for v in stats[pid][11:15]) for pid in members if pid in stats) / ticks
