"""Workflows several test modules submit (REST, MCP, the web UI)."""

from __future__ import annotations

from typing import Any

# pip moved --not-required from freeze to list: with no pip docs and no LLM, the loop asks a person.
LEAVES: dict[str, Any] = {
    "name": "leaves",
    "goal": "List the installed packages nothing else depends on",
    "tasks": [
        {
            "id": "leaves",
            "executor_type": "command_executor",
            "payload": {
                "argv": ["python", "-m", "pip", "freeze", "--not-required"],
                "expect": {"stdout_contains": "Package"},
            },
        }
    ],
}


def sleeping(seconds: float) -> dict[str, Any]:
    """A task that sleeps, then one that depends on it: long enough to cancel or follow."""
    return {
        "name": "slow",
        "tasks": [
            {"id": "wait", "executor_type": "command_executor", "payload": {"argv": ["sleep", str(seconds)]}},
            {
                "id": "never",
                "executor_type": "command_executor",
                "payload": {"argv": ["true"]},
                "depends_on": ["wait"],
            },
        ],
    }
