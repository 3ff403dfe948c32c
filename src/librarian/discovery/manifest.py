"""Verb and tool manifests as callers give them, validated field by field.

Both the design's camelCase names (``toolId``, ``actionVerbs``, ``inputSchema``,
``inputDefinitions``) and snake_case are accepted. Every problem names its field; a manifest is
refused as a whole, so the registry never keeps half of one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from librarian.errors import InvalidInputError

TOOL_TYPES = ("mcp", "openapi", "python", "cli")
_VERB = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")
# Any printable text without spaces: tool names of MCP servers and OpenAPI operationIds vary widely.
_TOOL_KEY = re.compile(r"^[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]{0,254}$")
MAX_TEXT = 20_000
MAX_LIST = 100


class ManifestInvalidError(InvalidInputError):
    """A manifest breaks the format; ``problems`` lists every field at fault."""

    def __init__(self, origin: str, problems: list[str]) -> None:
        self.problems = problems
        shown = "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
        super().__init__(f"{origin}: {shown}", hint="fix the named fields and send the manifest again")

    def to_dict(self) -> dict[str, object]:
        """The error with every problem listed (interfaces return it as is)."""
        return {**super().to_dict(), "problems": list(self.problems)}


def verb_name(text: str) -> str:
    """The canonical form of a verb: ``get weather`` and ``get-weather`` are ``GET_WEATHER``."""
    return re.sub(r"[^A-Z0-9]+", "_", text.strip().upper()).strip("_")


@dataclass(frozen=True)
class VerbManifest:
    """A verb as designed: what it does, its capabilities, examples, inputs, outputs."""

    verb: str
    description: str
    capabilities: tuple[str, ...] = ()
    category: str | None = None
    examples: tuple[str, ...] = ()
    input_definitions: tuple[dict[str, Any], ...] = ()
    output_definitions: tuple[dict[str, Any], ...] = ()
    decomposition: tuple[str, ...] = ()

    def search_text(self) -> str:
        """The text embedded for search: the verb's words, description, capabilities, examples."""
        parts = [self.verb.replace("_", " ").lower(), self.description]
        parts += [capability.replace("_", " ") for capability in self.capabilities]
        parts += list(self.examples[:10])
        parts += [str(item.get("name", "")) for item in self.input_definitions]
        return ". ".join(part for part in parts if part)


@dataclass(frozen=True)
class ToolManifest:
    """A tool as designed: ``toolId``, name, type, verbs, capabilities, description, schema, binding."""

    tool_key: str
    name: str
    tool_type: str
    description: str
    action_verbs: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    category: str | None = None
    examples: tuple[str, ...] = ()
    input_schema: dict[str, Any] = field(default_factory=dict)
    binding: dict[str, Any] = field(default_factory=dict)
    version: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The manifest as stored and hashed for sync."""
        return {
            "tool_key": self.tool_key,
            "name": self.name,
            "tool_type": self.tool_type,
            "description": self.description,
            "action_verbs": list(self.action_verbs),
            "capabilities": list(self.capabilities),
            "category": self.category,
            "examples": list(self.examples),
            "input_schema": self.input_schema,
            "binding": self.binding,
            "version": self.version,
        }


class _Fields:
    """Reads fields of one manifest, collecting problems instead of stopping at the first."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        self.given = given
        self.problems: list[str] = []

    def raw(self, *names: str) -> tuple[str, Any]:
        for name in names:
            if name in self.given and self.given[name] is not None:
                return name, self.given[name]
        return names[0], None

    def text(self, *names: str, required: bool = False, limit: int = MAX_TEXT) -> str:
        name, value = self.raw(*names)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                self.problems.append(f"{name}: is required")
            return ""
        if not isinstance(value, str):
            self.problems.append(f"{name}: must be a string, not {type(value).__name__}")
            return ""
        if len(value) > limit:
            self.problems.append(f"{name}: longer than {limit} characters")
            return ""
        return value.strip()

    def strings(self, *names: str) -> tuple[str, ...]:
        name, value = self.raw(*names)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.problems.append(f"{name}: must be a list of strings")
            return ()
        if len(value) > MAX_LIST:
            self.problems.append(f"{name}: more than {MAX_LIST} items")
            return ()
        return tuple(item.strip() for item in value if item.strip())

    def mapping(self, *names: str) -> dict[str, Any]:
        name, value = self.raw(*names)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problems.append(f"{name}: must be an object")
            return {}
        return dict(value)

    def definitions(self, *names: str) -> tuple[dict[str, Any], ...]:
        name, value = self.raw(*names)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.problems.append(f"{name}: must be a list of objects")
            return ()
        kept = []
        for position, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
                self.problems.append(f"{name}[{position}]: needs a 'name'")
            else:
                kept.append(dict(item))
        return tuple(kept)


