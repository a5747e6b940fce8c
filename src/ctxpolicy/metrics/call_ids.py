"""The message-id arrays of a ``calls.jsonl``, handled as bytes (the aggregate's fast path).

The id arrays are most of a version-1 ``calls.jsonl`` (every call lists its whole prompt), so the
reader cuts them out before JSON parsing (``split_id_arrays``) and turns the contract's
fixed-width ids (16 hex characters) into 64-bit keys in bulk (``fixed_width_keys``), never
making a Python string of an id. Each function returns None where the bytes are not of the shape
it reads; the reader then takes its general path, which also names what is wrong. Pure.
"""

from __future__ import annotations

import re

import numpy as np

KEY = b'"message_ids":['  # as json.dumps and orjson write it (no blanks)
IDS_ARRAY = re.compile(rb'"message_ids"\s*:\s*\[([^\]]*)\]')  # any JSON spacing
ID_CHARS = 16  # the contract's ids: the first 16 hex digits of a sha256
_STRIDE = ID_CHARS + 3  # '"' id '"' ','
_QUOTE, _COMMA = ord('"'), ord(",")
_SEPARATORS = b'", \t\r\n'
_MIX = np.uint64(0x9E3779B97F4A7C15)
# one compact id as a record: its two 8-byte halves read in place (unaligned), no copy of the ids
_COMPACT_ID = np.dtype(
    {
        "names": ["open", "first", "second", "close", "comma"],
        "formats": ["u1", "=u8", "=u8", "u1", "u1"],
        "offsets": [0, 1, 1 + ID_CHARS // 2, 1 + ID_CHARS, 2 + ID_CHARS],
        "itemsize": _STRIDE,
    }
)


def split_id_arrays(data: bytes, lines: int) -> tuple[list[bytes], list[bytes]] | None:
    """``data`` cut around each ``"message_ids": [...]`` array: the text between the arrays and
    each array's inside, when there is exactly one array per line (``lines`` lines), else None.
    Written without blanks (every writer of ours), the arrays are found with ``bytes.find``;
    any other spacing goes through ``IDS_ARRAY`` (the same arrays, found more slowly)."""
    rest, arrays = _found_arrays(data)
    if len(arrays) != lines or data.count(KEY[:-2]) != lines:  # another spacing, or a key inside a value
        parts = IDS_ARRAY.split(data)
        rest, arrays = parts[0::2], parts[1::2]
    return (rest, arrays) if len(arrays) == lines else None


def split_lines(data: bytes) -> tuple[list[bytes], list[bytes]] | None:
    """``split_id_arrays(data, data.count(b"\\n"))``, and None where ``data`` has an empty line,
    without scanning the arrays' bytes three times: ids of hex digits hold no newline and no
    ``_`` (every ``"message_ids"`` has one), so where the arrays hold neither, the newlines, the
    empty lines and the keys of ``data`` are those of the text between the arrays (joined with a
    NUL byte, which none of them holds, so that no join makes one)."""
    rest, arrays = _found_arrays(data)
    inside = b"".join(arrays)
    if b"_" in inside or b"\n" in inside:
        return split_id_arrays(data, data.count(b"\n")) if b"\n\n" not in data else None
    between = b"\0".join(rest)
    if b"\n\n" in between:
        return None
    lines = between.count(b"\n")
    if len(arrays) == lines and KEY[:-2] not in between:  # then data holds the key once a line
        return rest, arrays
    return split_id_arrays(data, lines)


def _found_arrays(data: bytes) -> tuple[list[bytes], list[bytes]]:
    """The text between the compact ``"message_ids":[`` arrays and the arrays' insides."""
    rest, arrays = [], []
    at = 0
    while (start := data.find(KEY, at)) >= 0:
        end = data.find(b"]", start)
        if end < 0:
            break
        rest.append(data[at:start])
        arrays.append(data[start + len(KEY) : end])
        at = end + 1
    rest.append(data[at:])
    return rest, arrays


def fixed_width_keys(arrays: list[bytes]) -> tuple[np.ndarray, np.ndarray] | None:
    """The ids of several id arrays' insides as 64-bit keys laid end to end, and the number of
    ids per array, for ids of exactly ``ID_CHARS`` characters; None when the arrays are not of
    that shape. A key mixes the id's two 8-byte halves, so equal ids give equal keys."""
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    if lengths.any() and not (((lengths + 1) % _STRIDE != 0) & (lengths > 0)).any():  # compact: "id","id",...
        ids = np.frombuffer(b",".join([*filter(None, arrays), b""]), dtype=_COMPACT_ID)  # a comma after each
        if (ids["open"] == _QUOTE).all() and (ids["close"] == _QUOTE).all() and (ids["comma"] == _COMMA).all():
            return ids["first"] * _MIX ^ ids["second"], (lengths + 1) // _STRIDE
    counts = np.fromiter((a.count(b'"') for a in arrays), dtype=np.int64, count=len(arrays)) // 2
    chars = b"".join(arrays).translate(None, _SEPARATORS)
    if len(chars) != ID_CHARS * int(counts.sum()):
        return None
    halves = np.frombuffer(chars, dtype=np.uint64).reshape(-1, 2)
    return halves[:, 0] * _MIX ^ halves[:, 1], counts


def id_keys(ids: list[str]) -> np.ndarray | None:
    """``fixed_width_keys``' key of each id given as a string (a version-2 prompt's), or None
    unless every id has exactly ``ID_CHARS`` ASCII characters."""
    joined = "".join(ids)
    if len(joined) != ID_CHARS * len(ids) or not joined.isascii() or not set(map(len, ids)) <= {ID_CHARS}:
        return None
    halves = np.frombuffer(joined.encode("ascii"), dtype="=u8").reshape(-1, 2)
    return halves[:, 0] * _MIX ^ halves[:, 1]


def key_positions(keys: np.ndarray, codes: np.ndarray) -> np.ndarray | None:
    """For each of ``codes``, the position in ``keys`` (distinct 64-bit keys, ``fixed_width_keys``)
    of the key equal to it; None where a code is no key.

    Looked up in a table indexed by a key's top bits (a key mixes its id's bytes, so its top bits
    are spread), 16 times larger than ``keys``: one gather a code, where a binary search took a
    dozen steps. The few keys that lost their slot to another are searched for, for the codes the
    table did not match. An unused slot points past ``keys``, at the first key with its lowest bit
    flipped: a value whose own slot is the first key's, so that no code matches an unused slot."""
    n = len(keys)
    if n == 0:
        return np.zeros(0, np.int64) if len(codes) == 0 else None
    shift = np.uint64(64 - (n.bit_length() + 4))
    table = np.full(1 << (n.bit_length() + 4), n, dtype=np.int64)
    table[(keys >> shift).view(np.int64)] = np.arange(n)  # slots below 2**24: int64 views index fastest
    at = table[(codes >> shift).view(np.int64)]
    missed = np.append(keys, keys[0] ^ np.uint64(1))[at] != codes
    if missed.any():
        signed = keys.view(np.int64)  # numpy searches int64 faster than uint64; only equality matters
        order = np.argsort(signed)
        rest = codes[missed].view(np.int64)
        where = np.minimum(np.searchsorted(signed[order], rest), n - 1)
        if not (signed[order][where] == rest).all():
            return None
        at[missed] = order[where]
    return at
