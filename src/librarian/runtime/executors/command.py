"""``command_executor``: run a program (``{"argv": [...]}``) or, when asked for, a shell script.

Payload: exactly one of ``argv`` (a list of strings, run without a shell, so no value is ever
interpolated) or ``script`` (run as ``/bin/sh -c script``: only when the payload says ``script``);
optional ``env`` (variables the task sets), ``venv`` (a virtualenv whose ``bin`` goes first on the
task's ``PATH``), ``stdin``, ``timeout_seconds``, ``memory_mb``, ``output_bytes`` and
``expect.exit_code`` (default 0: the exit code that counts as success).
"""

from __future__ import annotations

import shlex

from librarian.errors import LibrarianError
from librarian.runtime.contracts import ExecutionResult, TaskSpec, Workspace
from librarian.runtime.executors.base import (
    PayloadError,
    environment_of,
    expected_exit_code,
    failure,
    field,
    from_error,
    last_lines,
    process_details,
    process_limits,
    process_output,
    string_list,
    success,
    where,
)
from librarian.runtime.sandbox import EnvironmentManager, ProcessOutcome

SHELL = "/bin/sh"


class CommandExecutor:
    """Runs commands in the Environment Manager's sandbox."""

    executor_type: str = "command_executor"

    def __init__(self, environment: EnvironmentManager) -> None:
        self.environment = environment

    def execute(self, task: TaskSpec, workspace: Workspace) -> ExecutionResult:
        """Run the task's command; ``ok`` when it exits with the expected code before its timeout."""
        try:
            argv = self._argv(task)
            outcome = self.environment.run(
                argv,
                workspace,
                env_overrides=environment_of(task, self.environment, workspace).overrides,
                stdin=field(task, "stdin", str),
                **process_limits(task, self.environment),
            )
            expected = expected_exit_code(task)
        except LibrarianError as exc:
            return from_error(exc)
        return outcome_result(outcome, expected, describe=_describe(task, argv))

    @staticmethod
    def _argv(task: TaskSpec) -> list[str]:
        argv = string_list(task, "argv")
        script = field(task, "script", str)
        if (argv is None) == (script is None):
            raise PayloadError(
                f"{where(task)}: the payload needs exactly one of 'argv' (a list, run without a shell) "
                "or 'script' (run by /bin/sh)"
            )
        if script is not None:
            return [SHELL, "-c", script]
        assert argv is not None
        return argv


def outcome_result(outcome: ProcessOutcome, expected_exit_code: int, *, describe: str) -> ExecutionResult:
    """Turn a finished run into a result: success on the expected exit code, else a failure with details."""
    output = process_output(outcome)
    duration = outcome.duration_seconds
    if outcome.timed_out:
        return failure(
            "TimeoutError",
            f"{describe} was killed after its {_seconds(outcome.timeout_seconds or duration)} timeout",
            details=process_details(outcome),
            output=output,
            duration_seconds=duration,
        )
    if outcome.exit_code != expected_exit_code:
        how = (
            f"was killed by {outcome.signal_name}"
            if outcome.signal_name
            else f"exited with code {outcome.exit_code}"
        )
        tail = last_lines(outcome.stderr) or last_lines(outcome.stdout)
        return failure(
            "CommandFailedError",
            f"{describe} {how} (expected {expected_exit_code})" + (f": {tail}" if tail else ""),
            details=process_details(outcome),
            output=output,
            duration_seconds=duration,
        )
    return success(
        f"{describe} exited with code {outcome.exit_code} in {duration:.2f}s",
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        output=output,
        duration_seconds=duration,
    )


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _describe(task: TaskSpec, argv: list[str]) -> str:
    if "script" in task.payload and task.payload["script"] is not None:
        return "the script"
    text = shlex.join(argv)
    return f"`{text if len(text) <= 120 else text[:117] + '...'}`"
