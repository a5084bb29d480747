"""Reading a large JSON array one element at a time, so a benchmark-scale checklist never sits in memory whole.

A 100k-task CoVEBench ``checklist.json`` is about 320 MB of text; ``json.loads`` of it builds every task's
dicts at once (about 13 KB of Python objects per task, 1.3 GB) before the first case row exists. Here the
file is read in chunks and each element is decoded with ``json.JSONDecoder.raw_decode`` as soon as it is
whole, so what stays in memory is one chunk and one element, whatever the file's size.

Errors are the ones ``json.loads`` of the whole file gives (same message, line and column): on anything
that is not a well-formed array the file is parsed whole once, on that error path only, to say what is
wrong exactly as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

CHUNK_CHARS = 1 << 18  # characters read at a time: the window is one to two of these plus an element
_WHITESPACE = " \t\n\r"


class NotAnArray(ValueError):
    """The file holds valid JSON that is not an array; ``type_name`` is what it holds (``dict``, ...)."""

    def __init__(self, type_name: str):
        super().__init__(f"expected a JSON array, got {type_name}")
        self.type_name = type_name


def iter_json_array(path: str | Path, chunk_chars: int = CHUNK_CHARS) -> Iterator[Any]:
    """The elements of the JSON array in ``path``, in order, one at a time.

    Raises ``json.JSONDecodeError`` (the whole-file parser's) for invalid JSON and :class:`NotAnArray` for a
    valid document that is not an array; either may come after some elements were yielded."""
    decoder = json.JSONDecoder()
    with open(path, encoding="utf-8") as fh:
        reader = _Chunks(fh, chunk_chars)
        if reader.next_char() != "[":
            _fail(path)
        reader.pos += 1
        if reader.next_char() == "]":
            reader.pos += 1
            return _end(path, reader)
        while True:
            yield reader.decode(decoder, path)
            sep = reader.next_char()
            reader.pos += 1
            if sep == "]":
                return _end(path, reader)
            if sep != ",":
                _fail(path)


class _Chunks:
    """A window on the file: ``buf[pos:]`` is what is not consumed yet."""

    def __init__(self, fh, chunk_chars: int):
        self.fh, self.chunk_chars = fh, chunk_chars
        self.buf, self.pos, self.eof = "", 0, False

    def more(self) -> bool:
        """Append the next chunk (dropping what is consumed); False at the end of the file."""
        if self.eof:
            return False
        data = self.fh.read(self.chunk_chars)
        self.eof = not data
        self.buf, self.pos = self.buf[self.pos :] + data, 0
        return bool(data)

    def next_char(self) -> str:
        """The next non-whitespace character (not consumed), or "" at the end of the file."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos : self.pos + 1]

    def decode(self, decoder: json.JSONDecoder, path) -> Any:
        """The element at ``pos``. A value cut by the buffer's end can still parse (``2.5e1`` cut to ``2.5``,
        ``12`` of ``123``), so it is only taken when a separator (``,`` or ``]``) follows it in the buffer,
        or once the file has ended."""
        self.next_char()  # raw_decode takes no leading whitespace
        while True:
            try:
                value, end = decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError:
                if self.more():
                    continue
                _fail(path)
            after = end
            while after < len(self.buf) and self.buf[after] in _WHITESPACE:
                after += 1
            if (after < len(self.buf) and self.buf[after] in ",]") or not self.more():
                self.pos = end
                return value


def _end(path, reader: _Chunks) -> None:
    if reader.next_char():  # text after the closing bracket
        _fail(path)


def _fail(path) -> None:
    """Raise what ``json.loads`` of the whole file raises (the error path only reads the file whole)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(doc, list):
        raise NotAnArray(type(doc).__name__)
    raise json.JSONDecodeError("the array could not be read element by element", "", 0)
