"""Read just enough of a Megatron-Core indexed dataset (`PREFIX.idx` + `PREFIX.bin`) to prove it
is one, without reading the data: the .idx header, two integers near its end, and two stat calls.

.idx layout (megatron/core/datasets/indexed_dataset.py, `_IndexWriter`):
  9 bytes magic b"MMIDIDX\\x00\\x00" | uint64 version (1) | uint8 dtype code |
  uint64 sequence count S | uint64 document count D |
  int32 sequence_lengths[S] | int64 sequence_pointers[S] | int64 document_indices[D] |
  optional int8 sequence_modes[S] (multimodal)
The .bin holds the tokens: its size is the last pointer + last length x dtype size.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass

MAGIC = b"MMIDIDX\x00\x00"
HEADER = struct.Struct("<9sQBQQ")  # 34 bytes
# dtype code -> item size in bytes (DType enum of Megatron-Core)
DTYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 8, 7: 4, 8: 2}
SUPPORTED_VERSIONS = (1,)


@dataclass(frozen=True)
class PrefixResult:
    """The verdict for one prefix: `problem` is a check code suffix (None = fine)."""

    prefix: str
    problem: str | None = None
    detail: str = ""
    bin_bytes: int = 0
    sequences: int = 0
    documents: int = 0


def _d(key: str, **params: object) -> str:
    """A detail phrase in the user's language (only built for a prefix with a problem)."""
    from mbridge_launch.base.i18n import t

    return t(f"preflight.detail.{key}", **params)


def check_prefix(prefix: str) -> PrefixResult:
    idx_path, bin_path = prefix + ".idx", prefix + ".bin"
    try:
        bin_size = os.stat(bin_path).st_size
    except FileNotFoundError:
        return PrefixResult(prefix, "bin_missing")
    except OSError as exc:
        return PrefixResult(prefix, "bin_unreadable", exc.strerror or str(exc))
    if not os.path.isfile(bin_path):
        return PrefixResult(prefix, "bin_unreadable", _d("not_regular_file"))
    if bin_size == 0:
        return PrefixResult(prefix, "bin_empty")
    if not os.access(bin_path, os.R_OK):
        return PrefixResult(prefix, "bin_unreadable", _d("permission_denied"))
    try:
        fd = os.open(idx_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO .idx cannot hang
    except FileNotFoundError:
        return PrefixResult(prefix, "idx_missing")
    except IsADirectoryError:
        return PrefixResult(prefix, "idx_unreadable", _d("is_directory"))
    except OSError as exc:
        return PrefixResult(prefix, "idx_unreadable", exc.strerror or str(exc))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device: never read
            return PrefixResult(prefix, "idx_unreadable", _d("not_regular_file"))
        return _check_index(prefix, fd, bin_size)
    except OSError as exc:
        return PrefixResult(prefix, "idx_unreadable", exc.strerror or str(exc))
    finally:
        os.close(fd)


def _check_index(prefix: str, fd: int, bin_size: int) -> PrefixResult:
    idx_size = os.fstat(fd).st_size
    if idx_size == 0:
        return PrefixResult(prefix, "idx_empty")
    head = os.pread(fd, HEADER.size, 0)
    if len(head) < len(MAGIC) or head[: len(MAGIC)] != MAGIC:
        return PrefixResult(prefix, "idx_not_megatron", head[:9].hex())
    if len(head) < HEADER.size:
        return PrefixResult(prefix, "idx_truncated", _d("header_needs", size=idx_size, expected=HEADER.size))
    _, version, dtype_code, seqs, docs = HEADER.unpack(head)
    if version not in SUPPORTED_VERSIONS:
        return PrefixResult(prefix, "idx_bad_version", str(version))
    itemsize = DTYPE_SIZES.get(dtype_code)
    if itemsize is None:
        return PrefixResult(prefix, "idx_bad_dtype", str(dtype_code))
    expected = HEADER.size + seqs * 4 + seqs * 8 + docs * 8
    if idx_size < expected:
        return PrefixResult(prefix, "idx_truncated", _d("header_promises", size=idx_size, expected=expected))
    if idx_size not in (expected, expected + seqs):  # + sequence_modes for multimodal data
        return PrefixResult(prefix, "idx_size_mismatch", _d("header_promises", size=idx_size, expected=expected))
    if seqs == 0:
        return PrefixResult(prefix, "idx_no_sequences", "", bin_size, 0, docs)
    # last length and last pointer tell how large the .bin must be
    (last_len,) = struct.unpack("<i", os.pread(fd, 4, HEADER.size + (seqs - 1) * 4))
    (last_ptr,) = struct.unpack("<q", os.pread(fd, 8, HEADER.size + seqs * 4 + (seqs - 1) * 8))
    needed = last_ptr + last_len * itemsize
    if bin_size < needed:
        return PrefixResult(prefix, "bin_truncated", _d("index_needs", size=bin_size, expected=needed), bin_size, seqs, docs)
    if bin_size > needed:
        return PrefixResult(prefix, "bin_size_mismatch", _d("index_covers", size=bin_size, expected=needed), bin_size, seqs, docs)
    return PrefixResult(prefix, None, "", bin_size, seqs, docs)


def write_index(prefix: str, sequence_lengths: list[int], dtype_code: int = 4, document_count: int | None = None) -> None:
    """Write a small valid .idx/.bin pair (for tests and benchmarks), as Megatron's writer does."""
    itemsize = DTYPE_SIZES[dtype_code]
    pointers, pos = [], 0
    for length in sequence_lengths:
        pointers.append(pos)
        pos += length * itemsize
    docs = list(range(len(sequence_lengths) + 1)) if document_count is None else list(range(document_count))
    with open(prefix + ".bin", "wb") as handle:
        handle.write(b"\x01" * pos)
    with open(prefix + ".idx", "wb") as handle:
        handle.write(HEADER.pack(MAGIC, 1, dtype_code, len(sequence_lengths), len(docs)))
        handle.write(struct.pack(f"<{len(sequence_lengths)}i", *sequence_lengths))
        handle.write(struct.pack(f"<{len(pointers)}q", *pointers))
        handle.write(struct.pack(f"<{len(docs)}q", *docs))
