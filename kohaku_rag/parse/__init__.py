"""Parsing: PDF, KohakuRAG JSON payloads, Markdown and text into a section tree."""
