"""Importers: each turns one outside source (an MCP server, an OpenAPI document, a Python module, an
indexed CLI) into tool manifests; :mod:`librarian.discovery.sync` stores them."""
