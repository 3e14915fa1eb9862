"""The blob layout, in one place so that every encoder and decoder agrees on it.

A blob is a header followed by one msgpack document (the *body*). A plain blob, the only kind
``Serializer()`` and the module-level ``dumps`` write, has a 2-byte header::

    byte 0   format version (``FORMAT_VERSION``); a reader refuses versions it does not know
    byte 1   flags: 0 for a plain blob, else ``FLAG_ZSTD`` | ``FLAG_AES_GCM``; a reader refuses
             a blob with a flag it does not know rather than misreading it
    byte 2.. msgpack (ormsgpack) body

Compression and encryption are recorded per blob (a ``Serializer`` with them reads plain blobs
and a ``Serializer`` without them reads compressed ones). A flagged blob (flags != 0) carries
extra header fields, each present only if its flag is set, in this order::

    byte 0   format version
    byte 1   flags
    byte 2   EXTENDED_MARKER (0xc1, the one byte msgpack never uses): if byte 1 is zeroed, the
             blob fails to parse as plain msgpack instead of loading garbage
    byte 3   the flags again; a damaged flags byte is caught before anything else is read
    -- FLAG_ZSTD:
    4 bytes  size of the uncompressed msgpack body, uint32 big-endian. A reader refuses sizes
             above its limit (``DEFAULT_MAX_DECOMPRESSED_SIZE`` unless configured) and requires
             the zstd frame to declare exactly this size and to decompress to exactly it, so
             a small blob can never make it allocate more than the limit
    -- FLAG_AES_GCM:
    1 byte   key id length n (1..MAX_KEY_ID_BYTES)
    n bytes  key id, UTF-8: names the key in the reader's key ring (key rotation)
    12 bytes nonce, random per blob (``NONCE_SIZE``)
    -- then the body:
    msgpack, zstd-compressed (one frame with content size and checksum) if FLAG_ZSTD, then
    AES-256-GCM encrypted if FLAG_AES_GCM: ciphertext followed by the 16-byte tag. The
    associated data is the whole header (byte 0 through the nonce), so no header byte can be
    changed without failing authentication. Compression happens before encryption.

Types msgpack would flatten travel as msgpack *ext* values whose payload is itself msgpack (or
raw bytes for the leaf types). The codes below are part of the on-disk format: never renumber.
"""

from __future__ import annotations

from typing import Final

FORMAT_VERSION: Final = 1
HEADER_SIZE: Final = 2
#: The header of a blob neither compressed nor sealed: the format version, no flags.
PLAIN_HEADER: Final = bytes((FORMAT_VERSION, 0))

FLAG_ZSTD: Final = 0x01
FLAG_AES_GCM: Final = 0x02
KNOWN_FLAGS: Final = FLAG_ZSTD | FLAG_AES_GCM  # flags this version can read

# -- extended header (flagged blobs only) ------------------------------------------------------
EXTENDED_MARKER: Final = 0xC1  # msgpack's "never used" byte
EXTENDED_HEADER_SIZE: Final = 4  # version, flags, marker, flags again
SIZE_FIELD: Final = 4  # uint32 big-endian uncompressed body size (FLAG_ZSTD)
MAX_SIZE_FIELD: Final = 2**32 - 1
DEFAULT_MAX_DECOMPRESSED_SIZE: Final = 256 * 2**20  # 256 MiB
KEY_SIZE: Final = 32  # AES-256
MAX_KEY_ID_BYTES: Final = 255
NONCE_SIZE: Final = 12
TAG_SIZE: Final = 16

# -- ext codes (0..127 are the application's; msgpack reserves the negative ones) --------------
EXT_TUPLE: Final = 1  # msgpack array of the items
EXT_SET: Final = 2  # msgpack array of the items
EXT_FROZENSET: Final = 3  # msgpack array of the items
EXT_BYTEARRAY: Final = 4  # raw bytes
EXT_BIGINT: Final = 5  # two's-complement big-endian bytes of an int outside [-2**63, 2**64)
EXT_DATETIME: Final = 6  # [year, month, day, hour, minute, second, microsecond, fold, tz]
EXT_DATE: Final = 7  # [year, month, day]
EXT_TIME: Final = 8  # [hour, minute, second, microsecond, fold, tz]
EXT_TIMEDELTA: Final = 9  # [days, seconds, microseconds]
EXT_UUID: Final = 10  # the 16 raw bytes
EXT_DECIMAL: Final = 11  # str(value) as ASCII
EXT_DICT: Final = 12  # dict with a non-str key: flat array [k0, v0, k1, v1, ...]
EXT_ENUM: Final = 13  # [registered name, member value]
EXT_RECORD: Final = 14  # [registered name, {field: value}] (+ [fields set] for pydantic)
EXT_PICKLE: Final = 100  # pickle bytes; only with Serializer(allow_pickle=True)

# tz (in EXT_DATETIME / EXT_TIME): nil = naive; int = fixed UTC offset in microseconds;
# [int, str] = fixed offset with a name; str = an IANA zone key (zoneinfo.ZoneInfo).
