"""Callers: each runs one kind of tool (MCP, OpenAPI, Python, CLI) from its stored binding."""
