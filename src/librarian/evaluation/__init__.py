"""Measuring retrieval quality on labelled datasets."""