def parse_verb(given: Mapping[str, Any], *, origin: str = "verb") -> VerbManifest:
    """A validated :class:`VerbManifest` from ``given``.

    Raises:
        ManifestInvalidError: every field at fault, by name.
    """
    if not isinstance(given, Mapping):
        raise ManifestInvalidError(origin, ["the manifest must be an object"])
    fields = _Fields(given)
    raw_verb = fields.text("verb", "name", required=True, limit=128)
    verb = verb_name(raw_verb) if raw_verb else ""
    if raw_verb and not _VERB.fullmatch(verb):
        fields.problems.append(f"verb: {raw_verb!r} has no letters to name a verb with")
    decomposition = tuple(verb_name(item) for item in fields.strings("decomposition", "decomposesInto"))
    if verb and verb in decomposition:
        fields.problems.append(f"decomposition: {verb} cannot be part of its own decomposition")
    manifest = VerbManifest(
        verb=verb,
        description=fields.text("description", required=True),
        capabilities=fields.strings("capabilities"),
        category=fields.text("category", limit=100) or None,
        examples=fields.strings("examples"),
        input_definitions=fields.definitions("inputDefinitions", "input_definitions", "inputs"),
        output_definitions=fields.definitions("outputDefinitions", "output_definitions", "outputs"),
        decomposition=decomposition,
    )
    if fields.problems:
        raise ManifestInvalidError(f"{origin} {raw_verb or '(unnamed)'}", fields.problems)
    return manifest


def parse_tool(given: Mapping[str, Any], *, origin: str = "tool") -> ToolManifest:
    """A validated :class:`ToolManifest` from ``given``.

    The input schema must itself be a valid JSON Schema (checked against its metaschema), so a call
    can be validated against it later.

    Raises:
        ManifestInvalidError: every field at fault, by name.
    """
    if not isinstance(given, Mapping):
        raise ManifestInvalidError(origin, ["the manifest must be an object"])
    fields = _Fields(given)
    name = fields.text("name", required=True, limit=255)
    key = fields.text("toolId", "tool_key", "id", limit=255) or name
    if key.isdigit():
        fields.problems.append(f"toolId: {key!r} is all digits, which reads as a numeric id: add a letter")
    elif key and not _TOOL_KEY.fullmatch(key):
        fields.problems.append(
            f"toolId: {key!r} must be 1-255 printable characters without spaces, not starting with '-'"
        )
    tool_type = fields.text("type", "tool_type", required=True, limit=16).lower()
    if tool_type and tool_type not in TOOL_TYPES:
        fields.problems.append(f"type: {tool_type!r} is not one of {', '.join(TOOL_TYPES)}")
    schema = fields.mapping("inputSchema", "input_schema", "parameters")
    if schema:
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(part) for part in exc.path) or "(root)"
            fields.problems.append(f"inputSchema: not a valid JSON Schema at {where}: {exc.message}")
    manifest = ToolManifest(
        tool_key=key,
        name=name,
        tool_type=tool_type,
        description=fields.text("description"),
        action_verbs=tuple(
            verb_name(verb) for verb in fields.strings("actionVerbs", "action_verbs", "verbs")
        ),
        capabilities=fields.strings("capabilities"),
        category=fields.text("category", limit=100) or None,
        examples=fields.strings("examples"),
        input_schema=schema,
        binding=fields.mapping("binding"),
        version=fields.text("version", limit=64) or None,
    )
    if fields.problems:
        raise ManifestInvalidError(f"{origin} {name or key or '(unnamed)'}", fields.problems)
    return manifest
