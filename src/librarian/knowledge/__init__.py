"""Organisational knowledge: identities and access control, knowledge documents with versions and
feedback (see ``docs/knowledge.md``)."""
