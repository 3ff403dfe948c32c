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

import ipaddress
import json
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
import yaml

from librarian.errors import BackendUnavailableError, InvalidInputError, NotFoundError
from librarian.ingest.parsed import ParsedDocument, Section
from librarian.ingest.sources.base import SourceDocument

__all__ = ["MAX_REDIRECTS", "MAX_SPEC_BYTES", "fetch_openapi", "load_openapi", "openapi_documents"]

MAX_SPEC_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5
# Nodes after alias expansion; the largest real specs (cloud providers') stay well below this.
MAX_YAML_NODES = 2_000_000
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_BODY_DEPTH = 5  # nesting levels of a request body shown: what a caller must build
_RESPONSE_DEPTH = 3  # responses are summarised more briefly
_SCHEMA_LINES = 80
_DESCRIPTION_CHARS = 400
_REF_HOPS = 20
_SERVER_VARIABLE = re.compile(r"\{([^{}]+)\}")
_OPENAPI_3 = re.compile(r"3\.\d+(\.\d+)?(-[\w.]+)?")


class _BudgetExceeded(yaml.YAMLError):
    pass


class _BudgetLoader(yaml.SafeLoader):
    """A safe loader that sizes every node as if its aliases were expanded and refuses past a budget."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        is_alias = self.check_event(yaml.AliasEvent)
        node = super().compose_node(parent, index)
        if node is None:
            return None
        if is_alias:
            if id(node) not in self._sizes:  # the anchor is still open: the alias contains itself
                raise _BudgetExceeded("an alias refers to a node that contains it (recursive YAML)")
            return node
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        size = 1 + sum(self._sizes.get(id(child), 1) for child in children)
        if size > MAX_YAML_NODES:
            raise _BudgetExceeded(f"YAML aliases expand to more than {MAX_YAML_NODES:,} nodes")
        self._sizes[id(node)] = size
        return node


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
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{name} is not UTF-8 text (bad byte at offset {exc.start})") from exc
    try:
        spec = json.loads(text) if text.lstrip().startswith("{") else yaml.load(text, Loader=_BudgetLoader)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{name}: JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except _BudgetExceeded as exc:
        raise InvalidInputError(f"{name} is refused: {exc}", hint="write it without YAML aliases") from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InvalidInputError(f"{name}: YAML syntax error{where}: {exc.problem or exc.context}") from exc
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        # ValueError: integers past Python's digit limit; RecursionError: absurd nesting.
        raise InvalidInputError(f"{name} cannot be read as JSON or YAML: {exc}") from exc
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
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
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


# --- fetching -----------------------------------------------------------------------------------------


def fetch_openapi(
    location: str, *, allow_private: bool = False, timeout: float = 30.0, max_bytes: int = MAX_SPEC_BYTES
) -> tuple[bytes, str]:
    """Read an OpenAPI document from a local path or an http(s) URL.

    Hosts that resolve to loopback, private, link-local, reserved or other non-public addresses are
    refused unless ``allow_private`` is true, so a shared server cannot be made to read internal
    services. Redirects are followed (at most :data:`MAX_REDIRECTS`), each target checked again.

    Args:
        location: a file path or an ``http://``/``https://`` URL.
        allow_private: permit non-public addresses (a spec served on the local network).
        timeout: seconds allowed for each network operation.
        max_bytes: larger documents are refused while streaming.

    Returns:
        The bytes and the provenance: the final URL (after redirects), or the file's ``file://`` URI.

    Raises:
        InvalidInputError: malformed or refused URL, unsupported scheme, too many redirects, too large,
            an HTTP error other than not-found or server-side.
        NotFoundError: the file does not exist, or the server answered 404/410.
        BackendUnavailableError: DNS, connection or timeout failure, or a 5xx/429 answer.
    """
    if "://" not in location:
        return _read_file(Path(location), max_bytes)
    url = _parse_url(location, location)
    # An explicit transport disables environment proxies: the address check must see the real peer.
    with httpx.Client(transport=httpx.HTTPTransport(), timeout=timeout) as client:
        for _ in range(MAX_REDIRECTS + 1):
            if not allow_private:
                _check_host(url, location)
            try:
                with client.stream(
                    "GET", url, headers={"Accept": "application/json, application/yaml, */*"}
                ) as response:
                    if not allow_private:
                        _check_peer(response, url, location)
                    if response.is_redirect:
                        url = _parse_url(str(response.url.join(response.headers["location"])), location)
                        continue
                    _check_status(response, location)
                    return _read_body(response, max_bytes, location), str(response.url)
            except httpx.TimeoutException as exc:
                raise BackendUnavailableError(f"timed out after {timeout}s: {_where(url, location)}") from exc
            except httpx.RequestError as exc:
                raise BackendUnavailableError(f"cannot fetch {_where(url, location)}: {exc}") from exc
    raise InvalidInputError(
        f"{location} redirects more than {MAX_REDIRECTS} times", hint="pass the final URL"
    )


def _read_file(path: Path, max_bytes: int) -> tuple[bytes, str]:
    try:
        resolved = path.expanduser().resolve(strict=True)
        if not resolved.is_file():
            raise InvalidInputError(f"{path} is not a regular file", hint="pass an OpenAPI JSON or YAML file")
        with resolved.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # +1 tells "exactly at the limit" from "over it"
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path} does not exist", hint="pass an existing file or an http(s) URL") from exc
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symbolic link loop
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    if len(data) > max_bytes:
        raise InvalidInputError(f"{path} is over the {max_bytes:,}-byte limit for an OpenAPI document")
    return data, resolved.as_uri()


def _parse_url(raw: str, location: str) -> httpx.URL:
    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as exc:
        raise InvalidInputError(f"{_where(raw, location)} is not a valid URL: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInputError(
            f"{_where(raw, location)}: only http(s) URLs with a host can be fetched",
            hint="pass an http:// or https:// URL, or a local file path",
        )
    if url.userinfo:
        raise InvalidInputError(
            f"{_where(url, location)}: URLs with credentials are refused, they would become provenance",
            hint="serve the document without credentials or download it and pass the file",
        )
    return url.copy_with(fragment=None)


def _check_host(url: httpx.URL, location: str) -> None:
    host = url.raw_host.decode("ascii")  # IDNA-encoded, so getaddrinfo sees what httpx will dial
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError) as exc:
        raise BackendUnavailableError(f"cannot resolve {host} (fetching {location}): {exc}") from exc
    for address in sorted(addresses):
        _check_address(address, url, location)


def _check_peer(response: httpx.Response, url: httpx.URL, location: str) -> None:
    stream = response.extensions.get("network_stream")
    peer = stream.get_extra_info("server_addr") if stream is not None else None
    if isinstance(peer, tuple) and peer:
        _check_address(str(peer[0]), url, location)


def _check_address(address: str, url: httpx.URL, location: str) -> None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 reaches the IPv4 loopback
    problems = (
        (ip.is_unspecified, "unspecified"), (ip.is_loopback, "loopback"), (ip.is_link_local, "link-local"),
        (ip.is_multicast, "multicast"), (ip.is_private, "private"), (ip.is_reserved, "reserved"),
        (not ip.is_global, "non-public"),
    )  # fmt: skip
    problem = next((word for flagged, word in problems if flagged), None)
    if problem is not None:
        resolved = address if url.host == address else f"{url.host} resolves to {address}, which"
        raise InvalidInputError(
            f"refused to fetch {_where(url, location)}: {resolved} is a {problem} address",
            hint="non-public addresses are refused to protect internal services; "
            "allow private addresses explicitly only for a host you trust",
        )


def _check_status(response: httpx.Response, location: str) -> None:
    status, where = response.status_code, _where(response.url, location)
    if status in (404, 410):
        raise NotFoundError(f"{where} answered HTTP {status}: no document there", hint="check the URL")
    if status >= 500 or status == 429:
        raise BackendUnavailableError(f"{where} answered HTTP {status}", hint="try again later")
    if status >= 300:
        raise InvalidInputError(f"{where} answered HTTP {status} {response.reason_phrase}")


def _read_body(response: httpx.Response, max_bytes: int, location: str) -> bytes:
    too_large = f"{_where(response.url, location)} is over the {max_bytes:,}-byte limit"
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise InvalidInputError(too_large)
    chunks: list[bytes] = []
    size = 0
    # Decoded bytes are counted, so a compressed body cannot expand past the limit either.
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise InvalidInputError(too_large)
        chunks.append(chunk)
    return b"".join(chunks)


def _where(url: httpx.URL | str, location: str) -> str:
    """The URL at fault, and the one the user gave when a redirect led elsewhere."""
    return location if str(url) == location.split("#", 1)[0] else f"{url} (reached from {location})"
