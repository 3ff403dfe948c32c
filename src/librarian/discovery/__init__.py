"""Verb and tool discovery: one registry of verbs and tools (MCP, OpenAPI, Python, CLI), searched by
meaning, imported from real servers, called through a proxy, learned from use."""
