"""CPU time the whole machine spent, from ``/proc/stat``: every process, the databases and brokers too.

The throughput benchmarks share two cores with PostgreSQL and RabbitMQ, so a system's real cost per
task is its own processes *plus* the server work it causes (transactions, persistent messages).
Comparing this machine-wide figure, on an otherwise idle machine, says which system costs more.
"""

from __future__ import annotations

import os
from pathlib import Path


def busy_seconds() -> float:
    """CPU seconds every core spent not idle since boot (user, nice, system, irq, softirq, steal)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    # proc(5): user nice system idle iowait irq softirq steal [guest guest_nice, already in user/nice]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(value) for value in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
