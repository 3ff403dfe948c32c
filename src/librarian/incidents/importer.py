"""Load a team's incident history in one command: Markdown post-mortems, JSON (or JSON Lines) and CSV.

* **Markdown**: YAML front matter (``title``, ``severity``, ``incident_type``, ``occurred_at``,
  ``affected_services``, ``symptoms``, ``error_messages``, ``infrastructure``, ``tags``,
  ``resolution_time_minutes``, ``was_successful``, ``recurred``) and the usual sections, found by
  their ``##`` headings: Summary, Impact, Root cause, Resolution (its list items become the
  resolution steps), Timeline, and optionally Symptoms and Errors (list items). The post-mortem
  itself becomes the incident's document.
* **JSON**: a list of incidents (or ``{"incidents": [...]}``) with the design's fields; the
  signature may be nested (``problem_signature``) or flat. **JSON Lines**: one incident per line.
* **CSV**: a header with at least ``title``; list columns (``symptoms``, ``error_messages``,
  ``affected_services``, ``tags``, ``resolution_steps``) separate items with ``;``.

A malformed entry is reported with its file and line (or entry number) and skipped; the rest are
imported. Nothing already stored is changed.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from librarian.errors import InvalidInputError, LibrarianError
from librarian.incidents.service import IncidentDraft
from librarian.incidents.signature import FIELDS, ProblemSignature
from librarian.ingest.parsed import ParseError
from librarian.ingest.parsers.markdown import split_front_matter
from librarian.knowledge.access import Principal, Scope
from librarian.knowledge.documents import DocumentDraft
from librarian.safe_yaml import load_json
from librarian.storage.models import as_utc

if TYPE_CHECKING:
    from librarian.app import Librarian

MAX_FILE_BYTES = 20_000_000
_SECTION = re.compile(r"^##\s+(.+?)\s*#*\s*$", re.MULTILINE)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.+)$", re.MULTILINE)
_H1 = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)
_LIST_COLUMNS = ("symptoms", "error_messages", "affected_services", "tags", "resolution_steps")
_KNOWN = {
    "title",
    "description",
    "incident_type",
    "severity",
    "problem_signature",
    *FIELDS,
    "root_cause",
    "solution_applied",
    "solution",
    "resolution_steps",
    "tags",
    "related_incidents",
    "resolution_time_minutes",
    "was_successful",
    "recurred",
    "occurred_at",
    "date",
    "category",
    "visibility",
    "summary",
    "impact",
}


@dataclass
class ImportReport:
    """What an import did: how many incidents it stored, and each entry it refused."""

    imported: list[int] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"imported": len(self.imported), "incident_ids": self.imported, "problems": self.problems}


@dataclass(frozen=True)
class _Entry:
    where: dict[str, Any]
    draft: IncidentDraft
    document: str | None = None


SUFFIXES = (".md", ".markdown", ".json", ".jsonl", ".csv")


def import_incidents(lib: Librarian, principal: Principal, path: Path) -> ImportReport:
    """Import every ``.md``, ``.json``, ``.jsonl`` and ``.csv`` file at ``path`` (a file or folder)."""
    principal.require(Scope.WRITE, "importing incidents")
    if not path.exists():
        raise InvalidInputError(f"{path}: no such file or folder")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    report = ImportReport()
    texts: list[tuple[str, str]] = []
    for file in files:
        if file.suffix.lower() in SUFFIXES:
            try:
                texts.append((str(file), _read(file)))
            except InvalidInputError as exc:
                report.problems.append({"file": str(file), "reason": exc.message})
    return import_texts(lib, principal, texts, report)


def import_texts(
    lib: Librarian, principal: Principal, texts: list[tuple[str, str]], report: ImportReport | None = None
) -> ImportReport:
    """Import incidents from ``(file name, text)`` pairs; the name's suffix says the format."""
    principal.require(Scope.WRITE, "importing incidents")
    report = report or ImportReport()
    entries: list[_Entry] = []
    for name, data in texts:
        file = Path(name)
        suffix = file.suffix.lower()
        if suffix not in SUFFIXES:
            report.problems.append({"file": name, "reason": f"unknown format; name it {', '.join(SUFFIXES)}"})
            continue
        try:
            if suffix in (".md", ".markdown"):
                entries.append(_markdown_entry(file, data))
            elif suffix == ".csv":
                entries += list(_csv_entries(file, data, report))
            else:
                entries += list(_json_entries(file, data, report, lines=suffix == ".jsonl"))
        except (InvalidInputError, ParseError) as exc:
            report.problems.append({"file": str(file), "reason": str(exc)})
    valid = []
    for entry in entries:
        try:
            entry.draft.check(where=_label(entry.where))
            valid.append(entry)
        except InvalidInputError as exc:
            report.problems.append({**entry.where, "reason": exc.message})
    lib.incidents.embed_problem(*(entry.draft for entry in valid))
    for entry in valid:
        try:
            with lib.sessions.begin() as session:
                document = None
                if entry.document is not None:
                    document = lib.knowledge.documents.create_in(
                        session,
                        principal,
                        DocumentDraft(
                            title=entry.draft.title,
                            content=entry.document,
                            document_type="incident_report",
                            tags=entry.draft.tags,
                            severity=entry.draft.severity,
                            visibility=entry.draft.visibility,
                            source_type="import",
                            source_file_path=entry.where.get("file"),
                        ),
                    )
                incident = lib.incidents.create_in(session, principal, entry.draft, document=document)
                report.imported.append(incident.id)
        except LibrarianError as exc:
            report.problems.append({**entry.where, "reason": exc.message})
    lib.vectors.apply_outbox()
    return report


