"""The operations of an OpenAPI 3.x document as tools, one per operation.

The document is read and checked by the ingest connector (:mod:`librarian.ingest.sources.openapi`:
size limits, YAML alias budget, OpenAPI 3 only, remote documents fetched without reaching private
addresses unless ``allowed_private_hosts`` names them) and its local ``$ref``s are followed with the
connector's resolver.

Each operation becomes a tool whose input schema is a JSON Schema object: one property per path,
query, header or cookie parameter, plus ``body`` for a JSON request body. Schemas the operation
refers to by ``$ref`` are copied under ``$defs`` (so recursive schemas stay finite and the input
schema validates on its own); OpenAPI 3.0's ``nullable`` and boolean ``exclusiveMinimum`` are
rewritten to their JSON Schema forms. The binding says how to build the request again:
``{"base_url", "method", "path", "parameters": {name: location}, "headers", "body", "operation"}``.

The server an operation is sent to (``base_url`` of the spec, else the operation's, path item's or
document's first server) is checked when importing: a loopback, private or link-local address that
``allowed_private_hosts`` does not name is refused with the document and address named, so an API
that could only be called against internal services is never imported. Calls check it again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urljoin, urlsplit

from librarian.discovery.sync import Listing
from librarian.errors import BackendUnavailableError, InvalidInputError
from librarian.ingest.sources.openapi import (
    HTTP_METHODS,
    MAX_SPEC_BYTES,
    _merge_parameters,
    _Resolver,
    load_openapi,
)
from librarian.ingest.sources.remote import fetch_document, refuse_private_host
from librarian.knowledge.access import Principal

if TYPE_CHECKING:
    from librarian.app import Librarian

__all__ = ["list_openapi_operations", "operation_manifest"]

PARAMETER_LOCATIONS = ("path", "query", "header", "cookie")
MAX_DESCRIPTION_CHARS = 4000
_JSON_MEDIA = re.compile(r"^application/(?:[\w.+-]+\+)?json\b|^\*/\*$")
_SERVER_VARIABLE = re.compile(r"\{([^{}]+)\}")
_UNSAFE_KEY = re.compile(r"[^A-Za-z0-9_.:/@-]+")
_VALUE_KEYWORDS = frozenset({"default", "enum", "const", "example", "examples"})


def list_openapi_operations(spec: Mapping[str, Any], lib: Librarian, principal: Principal) -> Listing:
    """The tools of the OpenAPI document ``spec["location"]`` (a file path or an http(s) URL).

    Spec keys: ``location`` (required), ``base_url`` (overrides the document's servers),
    ``headers`` (sent with every call, e.g. an API key) and ``slug`` (the first part of every
    ``toolId``; default: the document's title).

    Raises:
        InvalidInputError: no location, a document that is not OpenAPI 3.x (naming the file and the
            problem), or servers that are all refused private addresses (naming the document and
            the address).
        NotFoundError: the file or URL does not exist.
    """
    location = spec.get("location")
    if not isinstance(location, str) or not location.strip():
        raise InvalidInputError(
            "openapi source: 'location' is required", hint="give the path or URL of the OpenAPI document"
        )
    headers = spec.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in headers.items()
    ):
        raise InvalidInputError(f"{location}: 'headers' must map header names to strings")
    base_override = spec.get("base_url")
    if base_override is not None and not isinstance(base_override, str):
        raise InvalidInputError(f"{location}: 'base_url' must be a string")
    settings = lib.settings
    data, provenance = fetch_document(
        location,
        allowed_private_hosts=settings.allowed_private_hosts,
        timeout=settings.tools_call_timeout_seconds,
        max_bytes=MAX_SPEC_BYTES,
    )
    document = load_openapi(data, location)
    info = _mapping(document.get("info"))
    slug_source = spec.get("slug") or _text(info.get("title")) or location.rsplit("/", 1)[-1]
    slug = _slug(str(slug_source))
    resolver = _Resolver(document)
    listing = Listing(version=_text(info.get("version")))
    checked: dict[str, str | None] = {}  # base URL -> why it is refused (None: allowed)
    refused: list[str] = []
    serverless: list[str] = []  # operations without an absolute server URL
    for raw_path, raw_item in _mapping(document.get("paths")).items():
        item = _mapping(resolver.deref(raw_item))
        for method in HTTP_METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            label = f"{method.upper()} {raw_path}"
            servers = operation.get("servers") or item.get("servers") or document.get("servers")
            base_url = base_override or _server_url(servers, provenance)
            if base_url is None:
                serverless.append(label)
                continue
            if base_url not in checked:
                checked[base_url] = _refusal(base_url, location, settings.allowed_private_hosts)
            if checked[base_url] is not None:
                refused.append(str(checked[base_url]))
                continue
            try:
                listing.manifests.append(
                    operation_manifest(
                        slug,
                        method,
                        str(raw_path),
                        operation,
                        item,
                        resolver,
                        base_url=base_url,
                        headers=dict(headers),
                        version=listing.version,
                    )
                )
            except InvalidInputError as exc:
                listing.errors.append(f"{location}: {label}: {exc.message}")
    if serverless:
        shown = ", ".join(serverless[:3]) + (
            f" and {len(serverless) - 3} more" if len(serverless) > 3 else ""
        )
        message = f"{location}: no absolute server URL to call {shown} at; skipped"
        if not listing.manifests and not refused:
            raise InvalidInputError(message, hint="give the API's URL as 'base_url' in the source spec")
        listing.errors.append(message)
    if refused and not listing.manifests:
        raise InvalidInputError(
            refused[0],
            hint="add the host or its network to the allowed_private_hosts setting if its API may be "
            "called, or give a public 'base_url'",
        )
    listing.errors.extend(dict.fromkeys(refused))
    return listing


def operation_manifest(
    slug: str,
    method: str,
    path: str,
    operation: dict[str, Any],
    path_item: dict[str, Any],
    resolver: _Resolver,
    *,
    base_url: str,
    headers: dict[str, str],
    version: str | None,
) -> dict[str, Any]:
    """The tool manifest of one operation, in the raw format that ``parse_tool`` reads.

    Raises:
        InvalidInputError: the operation cannot be called as a tool (a required non-JSON body, two
            parameters of the same name); the message says which.
    """
    operation_id = _text(operation.get("operationId"))
    label = operation_id or f"{method.upper()} {path}"
    converter = _SchemaConverter(resolver)
    properties: dict[str, Any] = {}
    required: list[str] = []
    locations: dict[str, str] = {}
    for parameter in _merge_parameters(resolver, path_item.get("parameters"), operation.get("parameters")):
        name, where = parameter.get("name"), parameter.get("in")
        if not isinstance(name, str) or where not in PARAMETER_LOCATIONS:
            continue
        if name in properties:
            raise InvalidInputError(f"parameter {name!r} is declared both in {locations[name]} and {where}")
        schema = parameter.get("schema")
        if schema is None:  # a parameter described by ``content`` instead
            schema = next(
                (_mapping(m).get("schema") for m in _mapping(parameter.get("content")).values()), None
            )
        prop = converter.convert(schema) if schema is not None else {}
        description = _text(parameter.get("description"))
        if description:
            prop = {**prop, "description": description}
        properties[name] = prop
        locations[name] = str(where)
        if where == "path" or parameter.get("required") is True:
            required.append(name)
    body_name: str | None = None
    request_body = _mapping(resolver.deref(operation.get("requestBody")))
    if request_body:
        content = _mapping(request_body.get("content"))
        media = next((key for key in content if _JSON_MEDIA.match(str(key))), None)
        if media is None and request_body.get("required") is True:
            kinds = ", ".join(str(key) for key in content) or "no media type"
            raise InvalidInputError(f"its request body is {kinds}; only JSON bodies can be sent; skipped")
        if media is not None:
            body_name = "body" if "body" not in properties else "request_body"
            schema = _mapping(content[media]).get("schema")
            prop = converter.convert(schema) if schema is not None else {}
            description = _text(request_body.get("description"))
            properties[body_name] = {**prop, "description": description} if description else prop
            if request_body.get("required") is True:
                required.append(body_name)
    input_schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        input_schema["required"] = required
    if converter.definitions:
        input_schema["$defs"] = converter.definitions
    texts = [_text(operation.get("summary")), _text(operation.get("description"))]
    description = "\n\n".join(dict.fromkeys(text.strip() for text in texts if text and text.strip()))
    tags = [tag for tag in operation.get("tags") or [] if isinstance(tag, str)]
    return {
        "toolId": f"{slug}.{_UNSAFE_KEY.sub('_', operation_id or f'{method}_{path}').strip('_')}",
        "name": label,
        "type": "openapi",
        "description": description[:MAX_DESCRIPTION_CHARS] or f"{method.upper()} {path}",
        "inputSchema": input_schema,
        "binding": {
            "base_url": base_url,
            "method": method.upper(),
            "path": path,
            "parameters": locations,
            "headers": headers,
            "body": body_name,
            "operation": label,
        },
        "version": version,
        "capabilities": tags[:20],
    }


class _SchemaConverter:
    """Copies OpenAPI schemas into JSON Schema, local ``$ref``s kept as refs into ``$defs``."""

    def __init__(self, resolver: _Resolver) -> None:
        self.resolver = resolver
        self.definitions: dict[str, Any] = {}
        self._names: dict[str, str] = {}

    def convert(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("discriminator", "xml", "externalDocs") or str(key).startswith("x-"):
                continue
            if key in _VALUE_KEYWORDS:  # values, not schemas: copied as they are
                out[key] = value
            elif key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(
                value, dict
            ):
                out[key] = {name: self.convert(item) for name, item in value.items()}
            else:
                out[key] = self.convert(value)
        if out.pop("nullable", None) is True:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
            elif "type" not in out and ("oneOf" in out or "anyOf" in out):
                key = "oneOf" if "oneOf" in out else "anyOf"
                out[key] = [*out[key], {"type": "null"}]
        for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            # OpenAPI 3.0 (draft 4) form: a flag on minimum/maximum rather than a number of its own.
            if isinstance(out.get(bound), bool) and out.pop(bound) and limit in out:
                out[bound] = out.pop(limit)
        return out

    def _ref(self, ref: str) -> dict[str, Any]:
        if ref in self._names:
            return {"$ref": f"#/$defs/{self._names[ref]}"}
        target = self.resolver.lookup(ref)
        if target is None:  # external or dangling: anything is accepted rather than a ref no one resolves
            return {"description": f"schema {ref} (not resolved)"}
        base = unquote(ref.rsplit("/", 1)[-1]).replace("~1", "_").replace("~0", "_") or "schema"
        base = re.sub(r"[^A-Za-z0-9_.-]+", "_", base)
        name, counter = base, 2
        while name in self.definitions or name in self._names.values():
            name, counter = f"{base}_{counter}", counter + 1
        self._names[ref] = name
        self.definitions[name] = {}  # reserved before converting: a schema may contain itself
        self.definitions[name] = self.convert(target)
        return {"$ref": f"#/$defs/{name}"}


def _server_url(servers: Any, provenance: str) -> str | None:
    """The first server's URL, variables at their defaults, made absolute against the document's URL."""
    first = _mapping(next(iter(servers), None)) if isinstance(servers, list) else {}
    url = first.get("url") if first else "/"
    if not isinstance(url, str):
        return None
    variables = _mapping(first.get("variables"))

    def default(match: re.Match[str]) -> str:
        value = _text(_mapping(variables.get(match[1])).get("default"))
        return value if value is not None else match[0]

    url = _SERVER_VARIABLE.sub(default, url)
    if urlsplit(url).scheme in ("http", "https"):
        return url
    if urlsplit(provenance).scheme in ("http", "https"):
        return urljoin(provenance, url)
    return None


def _refusal(base_url: str, location: str, allowed: list[str]) -> str | None:
    """Why ``base_url`` may not be called (a private address not allowed), or ``None``."""
    try:
        refuse_private_host(base_url, allowed_private_hosts=allowed)
    except InvalidInputError as exc:
        return f"{location}: its server {base_url} cannot be called: {exc.message}"
    except BackendUnavailableError:
        return None  # not resolvable from here: checked again when called
    return None


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:60] or "api"


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None or isinstance(value, dict | list):
        return None
    return str(value)
