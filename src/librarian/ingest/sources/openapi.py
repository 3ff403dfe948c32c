"""OpenAPI 3.x documents as source documents, one per operation.

An agent asking "create a pet" should land on ``POST /v1/pets`` with its parameters and schemas, so
every operation (path and method) becomes one :class:`SourceDocument` whose single section is a
Markdown page: summary, operation ID, tags, description, parameters, request body and responses.

Decisions:

- The entity name is the method and the path a client calls: the path of the first server URL (the
  operation's ``servers``, else the path item's, else the document's; variables at their defaults)
  goes first, so ``https://api.example.com/v1`` and ``/pets`` give ``POST /v1/pets``. The document
  ``path`` keeps the spec's own key (``operations/post /pets``): unique by construction, and stable
  when a deployment's server URL changes.
- Local ``$ref``s are resolved; a schema inside itself is named, not expanded again, and rendering
  stops at a depth and line budget. External refs are shown as written: fetching them would reach
  hosts the user never named. YAML aliases are counted as if expanded and refused past a node budget.
- Remote specs may not come from non-public addresses unless allowed: each hop is checked after DNS
  resolution and again on the connected socket (against DNS rebinding). Environment proxies are not
  used, because the check must see the host actually reached.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from librarian.errors import InvalidInputError
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument
from librarian.ingest.sources.remote import fetch_document
from librarian.safe_yaml import load_json, load_yaml

__all__ = ["MAX_REDIRECTS", "MAX_SPEC_BYTES", "fetch_openapi", "load_openapi", "openapi_documents"]

MAX_SPEC_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_BODY_DEPTH = 5  # nesting levels of a request body shown: what a caller must build
_RESPONSE_DEPTH = 3  # responses are summarised more briefly
_SCHEMA_LINES = 80
_DESCRIPTION_CHARS = 400
_REF_HOPS = 20
_SERVER_VARIABLE = re.compile(r"\{([^{}]+)\}")
_OPENAPI_3 = re.compile(r"3\.\d+(\.\d+)?(-[\w.]+)?")


def load_openapi(data: bytes, name: str, *, max_bytes: int = MAX_SPEC_BYTES) -> dict[str, Any]:
    """Parse an OpenAPI 3.x document from JSON or YAML bytes.

    Args:
        data: the document; JSON when it starts with ``{``, YAML otherwise.
        name: where it came from (path or URL), used in error messages.
        max_bytes: larger documents are refused.

    Raises:
        InvalidInputError: too large, not UTF-8, a syntax error (with its line), YAML aliases that
            expand past the node budget, or not OpenAPI 3.x (Swagger 2.0 included).
    """
    if len(data) > max_bytes:
        raise InvalidInputError(
            f"{name} is {len(data):,} bytes, over the {max_bytes:,}-byte limit for an OpenAPI document"
        )
    if data.lstrip().startswith(b"{"):
        spec = load_json(data, name, max_bytes=max_bytes)
    else:
        spec = load_yaml(data, name, max_bytes=max_bytes)
    if not isinstance(spec, dict):
        raise InvalidInputError(f"{name} is not an OpenAPI document: its top level is {_kind(spec)}")
    if "swagger" in spec:
        raise InvalidInputError(
            f"{name} is Swagger {_scalar(spec['swagger'])}, which is not supported; only OpenAPI 3.x is",
            hint="convert it to OpenAPI 3 first, for example with swagger2openapi",
        )
    version = spec.get("openapi")
    if version is None:
        raise InvalidInputError(f"{name} has no 'openapi' field, so it is not an OpenAPI 3.x document")
    if not isinstance(version, str | float) or not _OPENAPI_3.fullmatch(str(version)):
        raise InvalidInputError(f"{name} declares openapi {_scalar(version)}; only OpenAPI 3.x is supported")
    if spec.get("paths") is not None and not isinstance(spec["paths"], dict):
        raise InvalidInputError(f"{name}: 'paths' must be a mapping, found {_kind(spec['paths'])}")
    return spec


def openapi_documents(spec: dict[str, Any], *, base_url: str) -> tuple[str | None, list[SourceDocument]]:
    """One source document per operation of a loaded OpenAPI 3.x document.

    Args:
        spec: the document, as :func:`load_openapi` returns it.
        base_url: where the document came from; each operation's ``url`` is this plus a JSON pointer.

    Returns:
        ``info.version`` (``None`` when absent) and the documents, in the spec's order.

    Example:
        >>> spec = {"openapi": "3.0.3", "info": {"title": "Pets", "version": "1.0"},
        ...         "paths": {"/pets": {"post": {"summary": "Create a pet"}}}}
        >>> version, docs = openapi_documents(spec, base_url="https://x.test/api.yaml")
        >>> version, docs[0].path, docs[0].url
        ('1.0', 'operations/post /pets', 'https://x.test/api.yaml#/paths/~1pets/post')
    """
    info = _mapping(spec.get("info"))
    title = _text(info.get("title")) or "API"
    resolver = _Resolver(spec)
    base = base_url.split("#", 1)[0]
    documents: list[SourceDocument] = []
    for raw_path, raw_item in _mapping(spec.get("paths")).items():
        item = _mapping(resolver.deref(raw_item))
        path = str(raw_path)
        for method in HTTP_METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            servers = operation.get("servers") or item.get("servers") or spec.get("servers")
            entity = f"{method.upper()} {_server_prefix(servers)}{path}"
            parameters = _merge_parameters(resolver, item.get("parameters"), operation.get("parameters"))
            tags = [tag for tag in _list(operation.get("tags")) if isinstance(tag, str)]
            markdown = _render_operation(entity, operation, parameters, tags, resolver)
            section_path = (tags[0] if tags else title, entity)
            pointer = "/".join(
                quote(token.replace("~", "~0").replace("/", "~1"), safe="")
                for token in ("paths", path, method)
            )
            documents.append(
                SourceDocument(
                    path=f"operations/{method} {path}",
                    url=f"{base}#/{pointer}",
                    # The heading path is part of the canonical text so a re-tagged operation re-ingests.
                    text=f"# {' / '.join(section_path)}\n\n{markdown}",
                    parsed=ParsedDocument(
                        title=entity, sections=[Section(section_path, markdown, entity_type="operation")]
                    ),
                    metadata={
                        "operation_id": _text(operation.get("operationId")),
                        "method": method.upper(),
                        "path": entity.split(" ", 1)[1],
                        "parameters": [str(p.get("name")) for p in parameters if "name" in p],
                        "deprecated": operation.get("deprecated") is True,
                        "tags": tags,
                    },
                )
            )
    return _text(info.get("version")), documents


class _Resolver:
    """Resolves local ``$ref``s (``#/components/...``) in one spec."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._spec = spec

    def lookup(self, ref: str) -> Any:
        """The node a local ref points to; ``None`` when it is external or dangling."""
        if not ref.startswith("#"):
            return None
        node: Any = self._spec
        for token in ref[1:].split("/")[1:]:
            key = unquote(token).replace("~1", "/").replace("~0", "~")  # RFC 6901 order
            if isinstance(node, dict):
                node = node.get(key)
            elif isinstance(node, list) and key.isdecimal() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        return node

    def deref(self, node: Any) -> Any:
        """Follow a ``$ref`` chain; a cycle or a dead end returns the last ``$ref`` node itself."""
        seen: set[str] = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            target = self.lookup(ref)
            if target is None or ref in seen or len(seen) >= _REF_HOPS:
                return node
            seen.add(ref)
            node = target
        return node


class _SchemaWriter:
    """Renders schemas as nested Markdown bullets, bounded in depth and lines."""

    def __init__(self, resolver: _Resolver, max_depth: int) -> None:
        self.resolver = resolver
        self.max_depth = max_depth
        self.lines: list[str] = []
        self._full = False

    def label(self, schema: Any, stack: tuple[str, ...] = (), depth: int = 0) -> str:
        """A short type: ``string``, ``Pet``, ``array of Pet``, ``Cat | Dog``, ``map of integer``."""
        if not isinstance(schema, dict):
            return "any"
        ref = schema.get("$ref")
        if isinstance(ref, str):
            if self.resolver.lookup(ref) is None:
                return ref
            name = unquote(ref.rsplit("/", 1)[-1]).replace("~1", "/").replace("~0", "~")
            return f"{name} (recursive)" if ref in stack else name
        if depth > 3:
            return "…"
        for key, joiner in (("oneOf", " | "), ("anyOf", " | "), ("allOf", " & ")):
            variants = _list(schema.get(key))
            if variants:
                names = [self.label(v, stack, depth + 1) for v in variants[:6]]
                return joiner.join(names + (["…"] if len(variants) > 6 else []))
        kind = schema.get("type")
        if isinstance(kind, list):
            return " | ".join(str(k) for k in kind[:6])
        if kind == "array" or "items" in schema:
            return f"array of {self.label(schema.get('items'), stack, depth + 1)}"
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and not schema.get("properties"):
            return f"map of {self.label(extra, stack, depth + 1)}"
        return str(kind) if isinstance(kind, str) else ("object" if "properties" in schema else "any")

    def field_line(
        self,
        name: str,
        node: Any,
        flags: list[str],
        *,
        where: str = "",
        description: str | None = None,
        stack: tuple[str, ...] = (),
    ) -> str:
        """One bullet: name, then location, type, format and flags, then description and constraints."""
        schema, own = _mapping(self.resolver.deref(node)), _mapping(node)
        attributes = [where] if where else []
        attributes.append(self.label(node, stack))
        attributes += [schema["format"]] if isinstance(schema.get("format"), str) else []
        attributes += flags
        attributes += [word for key, word in _SCHEMA_FLAGS if schema.get(key) is True or own.get(key) is True]
        notes = [_clip(description or _text(own.get("description")) or _text(schema.get("description")))]
        enum = _list(schema.get("enum"))
        if enum:
            more = "…" if len(enum) > 20 else ""
            notes.append("One of: " + ", ".join(f"`{_scalar(v)}`" for v in enum[:20]) + f"{more}.")
        notes += [f"{word}: `{_scalar(schema[key])}`." for key, word in _CONSTRAINTS if key in schema]
        tail = " ".join(note for note in notes if note)
        return f"- `{name}` ({', '.join(attributes)})" + (f": {tail}" if tail else "")

    def fields(self, node: Any, indent: str = "", depth: int = 0, stack: tuple[str, ...] = ()) -> None:
        """Append one bullet per property (``allOf`` parts merged) and per ``oneOf``/``anyOf`` variant."""
        ref = _mapping(node).get("$ref")
        if isinstance(ref, str):
            if ref in stack:
                return  # the label already says "(recursive)"
            stack = (*stack, ref)
        schema = self.resolver.deref(node)
        if not isinstance(schema, dict) or depth >= self.max_depth:
            return
        if schema.get("type") == "array" or "items" in schema:
            self.fields(schema.get("items"), indent, depth + 1, stack)
            return
        properties, required = self._properties(schema, stack, 0)
        for name, prop in properties.items():
            if not self._room(indent):
                return
            self.lines.append(
                indent
                + self.field_line(str(name), prop, ["required"] if name in required else [], stack=stack)
            )
            self.fields(prop, indent + "  ", depth + 1, stack)
        for key, word in (("oneOf", "one of"), ("anyOf", "any of")):
            for variant in _list(schema.get(key))[:8]:
                if not self._room(indent):
                    return
                self.lines.append(f"{indent}- {word}: {self.label(variant, stack)}")
                self.fields(variant, indent + "  ", depth + 1, stack)

    def _properties(
        self, schema: dict[str, Any], stack: tuple[str, ...], level: int
    ) -> tuple[dict[Any, Any], set[Any]]:
        properties: dict[Any, Any] = {}
        required = set(r for r in _list(schema.get("required")) if isinstance(r, str))
        for part in _list(schema.get("allOf"))[:16] if level < 4 else []:
            ref = _mapping(part).get("$ref")
            if isinstance(ref, str) and ref in stack:
                continue
            resolved = self.resolver.deref(part)
            if isinstance(resolved, dict):
                inner = (*stack, ref) if isinstance(ref, str) else stack
                more, more_required = self._properties(resolved, inner, level + 1)
                properties.update(more)
                required |= more_required
        properties.update(_mapping(schema.get("properties")))
        return properties, required

    def _room(self, indent: str) -> bool:
        if len(self.lines) < _SCHEMA_LINES:
            return True
        if not self._full:
            self.lines.append(f"{indent}- … (more fields not shown)")
            self._full = True
        return False


_SCHEMA_FLAGS = (("nullable", "nullable"), ("readOnly", "read-only"), ("writeOnly", "write-only"))
_CONSTRAINTS = (
    ("default", "Default"), ("minimum", "Minimum"), ("maximum", "Maximum"), ("minLength", "Min length"),
    ("maxLength", "Max length"), ("pattern", "Pattern"), ("minItems", "Min items"), ("maxItems", "Max items"),
)  # fmt: skip


def _render_operation(
    entity: str,
    operation: dict[str, Any],
    parameters: list[dict[str, Any]],
    tags: list[str],
    resolver: _Resolver,
) -> str:
    summary = _text(operation.get("summary"))
    blocks = [f"`{entity}`" + (f" — {summary}" if summary else "")]
    operation_id = _text(operation.get("operationId"))
    facts = [
        f"Operation ID: `{operation_id}`." if operation_id else "",
        f"Tags: {', '.join(tags)}." if tags else "",
    ]
    facts.append("**Deprecated**: avoid in new code." if operation.get("deprecated") is True else "")
    if any(facts):
        blocks.append(" ".join(fact for fact in facts if fact))
    description = _text(operation.get("description"))
    if description and description.strip() != summary:
        blocks.append(description.strip())
    writer = _SchemaWriter(resolver, 0)
    lines = []
    for param in parameters:
        if isinstance(param.get("$ref"), str):
            lines.append(f"- see `{param['$ref']}` (not resolved)")
            continue
        where = _text(param.get("in")) or "?"
        required = param.get("required") is True or where == "path"  # path parameters always are
        flags = [
            "required" if required else "optional",
            *(["deprecated"] if param.get("deprecated") is True else []),
        ]
        schema = param.get("schema", _first_schema(param.get("content")))
        line = writer.field_line(
            str(param.get("name")), schema, flags, where=where, description=_text(param.get("description"))
        )
        lines.append(line)
    if lines:
        blocks.append("**Parameters:**\n" + "\n".join(lines))
    body = resolver.deref(operation.get("requestBody"))
    if isinstance(body, dict):
        required = body.get("required") is True
        blocks.append(_media_block("**Request body**", body, resolver, _BODY_DEPTH, required=required))
    responses = [
        _media_block(f"- `{status}`", resolver.deref(response), resolver, _RESPONSE_DEPTH, indent="  ")
        for status, response in _mapping(operation.get("responses")).items()
    ]
    if responses:
        blocks.append("**Responses:**\n" + "\n".join(responses))
    return "\n\n".join(blocks)


def _media_block(
    head: str, node: Any, resolver: _Resolver, depth: int, *, required: bool | None = None, indent: str = ""
) -> str:
    """A request body or response: content types, schema type, description, then the schema's fields."""
    ref = _mapping(node).get("$ref")
    if not isinstance(node, dict) or isinstance(ref, str):
        return f"{head}: see `{ref}` (not resolved)" if isinstance(ref, str) else head
    content = _mapping(node.get("content"))
    chosen = next((t for t in content if "json" in str(t)), next(iter(content), None))
    schema = _mapping(content.get(chosen)).get("schema") if chosen is not None else None
    writer = _SchemaWriter(resolver, depth)
    attributes = ["required" if required else "optional"] if required is not None else []
    attributes += [f"`{media_type}`" for media_type in list(content)[:6]]
    attributes += [writer.label(schema)] if schema is not None else []
    line = head + (f" ({', '.join(attributes)})" if attributes else "")
    description = _clip(_text(node.get("description")))
    headers = ", ".join(f"`{header}`" for header in _mapping(node.get("headers")))
    if description and headers and description[-1] not in ".!?":
        description += "."
    notes = " ".join(filter(None, [description, f"Headers: {headers}." if headers else ""]))
    line += f": {notes}" if notes else ""
    if schema is not None:
        writer.fields(schema, indent)
    return "\n".join([line, *writer.lines])


def _merge_parameters(resolver: _Resolver, shared: Any, own: Any) -> list[dict[str, Any]]:
    """Path-item parameters then the operation's; the operation's win on the same name and location."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for position, raw in enumerate([*_list(shared), *_list(own)]):
        param = resolver.deref(raw)
        if isinstance(param, dict):
            key = (str(param.get("name")), str(param.get("in"))) if "name" in param else (f"#{position}", "")
            merged[key] = param
    return list(merged.values())


def _server_prefix(servers: Any) -> str:
    """The path part of the first server URL, variables replaced by their defaults; ``""`` for none."""
    first = _mapping(next(iter(_list(servers)), None))
    url = first.get("url")
    if not isinstance(url, str):
        return ""
    variables = _mapping(first.get("variables"))

    def default(match: re.Match[str]) -> str:
        value = _text(_mapping(variables.get(match[1])).get("default"))
        return value if value is not None else match[0]

    url = _SERVER_VARIABLE.sub(default, url)
    path = urlsplit(url).path if "://" in url else url.split("?", 1)[0]
    return "/" + path.strip("/") if path.strip("/") else ""


def _first_schema(content: Any) -> Any:
    return next((_mapping(media).get("schema") for media in _mapping(content).values()), None)


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    """Scalars as text (YAML reads ``version: 1.0`` as a float); anything else as ``None``."""
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return None
    return str(value)


def _scalar(value: Any) -> str:
    """A value for a message or note; collections are never expanded (they may be alias bombs)."""
    if isinstance(value, dict | list):
        return _kind(value)
    return json.dumps(value, default=str)[:80] if not isinstance(value, str) else value[:80]


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _clip(text: str | None) -> str:
    """One line for a bullet, long descriptions shortened."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= _DESCRIPTION_CHARS else flat[: _DESCRIPTION_CHARS - 1].rstrip() + "…"


def fetch_openapi(
    location: str, *, allow_private: bool = False, timeout: float = 30.0, max_bytes: int = MAX_SPEC_BYTES
) -> tuple[bytes, str]:
    """Read an OpenAPI document from a local path or an http(s) URL (see :func:`fetch_document`)."""
    return fetch_document(location, allow_private=allow_private, timeout=timeout, max_bytes=max_bytes)
