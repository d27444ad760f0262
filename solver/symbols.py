"""The symbol table of host tensors a compiled program names (ids used in instruction fields)."""

from __future__ import annotations


class Symbols:
    def __init__(self) -> None:
        self.names: list[str] = []
        self._ids: dict[str, int] = {}

    def id(self, name: str) -> int:
        i = self._ids.get(name)
        if i is None:
            i = self._ids[name] = len(self.names)
            self.names.append(name)
        return i

    def get(self, name: str) -> int | None:
        """The id of `name` if it has one (does not add it)."""
        return self._ids.get(name)


def staging(tensor: str) -> str:
    """Name of the fp32 staging buffer into which RDACC adds the partial sums of `tensor`."""
    return f"{tensor}#acc"


def host_copy(tensor: str) -> str:
    """Name of the host buffer into which RD commands read a resident matrix (host dispatch)."""
    return f"{tensor}#host"
