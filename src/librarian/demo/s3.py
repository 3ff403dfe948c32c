"""A real S3 server for the demo: moto's server on a free loopback port, started and stopped by us.

The server is the ``moto_server`` program of the ``moto[server]`` package (the ``demo`` extra), next
to this interpreter, or ``python -m moto.server`` when the program is not there. It listens on
127.0.0.1 only, logs to a file in the demo's directory, and is terminated (then killed, if it must
be) when the ``with`` block ends.

Example:
    >>> with S3Server(log_dir) as s3:  # doctest: +SKIP
    ...     print(s3.endpoint)  # http://127.0.0.1:40123
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from librarian.errors import BackendUnavailableError, MissingExtraError

__all__ = ["S3Server", "object_tags"]

_START_SECONDS = 60.0
_STOP_SECONDS = 10.0


class S3Server:
    """moto's S3 server on ``127.0.0.1`` and a free port.

    Args:
        log_dir: where its log file goes.

    Raises:
        MissingExtraError: moto's server is not installed.
        BackendUnavailableError: it did not start answering within a minute.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_path = log_dir / "s3-server.log"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3Server:
        """Start the server and wait until it answers."""
        command = _server_command()
        self.port = _free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [*command, "-H", "127.0.0.1", "-p", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + _START_SECONDS
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.endpoint, timeout=1.0).status_code < 500:
                    return self
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise BackendUnavailableError(
                    f"the S3 server did not start on port {self.port}",
                    hint=f"see its log: {self.log_path}",
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit within ten seconds)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=_STOP_SECONDS)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def object_tags(endpoint: str, bucket: str, key: str) -> list[dict[str, str]]:
    """The tags the server stores for an object, read with the AWS SDK (not copied from any plan).

    Raises:
        MissingExtraError: the AWS SDK is not installed.
        BackendUnavailableError: the server refused the request (no such bucket or object...).
    """
    try:
        from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]
        from botocore.session import get_session  # type: ignore[import-untyped]
    except ImportError as exc:
        raise MissingExtraError("botocore", "demo") from exc
    client: Any = get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    try:
        answer = client.get_object_tagging(Bucket=bucket, Key=key)
    except (BotoCoreError, ClientError) as exc:
        raise BackendUnavailableError(f"cannot read the tags of s3://{bucket}/{key}: {exc}") from exc
    return [{"Key": str(tag["Key"]), "Value": str(tag["Value"])} for tag in answer.get("TagSet", [])]


def _server_command() -> list[str]:
    program = Path(sys.executable).parent / "moto_server"
    if program.exists():
        return [str(program)]
    if importlib.util.find_spec("moto.server") is not None:
        return [sys.executable, "-m", "moto.server"]
    raise MissingExtraError("moto[server]", "demo")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
