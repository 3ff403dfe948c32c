"""Embeddings: the Embedder protocol, the offline MiniLM model, an OpenAI-compatible client, a cache."""
