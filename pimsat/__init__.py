"""pimsat: compiler backend for processing-in-memory LLM hardware (CLI and pipeline)."""

__version__ = "0.1.0"
