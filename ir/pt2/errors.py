"""The importer's refusal (the reader's is ir.pt2.archive.ArchiveError)."""

from __future__ import annotations

from ir.errors import IRError


class ImportRefused(IRError):
    """An exported program pimsat cannot compile exactly; one line naming node, target and module."""
