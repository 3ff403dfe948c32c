"""Search indexes: the vector index protocol and backends, the lexical index and hybrid fusion."""