def _label(where: Mapping[str, Any]) -> str:
    line = f":{where['line']}" if "line" in where else ""
    return f"{where.get('file', 'incident')}{line}"


def _read(file: Path) -> str:
    if file.stat().st_size > MAX_FILE_BYTES:
        raise InvalidInputError(f"{file}: larger than {MAX_FILE_BYTES // 1_000_000} MB")
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{file}: not UTF-8 text (byte {exc.start})") from exc


# -- Markdown post-mortems -----------------------------------------------------------------------


def _sections(body: str) -> dict[str, str]:
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(body))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(body)
        found[match.group(1).strip().lower()] = body[match.end() : end].strip()
    return found


def _section(sections: Mapping[str, str], *names: str) -> str:
    for name in names:
        for heading, text in sections.items():
            if heading == name or heading.startswith(name):
                return text
    return ""


def _markdown_entry(file: Path, text: str) -> _Entry:
    where = {"file": str(file), "line": 1}
    try:
        meta, body = split_front_matter(text)
    except ParseError as exc:
        raise InvalidInputError(f"{file}: front matter: {exc}") from exc
    ignored = sorted(set(meta) - _KNOWN)
    meta = {key: value for key, value in meta.items() if key in _KNOWN}
    if ignored:
        where["ignored_front_matter"] = ignored
    sections = _sections(body)
    heading = _H1.search(body)
    summary = _section(sections, "summary", "overview", "description")
    impact = _section(sections, "impact")
    resolution = _section(sections, "resolution", "remediation", "fix", "mitigation")
    fields: dict[str, Any] = dict(meta)
    fields.setdefault("title", heading.group(1).strip() if heading else file.stem.replace("-", " "))
    fields.setdefault("description", "\n\n".join(part for part in (summary, impact) if part))
    fields.setdefault("root_cause", _section(sections, "root cause", "cause") or None)
    fields.setdefault("solution_applied", _first_block(resolution) or None)
    fields.setdefault("resolution_steps", _ITEM.findall(resolution))
    for name, headings in (("symptoms", ("symptoms",)), ("error_messages", ("errors", "error messages"))):
        if name not in fields and _section(sections, *headings):
            fields[name] = _ITEM.findall(_section(sections, *headings))
    return _Entry(where, _draft(fields, where), document=text)


def _first_block(text: str) -> str:
    for block in text.split("\n\n"):
        stripped = block.strip()
        if stripped and not _ITEM.match(stripped):
            return stripped
    return ""


# -- JSON and CSV ----------------------------------------------------------------------------------


def _json_entries(file: Path, text: str, report: ImportReport, *, lines: bool) -> Iterator[_Entry]:
    if lines:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = {"file": str(file), "line": number}
            try:
                value = json.loads(line)
                if not isinstance(value, dict):
                    raise InvalidInputError("expected a JSON object")
                yield _Entry(where, _draft(value, where))
            except (ValueError, InvalidInputError) as exc:
                report.problems.append({**where, "reason": str(exc)})
        return
    data = load_json(text.encode("utf-8"), str(file))
    items = data.get("incidents") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InvalidInputError(f'{file}: expected a list of incidents or {{"incidents": [...]}}')
    for number, value in enumerate(items):
        where = {"file": str(file), "entry": number}
        try:
            if not isinstance(value, dict):
                raise InvalidInputError("expected a JSON object")
            yield _Entry(where, _draft(value, where))
        except InvalidInputError as exc:
            report.problems.append({**where, "reason": exc.message})


