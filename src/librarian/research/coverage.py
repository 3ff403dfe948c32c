"""What the index lacks for a question: options no indexed command declares, commands not indexed.

Research can be no more right than what is indexed. Asked about ``--tagging`` of an AWS CLI index
that holds only ``aws s3`` (``ingest-cli aws --scope s3``), the ranking still returns its best ``s3``
command, and nothing in the ranking's shape says that the answer cannot be there. The index can say
it: no indexed command declares ``--tagging``. Likewise ``aws s3api put-object`` named in an error,
with no ``aws s3api`` command indexed. Only an index known to be partial (a CLI source limited to
some scopes) is read this way: in a complete one, an option nobody declares is API drift, whose
replacement is indexed. The share of named options and commands that the index lacks is a feature of the
confidence model (``coverage_gap``), fitted with questions whose answer is not indexed
(``bench/calibrate_confidence.py``), and the reason is told in ``confidence_note``.

Only what the caller may read is consulted: the names checked come from the question, and every
lookup is filtered by the caller's grants.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Text, cast, exists, or_, select
from sqlalchemy.orm import Session

from librarian.research.error_evidence import chunk_scope
from librarian.storage.models import Chunk, Document, Source

# Command lines checked per question at most: an error text may quote a whole script.
MAX_COMMAND_LINES = 8
_SUBCOMMAND = r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*"
# Words after a program name that are never one of its commands: CLIs print "run: aws help".
_NOT_COMMANDS = frozenset({"help"})


@dataclass(frozen=True)
class Coverage:
    """How much of what a question names is indexed.

    ``named`` counts the options and command lines checked; ``missing_options`` are options no
    readable entity of the SDK version declares, ``missing_commands`` command prefixes (``aws
    s3api``) no readable entity is named by; ``scopes`` the parts of the CLI its source was limited
    to (``s3``), when it was.
    """

    named: int = 0
    missing_options: tuple[str, ...] = ()
    missing_commands: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    @property
    def gap(self) -> float:
        """The share (0..1) of named options and commands that the index lacks."""
        missing = len(self.missing_options) + len(self.missing_commands)
        return round(missing / self.named, 3) if self.named else 0.0

    def note(self, sdk_name: str) -> str | None:
        """Why the index cannot hold the answer, in one sentence; None when it lacks nothing."""
        parts = []
        if self.missing_options:
            parts.append(f"no indexed {sdk_name} command declares {', '.join(self.missing_options)}")
        if self.missing_commands:
            names = ", ".join(f"`{c}`" for c in self.missing_commands)
            parts.append(f"{names} {'is' if len(self.missing_commands) == 1 else 'are'} not indexed")
        if not parts:
            return None
        limited = f" (the index was limited to: {', '.join(self.scopes)})" if self.scopes else ""
        return f"{'; '.join(parts)}{limited}: the answer may be in a part of {sdk_name} that is not indexed"


def declares_options(
    session: Session, sdk_name: str, sdk_version: str | None, grants: tuple[str, ...] | None
) -> bool:
    """Whether any readable entity of the SDK version declares options (CLI help does; prose does not).

    An option missing from an index of prose says nothing: prose declares no options at all.
    """
    scope = chunk_scope(session, sdk_name, sdk_version, grants)
    declared = cast(Chunk.attributes, Text).like('%"options": ["-%')
    return bool(session.scalar(select(exists().where(*scope, declared))))


def command_lines(text: str, programs: Sequence[str]) -> list[tuple[str, str]]:
    """``(program, first subcommand)`` of each command line of ``programs`` in ``text``, in order.

    Example:
        >>> command_lines("$ aws s3api put-object --bucket b\\nUnknown options: --tagging", ["aws"])
        [('aws', 's3api')]
    """
    found: list[tuple[str, str]] = []
    for program in programs:
        pattern = re.compile(rf"(?<![\w/.-]){re.escape(program)}[ \t]+({_SUBCOMMAND})(?![\w./=:-])")
        found += [
            (program, match.group(1))
            for match in pattern.finditer(text)
            if match.group(1) not in _NOT_COMMANDS
        ]
    return list(dict.fromkeys(found))[:MAX_COMMAND_LINES]


def missing_commands(
    session: Session,
    sdk_name: str,
    sdk_version: str | None,
    grants: tuple[str, ...] | None,
    lines: Sequence[tuple[str, str]],
) -> list[str]:
    """The ``program subcommand`` prefixes of ``lines`` that name no readable command.

    A CLI's commands are named without the program (``s3api put-object`` of ``aws``; the program
    is in their ``command`` attribute). Only programs indexed with subcommands count: a tool
    documented as one page takes positional arguments, not subcommands.
    """
    scope = chunk_scope(session, sdk_name, sdk_version, grants)
    text = cast(Chunk.attributes, Text)
    missing = []
    for program in dict.fromkeys(program for program, _ in lines):
        of_program = text.like(f'%"command": "{_escaped(program)}"%', "\\")
        has_subcommands = exists().where(
            *scope, of_program, Chunk.entity_type == "command", Chunk.entity_name != program
        )
        if not session.scalar(select(has_subcommands)):
            continue
        for _, word in (line for line in lines if line[0] == program):
            named = or_(Chunk.entity_name == word, Chunk.entity_name.like(f"{_escaped(word)} %", "\\"))
            if not session.scalar(select(exists().where(*scope, of_program, named))):
                missing.append(f"{program} {word}")
    return missing


def indexed_scopes(session: Session, chunk_ids: Sequence[int]) -> tuple[str, ...]:
    """The scopes the CLI sources of these (readable) chunks were limited to, if any."""
    if not chunk_ids:
        return ()
    sources = (
        select(Document.source_id)
        .join(Chunk, Chunk.document_id == Document.id)
        .where(Chunk.id.in_(list(chunk_ids)))
    )
    rows = session.scalars(
        select(Source.options).where(Source.id.in_(sources.scalar_subquery()), Source.kind == "cli-help")
    ).all()
    scopes: list[str] = []
    for options in rows:
        program = str((options or {}).get("command") or "")
        listed = (options or {}).get("scopes") or []
        scopes += [f"{program} {scope}".strip() for scope in listed if isinstance(scope, str)]
    return tuple(dict.fromkeys(scopes))


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
