"""``librarian demo``: the seed scenario, for real (see :mod:`librarian.demo.scenario`)."""

from __future__ import annotations

from typing import Annotated

import typer

from librarian.cli.common import EXIT_FAILURE, handle_errors, load_settings, print_json, stderr, stdout


def demo(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="AWS CLI subtree to index when it is not indexed yet (repeatable; default: s3 and s3api).",
        ),
    ] = None,
) -> None:
    """Fix a drifted AWS CLI call from its docs, then again from what was learned (exit 1 if a run fails).

    Runs the goal "upload report.csv to bucket my-bucket with tag compliance=strict" twice against a
    local S3 server (moto) with the real AWS CLI: the first run corrects the failing upload from the
    indexed documentation, the second from the verified fix the first one taught. Needs the ``demo``
    extra; indexes the AWS CLI help into LIBRARIAN_HOME first when it is not there (a minute or two).
    """
    # Imported here: the scenario pulls in the runtime and the loop, which other commands (a one-shot
    # search, say) should not pay for at start-up.
    from librarian.demo.render import render_demo
    from librarian.demo.scenario import DEFAULT_SCOPES, run_demo

    with handle_errors():
        settings = load_settings()
        result = run_demo(
            settings,
            scopes=tuple(scope) if scope else DEFAULT_SCOPES,
            progress=lambda line: stderr.print(line, highlight=False),
        )
    if as_json:
        print_json(result.to_dict())
    else:
        render_demo(result, stdout)
    if not result.succeeded:
        raise typer.Exit(EXIT_FAILURE)