def _csv_entries(file: Path, text: str, report: ImportReport) -> Iterator[_Entry]:
    reader = csv.DictReader(io.StringIO(text))
    columns = set(reader.fieldnames or [])
    if "title" not in columns:
        raise InvalidInputError(
            f"{file}: the CSV has no 'title' column (found: {', '.join(sorted(columns)) or 'none'})",
            hint="the first line must name the columns; 'title' is required",
        )
    for row in reader:
        where = {"file": str(file), "line": reader.line_num}
        try:
            if None in row:
                raise InvalidInputError("more values than columns")
            values: dict[str, Any] = {
                key: value for key, value in row.items() if key and value not in (None, "")
            }
            for column in _LIST_COLUMNS:
                if column in values:
                    values[column] = [item.strip() for item in str(values[column]).split(";") if item.strip()]
            yield _Entry(where, _draft(values, where))
        except InvalidInputError as exc:
            report.problems.append({**where, "reason": exc.message})


# -- one entry ------------------------------------------------------------------------------------


def _draft(fields: Mapping[str, Any], where: Mapping[str, Any]) -> IncidentDraft:
    label = _label(where)
    unknown = sorted(set(fields) - _KNOWN)
    if unknown:
        raise InvalidInputError(f"{label}: unknown field {', '.join(map(repr, unknown))}")
    title = fields.get("title")
    if not isinstance(title, str) or not title.strip():
        raise InvalidInputError(f"{label}: title is missing")
    nested = fields.get("problem_signature")
    flat = {name: fields[name] for name in FIELDS if name in fields}
    signature = ProblemSignature.from_mapping(
        nested if nested is not None else flat, where=f"{label}: problem_signature"
    )
    return IncidentDraft(
        title=title.strip(),
        description=_text(fields, "description", label) or _text(fields, "summary", label) or "",
        incident_type=_text(fields, "incident_type", label),
        severity=(_text(fields, "severity", label) or "").lower() or None,
        signature=signature,
        root_cause=_text(fields, "root_cause", label),
        solution_applied=_text(fields, "solution_applied", label) or _text(fields, "solution", label),
        resolution_steps=tuple(_strings(fields, "resolution_steps", label)),
        tags=tuple(_strings(fields, "tags", label)),
        resolution_time_minutes=_integer(fields, "resolution_time_minutes", label),
        was_successful=_boolean(fields, "was_successful", label),
        recurred=bool(_boolean(fields, "recurred", label)),
        occurred_at=_moment(fields.get("occurred_at", fields.get("date")), label),
        category=_text(fields, "category", label),
        visibility=_text(fields, "visibility", label),
        origin=dict(where),
    )


def _text(fields: Mapping[str, Any], name: str, label: str) -> str | None:
    value = fields.get(name)
    if value is None:
        return None
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise InvalidInputError(f"{label}: {name} must be text")
    return str(value).strip() or None


def _strings(fields: Mapping[str, Any], name: str, label: str) -> list[str]:
    value = fields.get(name)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str | int | float) for item in value):
        raise InvalidInputError(f"{label}: {name} must be a list of strings")
    return [str(item).strip() for item in value if str(item).strip()]


def _integer(fields: Mapping[str, Any], name: str, label: str) -> int | None:
    value = fields.get(name)
    if value is None:
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidInputError(f"{label}: {name} must be a whole number, not {value!r}") from None
    if not 0 <= number <= 10_000_000:
        raise InvalidInputError(f"{label}: {name} must be between 0 and 10,000,000")
    return number


def _boolean(fields: Mapping[str, Any], name: str, label: str) -> bool | None:
    value = fields.get(name)
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "y"):
        return True
    if text in ("false", "no", "0", "n"):
        return False
    raise InvalidInputError(f"{label}: {name} must be true or false, not {value!r}")


def _moment(value: Any, label: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return as_utc(value)
    try:
        return as_utc(datetime.fromisoformat(str(value).strip().replace("Z", "+00:00")))
    except ValueError:
        raise InvalidInputError(f"{label}: occurred_at is not an ISO 8601 date: {value!r}") from None
