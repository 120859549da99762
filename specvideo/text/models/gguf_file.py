"""A GGUF file's tensor table and scalar metadata, read in a fraction of a second, its tensors as
views of one read-only memory map.

``gguf.GGUFReader`` builds a numpy view for every part of every metadata value: for the 1.5B code
model's 151,936-token vocabulary and 151,387 merges that is 455,000 views, 6-12 s and about 660 MB
of Python objects, before a tensor is read. Loading the weights needs none of that: this index walks
the string arrays by their lengths (keeping only their counts), keeps the scalar values, and lists
every tensor's name, type, shape and byte range (the layout in the GGUF specification: magic,
version, counts, key-value pairs, tensor infos, data aligned to ``general.alignment``).

``release(tensor)`` drops a tensor's pages from this process's memory once it has been decoded into
the kernel's layout (``madvise(MADV_DONTNEED)`` on a read-only file mapping: the page cache keeps
them, the process's resident set does not).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_FLOAT_VIEWS = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


@dataclass(frozen=True)
class TensorEntry:
    """One tensor: ``shape`` as the file gives it (ne0, the row width, first), its bytes in the map."""

    name: str
    tensor_type: GGMLQuantizationType
    shape: tuple[int, ...]
    start: int
    nbytes: int
    file: GGUFFile

    @property
    def data(self) -> np.ndarray:
        """(rows, bytes per row) uint8 for a block type; (rows, K) float32 for a float type."""
        raw = np.frombuffer(self.file.map, np.uint8, self.nbytes, self.start)
        rows = int(np.prod(self.shape[1:])) if len(self.shape) > 1 else 1
        kind = self.tensor_type.name
        if kind not in _FLOAT_VIEWS:
            return raw.reshape(rows, -1)
        values = raw.view(_FLOAT_VIEWS[kind])
        if kind == "BF16":  # the top half of a float32
            values = (values.astype(np.uint32) << 16).view(np.float32)
        return values.astype(np.float32).reshape(rows, -1)


class GGUFFile:
    """``metadata`` (scalars and strings; a string array's entry is its length) and ``tensors``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path, "rb") as handle:
            self.map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        if self.map[:4] != b"GGUF":
            raise ValueError(f"{self.path} is not a GGUF file (no GGUF magic bytes)")
        version, tensor_count, kv_count = struct.unpack_from("<IQQ", self.map, 4)
        if version not in (2, 3):
            raise ValueError(f"{self.path} is GGUF version {version}; versions 2 and 3 are read")
        pos, self.metadata = 24, {}
        for _ in range(kv_count):
            key, pos = self._string(pos)
            (kind,) = struct.unpack_from("<I", self.map, pos)
            self.metadata[key], pos = self._value(pos + 4, kind)
        infos = []
        for _ in range(tensor_count):
            name, pos = self._string(pos)
            (dims,) = struct.unpack_from("<I", self.map, pos)
            shape = struct.unpack_from(f"<{dims}Q", self.map, pos + 4)
            kind, offset = struct.unpack_from("<IQ", self.map, pos + 4 + 8 * dims)
            pos += 4 + 8 * dims + 12
            infos.append((name, GGMLQuantizationType(kind), tuple(int(s) for s in shape), offset))
        align = int(self.metadata.get("general.alignment", 32))
        data_start = (pos + align - 1) // align * align
        self.tensors = [
            TensorEntry(name, kind, shape, data_start + offset, _nbytes(kind, shape), self)
            for name, kind, shape, offset in infos
        ]
        if any(t.start + t.nbytes > len(self.map) for t in self.tensors):
            raise ValueError(f"{self.path} is cut short: its tensors run past the end of the file")

    def release(self, tensor: TensorEntry) -> None:
        """Drop ``tensor``'s pages from this process (they stay in the page cache)."""
        page = mmap.PAGESIZE
        start = tensor.start // page * page
        self.map.madvise(mmap.MADV_DONTNEED, start, tensor.start + tensor.nbytes - start)

    def _string(self, pos: int) -> tuple[str, int]:
        (length,) = struct.unpack_from("<Q", self.map, pos)
        return self.map[pos + 8 : pos + 8 + length].decode("utf-8", errors="replace"), pos + 8 + length

    def _value(self, pos: int, kind: int):
        if kind in _SCALARS:
            return struct.unpack_from(_SCALARS[kind], self.map, pos)[0], pos + struct.calcsize(_SCALARS[kind])
        if kind == _STRING:
            return self._string(pos)
        if kind != _ARRAY:
            raise ValueError(f"{self.path} holds a metadata value of unknown type {kind}")
        element, count = struct.unpack_from("<IQ", self.map, pos)
        pos += 12
        if element in _SCALARS:  # kept only by their count: a token table's scores and types
            return count, pos + count * struct.calcsize(_SCALARS[element])
        for _ in range(count):  # strings (a vocabulary, merges) or nested arrays: walked, not kept
            if element == _STRING:
                (length,) = struct.unpack_from("<Q", self.map, pos)
                pos += 8 + length
            else:
                _, pos = self._value(pos, element)
        return count, pos


def _nbytes(kind: GGMLQuantizationType, shape: tuple[int, ...]) -> int:
    block, size = GGML_QUANT_SIZES[kind]
    return int(np.prod(shape)) // block * size
