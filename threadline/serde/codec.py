"""Safe, typed encoding of state values: ``dumps``/``loads`` and ``Serializer``.

Format (see ``wire``): a 2-byte header (version, flags) and one ormsgpack document. Types
msgpack would flatten (tuple, set, bytearray, datetime, UUID, Decimal, registered classes, ...)
travel as ext values, so they load back as the same type. A ``Serializer`` may also compress
(zstd) and encrypt (AES-256-GCM) the document; both are recorded per blob (``_envelope``).

Safety: loading never unpickles (unless a ``Serializer(allow_pickle=True)`` asks for it) and
never imports. A stored type name is only looked up in ``threadline.serde.register``'s registry.

Speed: ``dumps`` is one ormsgpack call; only a failure (to name the failing path), a dict with
non-str keys, or output that may hold a ``bytearray`` re-encodes in Python (``_walk``).

Limits: exact types only (a dict/str/datetime subclass is refused, not flattened); lists and
dicts nest at most 255 levels; a ZoneInfo keeps its key (loading checks it is a plain IANA name
and needs the zone on the loading machine), other tzinfos load as fixed offsets; pydantic private
attributes and dataclass ``InitVar``s are not stored; bytes appended after a plain blob go
unnoticed (after a compressed or encrypted one, they are refused).
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NoReturn

import ormsgpack

from threadline.errors import SerializationError
from threadline.serde import wire as fmt
from threadline.serde._envelope import Envelope
from threadline.serde._records import EnumKind, Record, describe
from threadline.serde._scalars import DECODERS as _SCALAR_DECODERS
from threadline.serde._scalars import ENCODERS as _SCALAR_ENCODERS
from threadline.serde._walk import Walker, holds_buffer, pickle_ext
from threadline.serde.registry import lookup, name_of

__all__ = ["Serializer", "dumps", "loads"]

Ext = ormsgpack.Ext
_packb = ormsgpack.packb
_unpackb = ormsgpack.unpackb

# Hand every type msgpack would flatten (or reject) to ``default``: they become typed exts.
_OPTIONS = (
    ormsgpack.OPT_PASSTHROUGH_BIG_INT
    | ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
# msgpack bin markers: their absence proves no bytes/bytearray/memoryview was encoded.
_BIN8, _BIN16, _BIN32 = 0xC4, 0xC5, 0xC6  # ints: `in` is then a memchr, ~8x cheaper
_COPY_LIMIT = 1 << 16  # slicing off the header copies; above this, a memoryview is cheaper

# The innermost decoding error, kept because ormsgpack replaces ext_hook errors with its own.
_failure = threading.local()


class Serializer:
    """Encodes state values to bytes and back, keeping their types.

    ``allow_pickle=True`` is an explicit opt-in for trusted storage only: values of unsupported
    types are then pickled, and pickled values are unpickled on load. Without it, a blob holding
    a pickled value is refused.

    Compression (needs ``pip install 'threadline[compression]'``): with ``compress_threshold``
    set, a body of at least that many bytes is zstd-compressed at ``compression_level`` when
    that makes the blob smaller. Any Serializer reads compressed blobs, but refuses one that
    would decompress to more than ``max_decompressed_size`` bytes (a decompression bomb); bodies
    bigger than that are stored uncompressed.

    Encryption (needs ``pip install 'threadline[encryption]'``): with ``encryption_key`` (32
    random bytes, e.g. ``os.urandom(32)``) every blob is encrypted with AES-256-GCM, after
    compression, under ``key_id``, which each blob records. To rotate keys, make the new key the
    ``encryption_key`` and pass the old ones as ``decryption_keys={old_id: old_key}``. A wrong
    key or a tampered blob raises ``SerializationError``, never loads garbage.

    Plain (unencrypted) blobs stay readable, so encryption can be turned on for an existing
    store; once every blob is encrypted, ``require_encryption=True`` refuses plain ones (without
    it, whoever can write to the store can plant unencrypted values). ``Serializer()`` writes
    exactly what it always did: plain blobs.
    """

    __slots__ = (
        "_allow_pickle",
        "_decoders",
        "_default",
        "_envelope",
        "_ext_hook",
        "_reads_plain",
        "_seal",
    )

    def __init__(
        self,
        allow_pickle: bool = False,
        *,
        compress_threshold: int | None = None,
        compression_level: int = 3,
        encryption_key: bytes | None = None,
        key_id: str | None = None,
        decryption_keys: Mapping[str, bytes] | None = None,
        require_encryption: bool = False,
        max_decompressed_size: int = fmt.DEFAULT_MAX_DECOMPRESSED_SIZE,
    ) -> None:
        self._allow_pickle = bool(allow_pickle)
        self._envelope = Envelope(
            compress_threshold=compress_threshold,
            compression_level=compression_level,
            encryption_key=encryption_key,
            key_id=key_id,
            decryption_keys=decryption_keys,
            require_encryption=require_encryption,
            max_decompressed_size=max_decompressed_size,
        )
        # None when every blob is plain: dumps then skips the envelope entirely.
        self._seal: Callable[[bytes], bytes] | None = (
            self._envelope.seal if self._envelope.seals else None
        )
        self._reads_plain = not self._envelope.require_encryption
        self._default: Callable[[Any], Any] = self._encode_ext  # bound once, not per call
        self._ext_hook: Callable[[int, bytes], Any] = self._decode_ext
        self._decoders: dict[int, Callable[[bytes], Any]] = dict(_SCALAR_DECODERS)
        for code, decoder in _CONTAINER_DECODERS.items():
            self._decoders[code] = partial(decoder, self)

    @property
    def allow_pickle(self) -> bool:
        return self._allow_pickle

    @property
    def compress_threshold(self) -> int | None:
        return self._envelope.compress_threshold

    @property
    def key_id(self) -> str | None:
        """The id of the key new blobs are encrypted with; None if they are not encrypted."""
        return self._envelope.key_id

    def __repr__(self) -> str:  # never shows a key
        env = self._envelope
        args = [f"allow_pickle={self._allow_pickle}"]
        if env.compress_threshold is not None:
            args.append(f"compress_threshold={env.compress_threshold}")
            args.append(f"compression_level={env.compression_level}")
        if env.key_id is not None:
            args.append(f"key_id={env.key_id!r}")
        if env.decryption_key_ids:
            args.append(f"decryption_key_ids={env.decryption_key_ids!r}")
        if env.require_encryption:
            args.append("require_encryption=True")
        if env.max_decompressed_size != fmt.DEFAULT_MAX_DECOMPRESSED_SIZE:
            args.append(f"max_decompressed_size={env.max_decompressed_size}")
        return f"Serializer({', '.join(args)})"

    # -- encoding ----------------------------------------------------------------------------

    def dumps(self, obj: Any, *, path_prefix: str = "") -> bytes:
        """``obj`` as a blob; ``SerializationError`` names the path of a value it cannot store.

        ``path_prefix`` is prepended to error paths, e.g. the state key being serialized.
        """
        try:
            body = _packb(obj, default=self._default, option=_OPTIONS)
        except Exception:
            body = self._dumps_slow(obj, path_prefix)
        else:
            if (_BIN8 in body or _BIN16 in body or _BIN32 in body) and holds_buffer(obj):
                body = self._dumps_slow(obj, path_prefix)  # a bytearray would have become bytes
        if self._seal is None:
            return fmt.PLAIN_HEADER + body
        return self._seal(body)

    def _pack(self, obj: Any) -> bytes:
        return _packb(obj, default=self._default, option=_OPTIONS)

    def _encode_ext(self, obj: Any) -> Any:
        """ormsgpack's ``default``: a typed ext for ``obj``, or TypeError (reported by the walk)."""
        cls = type(obj)
        scalar = _SCALAR_ENCODERS.get(cls)
        if scalar is not None:
            return scalar(obj)
        if cls is tuple:
            return Ext(fmt.EXT_TUPLE, self._pack(list(obj)))
        if cls is set:
            return Ext(fmt.EXT_SET, self._pack(list(obj)))
        if cls is frozenset:
            return Ext(fmt.EXT_FROZENSET, self._pack(list(obj)))
        name = name_of(cls)
        if name is not None:
            return self._encode_registered(obj, name)
        if self._allow_pickle:
            return pickle_ext(obj)
        raise TypeError(cls)

    def _encode_registered(self, obj: Any, name: str) -> Any:
        kind = describe(type(obj))
        if isinstance(kind, Record):
            return Ext(fmt.EXT_RECORD, self._pack(kind.payload(name, obj)))
        if kind is not None:
            return Ext(fmt.EXT_ENUM, self._pack([name, obj.value]))
        raise TypeError(type(obj))

    def _dumps_slow(self, obj: Any, prefix: str) -> bytes:
        """Re-encode in Python: succeeds where the fast path could not, or says where it fails."""
        walker = Walker(self._pack, self._allow_pickle, prefix)
        try:
            return self._pack(walker.encode(obj, None))
        except SerializationError:
            raise
        except Exception as exc:
            raise _encoding_error(exc, prefix) from exc

    # -- decoding ----------------------------------------------------------------------------

    def loads(self, data: bytes | bytearray | memoryview) -> Any:
        """The value ``dumps`` encoded; ``SerializationError`` if the blob is not one we wrote."""
        try:
            plain = data[0] == fmt.FORMAT_VERSION and data[1] == 0 and self._reads_plain
        except (IndexError, KeyError, TypeError):
            plain = False
        body: bytes | bytearray | memoryview
        if not plain:
            body = self._open(data)
        elif len(data) <= _COPY_LIMIT:
            body = data[fmt.HEADER_SIZE :]
        else:
            body = memoryview(data)[fmt.HEADER_SIZE :]
        try:
            return _unpackb(body, ext_hook=self._ext_hook)
        except Exception as exc:
            raise _decoding_error(exc) from exc

    def _open(self, data: Any) -> bytes | memoryview:
        """The body of a blob that is not a plain one this Serializer reads without a look."""
        try:
            ours = data[0] == fmt.FORMAT_VERSION and not data[1] & ~fmt.KNOWN_FLAGS
        except (IndexError, KeyError, TypeError):
            ours = False
        if not ours or not isinstance(data, bytes | bytearray | memoryview):
            _bad_header(data)
        return self._envelope.open(data)

    def _decode_ext(self, code: int, payload: bytes) -> Any:
        """ormsgpack's ``ext_hook``; remembers the first error, which ormsgpack would hide."""
        decoder = self._decoders.get(code)
        try:
            if decoder is None:
                raise _unknown_code(code)
            return decoder(payload)
        except Exception as exc:
            if getattr(_failure, "error", None) is None:
                _failure.error = _as_decoding_error(exc, code)
            raise

    def _unpack_list(self, payload: bytes) -> list[Any]:
        items = _unpackb(payload, ext_hook=self._ext_hook)
        if type(items) is not list:
            raise TypeError(f"expected an array, got {type(items).__name__}")
        return items


