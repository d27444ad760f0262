"""Reading the files users hand to pimsat (instances, hardware YAML, stream manifests), with one
kind of message for every way they can be broken: `PATH: WHERE: REASON`, one line.

- not UTF-8: `PATH: line 3, column 14: not UTF-8 text (byte 0xe9)`;
- YAML / JSON syntax: `PATH: line 3, column 1: not valid YAML: <problem>`;
- nested too deeply for the parser (a RecursionError), or deeper than MAX_DEPTH levels;
- bigger than MAX_NODES values or MAX_TEXT characters of scalar text *after YAML alias
  expansion*: a 600-byte file of nested aliases ("billion laughs") can stand for gigabytes.

The limits are far beyond any real instance or hardware file (tens to hundreds of values) and
stop the expansion early, so checking costs at most MAX_NODES steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

MAX_NODES = 100_000  # values (mappings, lists, scalars) after alias expansion
MAX_TEXT = 1 << 20  # characters of keys and scalars after alias expansion (1 MiB)
MAX_DEPTH = 64  # levels of nesting


def read_text(path: Path, error: type[Exception]) -> str:
    """The file as UTF-8 text; `error(message)` if it cannot be read or is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{path}: line {line}, column {column}: not UTF-8 text (byte 0x{data[e.start]:02x})") from None


def _yaml_where(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(e, yaml.reader.ReaderError):
        return f"character {e.position}"
    return "(document)"


def _yaml_problem(e: yaml.YAMLError) -> str:
    if isinstance(e, yaml.reader.ReaderError):
        return f"unacceptable character #x{e.character:04x}" if isinstance(e.character, int) else str(e.reason)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    context = getattr(e, "context", None)
    return f"{problem} ({context})" if context else problem


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key, mark):
        super().__init__()
        self.problem, self.problem_mark, self.context = f"duplicate key {key!r}", mark, None


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader that refuses a mapping with the same key twice (PyYAML keeps the last one
    silently: `seed: 1` ... `seed: 2` would be read as 2 without a word). libyaml's parser where
    PyYAML has it (the same documents and error marks; a hardware preset reads in 3 ms, not 15)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                dup = key in seen
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if dup:
                raise _DuplicateKey(key, key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping)


def parse_yaml(text: str, source: str, error: type[Exception]) -> Any:
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise error(f"{source}: {_yaml_where(e)}: not valid YAML: {_yaml_problem(e)}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to read") from None
    check_size(data, source, error)
    return data


def parse_json(text: str, source: str, error: type[Exception]) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{source}: line {e.lineno}, column {e.colno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise error(f"{source}: nested too deeply to read") from None


def load_file(path: Path, error: type[Exception], kind: str | None = None) -> Any:
    """Read and parse `path` as JSON (a .json file, or kind="json") or YAML."""
    text = read_text(path, error)
    if (kind or ("json" if path.suffix == ".json" else "yaml")) == "json":
        data = parse_json(text, str(path), error)
        check_size(data, str(path), error)
        return data
    return parse_yaml(text, str(path), error)


def check_size(data: Any, source: str, error: type[Exception]) -> None:
    """Refuse a document of more than MAX_NODES values, MAX_TEXT characters or MAX_DEPTH levels,
    counting every alias as the copy it stands for (a recursive alias is infinitely deep)."""
    nodes, text = 0, 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH:
            raise error(f"{source}: nested deeper than {MAX_DEPTH} levels (a recursive YAML alias?)")
        if isinstance(node, dict):
            for k, v in node.items():
                text += len(str(k))
                stack.append((v, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
        elif isinstance(node, (str, bytes)):
            text += len(node)
        if nodes > MAX_NODES or text > MAX_TEXT:
            raise error(
                f"{source}: too large: more than {MAX_NODES:,} values or {MAX_TEXT:,} characters "
                "after YAML alias expansion"
            )
