"""Past incidents found by similarity, solutions ranked by what worked, and investigations saved as
knowledge (see ``docs/knowledge.md``)."""
