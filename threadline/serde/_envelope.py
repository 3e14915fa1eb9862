"""Per-blob zstd compression and AES-256-GCM encryption around the msgpack body.

The header layout is documented in ``wire``. ``zstandard`` and ``cryptography`` are optional:
they are imported only when a ``Serializer`` is configured to use them, or when a compressed
blob is read.

Thread safety: zstd contexts are not thread-safe, so each thread gets its own (cached, since
making one costs more than compressing a small body). ``AESGCM`` objects are immutable and
shared.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from threadline.errors import SerializationError
from threadline.serde import wire as fmt

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from zstandard import ZstdCompressor, ZstdDecompressor

COMPRESSION_EXTRA = "pip install 'threadline[compression]'"
ENCRYPTION_EXTRA = "pip install 'threadline[encryption]'"

_MIN_ZSTD_LEVEL = -(2**17)  # zstd's fastest "negative" level
_FLAGGED_OVERHEAD = fmt.EXTENDED_HEADER_SIZE - fmt.HEADER_SIZE  # marker + flags copy

# One decompression context per thread, shared by every Serializer (it holds no settings).
_local = threading.local()


def import_zstd() -> ModuleType:
    try:
        import zstandard
    except ImportError as exc:
        raise ImportError(
            f"zstd compression needs the zstandard package: {COMPRESSION_EXTRA}"
        ) from exc
    return zstandard


def import_aesgcm() -> type[AESGCM]:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise ImportError(
            f"AES-GCM encryption needs the cryptography package: {ENCRYPTION_EXTRA}"
        ) from exc
    return AESGCM


class Envelope:
    """Wraps a msgpack body into a flagged blob (``seal``) and unwraps any blob (``open``).

    Built by ``Serializer`` from its keyword arguments, which it validates here.
    """

    __slots__ = (
        "_aesgcm",
        "_ciphers",
        "_compress_local",
        "_key_header",
        "_zstd",
        "compress_threshold",
        "compression_level",
        "key_id",
        "max_decompressed_size",
        "require_encryption",
    )

    def __init__(
        self,
        *,
        compress_threshold: int | None,
        compression_level: int,
        encryption_key: bytes | None,
        key_id: str | None,
        decryption_keys: Mapping[str, bytes] | None,
        require_encryption: bool,
        max_decompressed_size: int,
    ) -> None:
        self.compress_threshold = _threshold(compress_threshold)
        self.compression_level = _level(compression_level)
        self.max_decompressed_size = _max_size(max_decompressed_size)
        self.require_encryption = bool(require_encryption)
        self._zstd: ModuleType | None = None
        self._compress_local = threading.local()
        if self.compress_threshold is not None:
            self._zstd = import_zstd()
            if self.compression_level > self._zstd.MAX_COMPRESSION_LEVEL:
                raise ValueError(
                    f"compression_level must be at most {self._zstd.MAX_COMPRESSION_LEVEL}, "
                    f"got {self.compression_level}"
                )

        keys = _keys(encryption_key, key_id, decryption_keys)
        if self.require_encryption and not keys:
            raise ValueError(
                "require_encryption=True needs a key: pass encryption_key and key_id (and "
                "decryption_keys for older keys)"
            )
        self.key_id = key_id if encryption_key is not None else None
        self._ciphers: dict[str, AESGCM] = {}
        self._aesgcm: AESGCM | None = None
        self._key_header = b""
        if keys:
            aesgcm = import_aesgcm()
            self._ciphers = {kid: aesgcm(key) for kid, key in keys.items()}
        if self.key_id is not None:
            kid = self.key_id.encode()
            self._aesgcm = self._ciphers[self.key_id]
            self._key_header = bytes([len(kid)]) + kid

    @property
    def seals(self) -> bool:
        """Whether ``seal`` may write something other than a plain blob."""
        return self._zstd is not None or self._aesgcm is not None

    @property
    def decryption_key_ids(self) -> list[str]:
        return sorted(self._ciphers)

    # -- writing -----------------------------------------------------------------------------

    def seal(self, body: bytes) -> bytes:
        """The blob for msgpack ``body``: compressed if big enough and worth it, then encrypted."""
        flags = 0
        payload = body
        size_field = b""
        threshold = self.compress_threshold
        if threshold is not None and threshold <= len(body) <= self.max_decompressed_size:
            frame = self._compressor().compress(body)
            # Compressing adds the size field, and the marker + flags copy to a plain blob.
            overhead = fmt.SIZE_FIELD + (0 if self._aesgcm is not None else _FLAGGED_OVERHEAD)
            if len(frame) + overhead < len(body):
                flags = fmt.FLAG_ZSTD
                payload = frame
                size_field = len(body).to_bytes(fmt.SIZE_FIELD, "big")
        if self._aesgcm is None:
            if not flags:
                return fmt.PLAIN_HEADER + body
            return _extended(flags) + size_field + payload
        flags |= fmt.FLAG_AES_GCM
        nonce = os.urandom(fmt.NONCE_SIZE)
        header = _extended(flags) + size_field + self._key_header + nonce
        return header + self._aesgcm.encrypt(nonce, payload, header)

    def _compressor(self) -> ZstdCompressor:
        cctx: ZstdCompressor
        try:
            cctx = self._compress_local.cctx
        except AttributeError:
            assert self._zstd is not None
            cctx = self._zstd.ZstdCompressor(
                level=self.compression_level, write_checksum=True, write_content_size=True
            )
            self._compress_local.cctx = cctx
        return cctx

    # -- reading -----------------------------------------------------------------------------

    def open(self, data: bytes | bytearray | memoryview) -> bytes | memoryview:
        """The msgpack body of ``data``, a blob whose version and flags are known to be valid."""
        view = memoryview(data)
        flags = view[1]
        if self.require_encryption and not flags & fmt.FLAG_AES_GCM:
            raise SerializationError(
                "cannot deserialize: the data is not encrypted, and this Serializer was made "
                "with require_encryption=True"
            )
        if len(view) < fmt.EXTENDED_HEADER_SIZE:
            raise _truncated()
        if view[2] != fmt.EXTENDED_MARKER or view[3] != flags:
            raise SerializationError(
                "cannot deserialize: the header is corrupted (its flags are inconsistent)"
            )
        pos = fmt.EXTENDED_HEADER_SIZE
        size = 0
        if flags & fmt.FLAG_ZSTD:
            if len(view) < pos + fmt.SIZE_FIELD:
                raise _truncated()
            size = int.from_bytes(view[pos : pos + fmt.SIZE_FIELD], "big")
            pos += fmt.SIZE_FIELD
            if size > self.max_decompressed_size:
                raise SerializationError(
                    f"cannot deserialize: the data says it decompresses to {size} bytes, more "
                    f"than this Serializer's limit of {self.max_decompressed_size} bytes "
                    "(max_decompressed_size); refusing a possible decompression bomb"
                )
        body: bytes | memoryview = view[pos:]
        if flags & fmt.FLAG_AES_GCM:
            body = self._decrypt(view, pos)
        if flags & fmt.FLAG_ZSTD:
            body = _decompress(body, size)
        return body

    def _decrypt(self, view: memoryview, pos: int) -> bytes:
        if len(view) <= pos:
            raise _truncated()
        end = pos + 1 + view[pos]
        if view[pos] == 0 or len(view) < end + fmt.NONCE_SIZE + fmt.TAG_SIZE:
            raise _truncated()
        try:
            key_id = str(view[pos + 1 : end], "utf-8")
        except UnicodeDecodeError:
            raise SerializationError(
                "cannot deserialize: the header is corrupted (its key id is not UTF-8)"
            ) from None
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            known = f" (it has keys {', '.join(map(repr, sorted(self._ciphers)))})"
            raise SerializationError(
                f"cannot deserialize: the data is encrypted with key id {key_id!r} and no key "
                f"was given for it{known if self._ciphers else ''}; pass that key in "
                f"Serializer(decryption_keys={{{key_id!r}: key}}) (or as encryption_key with "
                f"key_id={key_id!r})"
            )
        nonce_end = end + fmt.NONCE_SIZE
        try:
            return cipher.decrypt(view[end:nonce_end], view[nonce_end:], view[:nonce_end])
        except Exception as exc:  # cryptography's InvalidTag, whose module we import lazily
            raise SerializationError(
                f"cannot deserialize: authentication failed for data encrypted with key id "
                f"{key_id!r}: the key is wrong, or the data was tampered with or corrupted"
            ) from exc


def _extended(flags: int) -> bytes:
    return bytes([fmt.FORMAT_VERSION, flags, fmt.EXTENDED_MARKER, flags])


def _decompress(frame: bytes | memoryview, size: int) -> bytes:
    """Exactly ``size`` bytes from one zstd frame, never allocating more than ``size``."""
    zstd: ModuleType
    dctx: ZstdDecompressor
    try:
        zstd, dctx = _local.zstd
    except AttributeError:
        try:
            zstd = import_zstd()
        except ImportError:
            raise SerializationError(
                "cannot deserialize: the data is zstd-compressed and the zstandard package is "
                f"not installed: {COMPRESSION_EXTRA}"
            ) from None
        dctx = zstd.ZstdDecompressor()
        _local.zstd = zstd, dctx
    # zstandard allocates the size a frame declares (max_output_size only applies to frames
    # that declare none), so that size must be the one already checked against the limit.
    try:
        declared = zstd.frame_content_size(frame)
        if declared != size:
            raise ValueError(f"the frame declares {declared} bytes, the header {size}")
        out = dctx.decompress(frame, max_output_size=size, allow_extra_data=False)
        if len(out) != size:
            raise ValueError(f"it decompressed to {len(out)} bytes, not {size}")
    except Exception as exc:
        raise SerializationError(
            f"cannot deserialize: the compressed body is corrupted ({exc})"
        ) from exc
    return out


def _truncated() -> SerializationError:
    return SerializationError("cannot deserialize: the data is truncated (its header is cut)")


# -- argument checks -----------------------------------------------------------------------------


def _threshold(value: int | None) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError(f"compress_threshold must be None or an int >= 0, got {value!r}")
    return value


def _level(value: int) -> int:
    if type(value) is not int or value < _MIN_ZSTD_LEVEL:
        raise ValueError(f"compression_level must be an int (zstd level, e.g. 3), got {value!r}")
    return value


def _max_size(value: int) -> int:
    if type(value) is not int or not 0 < value <= fmt.MAX_SIZE_FIELD:
        raise ValueError(
            f"max_decompressed_size must be an int in [1, {fmt.MAX_SIZE_FIELD}], got {value!r}"
        )
    return value


def _keys(
    encryption_key: bytes | None, key_id: str | None, decryption_keys: Mapping[str, bytes] | None
) -> dict[str, bytes]:
    """Every key this Serializer may decrypt with, by key id (the current one included)."""
    keys: dict[str, bytes] = {}
    if decryption_keys is not None:
        if not isinstance(decryption_keys, Mapping):
            raise TypeError(
                f"decryption_keys must map key ids to keys, got {type(decryption_keys).__name__}"
            )
        for kid, key in decryption_keys.items():
            keys[_key_id(kid, "a decryption_keys key id")] = _key(key, f"decryption key {kid!r}")
    if encryption_key is None:
        if key_id is not None:
            raise ValueError("key_id names the encryption_key, but no encryption_key was given")
        return keys
    if key_id is None:
        raise ValueError(
            "encryption_key needs a key_id: it is stored in each blob so that, after a key "
            "rotation, old blobs can be read with decryption_keys={old_id: old_key}"
        )
    key = _key(encryption_key, "encryption_key")
    key_id = _key_id(key_id, "key_id")
    if keys.get(key_id, key) != key:
        raise ValueError(f"decryption_keys maps {key_id!r} to a different key than encryption_key")
    keys[key_id] = key
    return keys


def _key(key: Any, what: str) -> bytes:
    if not isinstance(key, bytes | bytearray | memoryview):
        raise TypeError(
            f"{what} must be {fmt.KEY_SIZE} raw bytes (e.g. os.urandom({fmt.KEY_SIZE})), got "
            f"{type(key).__name__}; decode a hex or base64 key first"
        )
    raw = bytes(key)
    if len(raw) != fmt.KEY_SIZE:
        raise ValueError(
            f"{what} must be {fmt.KEY_SIZE} bytes (AES-256), got {len(raw)} bytes; generate one "
            f"with os.urandom({fmt.KEY_SIZE})"
        )
    return raw


def _key_id(key_id: Any, what: str) -> str:
    if (
        type(key_id) is not str
        or not key_id
        or not key_id.isprintable()
        or len(key_id.encode()) > fmt.MAX_KEY_ID_BYTES
    ):
        raise ValueError(
            f"{what} must be a non-empty printable str of at most {fmt.MAX_KEY_ID_BYTES} "
            f"UTF-8 bytes, got {key_id!r}"
        )
    return key_id