def _encoding_error(exc: Exception, prefix: str) -> SerializationError:
    """A failure the walk could not pin on one value: too deep, a cycle, a bad str..."""
    if isinstance(exc, RecursionError) or "Recursion limit" in str(exc):
        why = "it nests lists/dicts more than 255 levels deep or contains a reference cycle"
    else:
        why = str(exc)
    where = f" at {prefix}" if prefix else ""
    return SerializationError(f"cannot serialize value{where}: {why}", path=prefix or None)


def _bad_header(data: Any) -> NoReturn:
    """Raise the right error for a blob whose header is not ``version 1, known flags``."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SerializationError(f"expected bytes to deserialize, got {type(data).__name__}")
    if len(data) < fmt.HEADER_SIZE:
        raise SerializationError(f"cannot deserialize {len(data)} bytes: the data is truncated")
    version, flags = data[0], data[1]
    if version > fmt.FORMAT_VERSION:
        raise SerializationError(
            f"the data uses serde format version {version}, written by a newer threadline "
            f"(this one reads up to version {fmt.FORMAT_VERSION}); upgrade threadline to load it"
        )
    if version != fmt.FORMAT_VERSION:
        raise SerializationError(f"not threadline serde data (bad format version {version})")
    if flags & ~fmt.KNOWN_FLAGS:
        raise SerializationError(
            f"the data uses serde features this threadline cannot read (flags {flags:#04x}: "
            "compression or encryption added by a newer threadline?); upgrade threadline"
        )
    raise SerializationError("cannot deserialize: bad header")


def _decoding_error(exc: Exception) -> SerializationError:
    error: SerializationError | None = getattr(_failure, "error", None)
    if error is None:
        return SerializationError(f"cannot deserialize: the data is truncated or corrupted ({exc})")
    _failure.error = None
    return error


def _as_decoding_error(exc: Exception, code: int) -> SerializationError:
    if isinstance(exc, SerializationError):
        return exc
    if isinstance(exc, RecursionError):
        return SerializationError("cannot deserialize: the data is nested too deeply")
    error = SerializationError(
        f"cannot deserialize: ext value (code {code}) is corrupted ({type(exc).__name__}: {exc})"
    )
    error.__cause__ = exc
    return error


# -- ext decoders ----------------------------------------------------------------------------


def _unknown_code(code: int) -> SerializationError:
    return SerializationError(
        f"cannot deserialize: unknown ext code {code} (written by a newer threadline, "
        "or the data is corrupted)"
    )


def _decode_dict(ser: Serializer, payload: bytes) -> dict[Any, Any]:
    flat = ser._unpack_list(payload)
    if len(flat) % 2:
        raise ValueError("odd number of items in a dict")
    items = iter(flat)
    return dict(zip(items, items, strict=True))


def _decode_record(ser: Serializer, payload: bytes) -> Any:
    items = ser._unpack_list(payload)
    if len(items) < 2 or type(items[1]) is not dict:
        raise ValueError("malformed record")
    name, values, *extras = items
    kind = _registered(name, Record)
    try:
        return kind.build(values, extras)  # type: ignore[union-attr]
    except Exception as exc:
        raise SerializationError(
            f"cannot rebuild {name} from its stored fields ({type(exc).__name__}: {exc}); did "
            "the class change incompatibly since the data was written?",
            type_name=name,
        ) from exc


def _decode_enum(ser: Serializer, payload: bytes) -> Any:
    name, value = ser._unpack_list(payload)
    kind = _registered(name, EnumKind)
    try:
        return kind.cls(value)
    except ValueError as exc:
        raise SerializationError(
            f"cannot rebuild {name}: {exc}; was the member removed?", type_name=name
        ) from exc


def _registered(name: Any, expected: type[Record] | type[EnumKind]) -> Record | EnumKind:
    """The registered class ``name`` names; never imports anything to find it."""
    if type(name) is not str:
        raise TypeError("type name is not a str")
    cls = lookup(name)
    if cls is None:
        raise SerializationError(
            f"cannot deserialize a {name!r}: no class is registered under that name in this "
            "process. Import the module defining it and register it with "
            "threadline.serde.register(...) under the same name before loading",
            type_name=name,
        )
    kind = describe(cls)
    if not isinstance(kind, expected):
        raise SerializationError(
            f"cannot deserialize a {name!r}: the class registered under that name "
            f"({cls.__module__}.{cls.__qualname__}) is of a different kind than the stored value",
            type_name=name,
        )
    return kind


def _decode_pickle(ser: Serializer, payload: bytes) -> Any:
    if not ser.allow_pickle:
        raise SerializationError(
            "refusing to unpickle: the data holds a pickled value, and unpickling untrusted data "
            "can run arbitrary code. Load it with Serializer(allow_pickle=True) only if you "
            "trust whoever wrote it"
        )
    return pickle.loads(payload)  # pickle-ok: opt-in


_CONTAINER_DECODERS: dict[int, Callable[[Serializer, bytes], Any]] = {
    fmt.EXT_TUPLE: lambda ser, p: tuple(ser._unpack_list(p)),
    fmt.EXT_SET: lambda ser, p: set(ser._unpack_list(p)),
    fmt.EXT_FROZENSET: lambda ser, p: frozenset(ser._unpack_list(p)),
    fmt.EXT_DICT: _decode_dict,
    fmt.EXT_RECORD: _decode_record,
    fmt.EXT_ENUM: _decode_enum,
    fmt.EXT_PICKLE: _decode_pickle,
}

_default_serializer = Serializer()
DEFAULT = _default_serializer  # plain typed msgpack: what savers use unless given another

# Bound methods, not wrappers: one Python call less on the hot path.
dumps = _default_serializer.dumps
loads = _default_serializer.loads
