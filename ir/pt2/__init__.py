"""torch.export frontend: read a .pt2 archive without torch and import its decode step as a
pimsat program (:func:`import_pt2`), its weights and past KV caches as the program's state."""

from ir.pt2.archive import ArchiveError, read_archive
from ir.pt2.errors import ImportRefused
from ir.pt2.importer import Imported, import_pt2

__all__ = ["ArchiveError", "ImportRefused", "Imported", "import_pt2", "read_archive"]
