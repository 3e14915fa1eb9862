"""Per-blob zstd compression and AES-256-GCM encryption (``Serializer(compress_threshold=...,
encryption_key=...)``): round trips, the header layout, key rotation, tampering, bombs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
import zstandard
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from threadline import serde
from threadline.errors import SerializationError
from threadline.serde import _envelope
from threadline.serde import wire as fmt

KEY_1 = bytes(range(32))
KEY_2 = bytes(range(100, 132))
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@serde.register(name="tests.envelope.Row")
@dataclass(frozen=True)
class Row:
    id: int
    text: str
    tags: tuple[str, ...] = ()


REPETITIVE = {"rows": [Row(i, "the same words again and again", ("a", "b")) for i in range(300)]}
SMALL = {"a": (1, 2), "b": "x"}


def plain_body(value: Any) -> bytes:
    return serde.dumps(value)[fmt.HEADER_SIZE :]


def compressing(threshold: int = 0, **kwargs: Any) -> serde.Serializer:
    return serde.Serializer(compress_threshold=threshold, **kwargs)


def encrypting(key: bytes = KEY_1, key_id: str = "k1", **kwargs: Any) -> serde.Serializer:
    return serde.Serializer(encryption_key=key, key_id=key_id, **kwargs)


def both(**kwargs: Any) -> serde.Serializer:
    return serde.Serializer(compress_threshold=0, encryption_key=KEY_1, key_id="k1", **kwargs)


# -- defaults are unchanged ----------------------------------------------------------------------


def test_default_serializer_writes_plain_blobs() -> None:
    for ser in (serde.Serializer(), serde.Serializer(compression_level=19)):
        assert ser.dumps(REPETITIVE) == serde.dumps(REPETITIVE)
        assert serde.dumps(REPETITIVE)[:2] == bytes([fmt.FORMAT_VERSION, 0])
    assert repr(serde.Serializer()) == "Serializer(allow_pickle=False)"
    assert serde.Serializer().compress_threshold is None
    assert serde.Serializer().key_id is None


# -- compression ---------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [None, 0, 1, 100, 10_000, 10**9])
@pytest.mark.parametrize("value", [SMALL, REPETITIVE, {"blob": os.urandom(5000)}, "", b""])
def test_compression_round_trip(threshold: int | None, value: Any) -> None:
    ser = serde.Serializer(compress_threshold=threshold)
    assert ser.loads(ser.dumps(value)) == value
    assert serde.loads(ser.dumps(value)) == value  # any Serializer reads compressed blobs


def test_threshold_edges() -> None:
    value = {"text": "abc" * 200}
    size = len(plain_body(value))
    at = compressing(size).dumps(value)
    assert at[1] == fmt.FLAG_ZSTD
    assert compressing(size - 1).dumps(value)[1] == fmt.FLAG_ZSTD
    assert compressing(size + 1).dumps(value) == serde.dumps(value)  # below it: plain
    for blob in (at, compressing(size + 1).dumps(value)):
        assert serde.loads(blob) == value


def test_compressed_output_is_much_smaller_for_repetitive_data() -> None:
    plain = serde.dumps(REPETITIVE)
    packed = compressing(1024).dumps(REPETITIVE)
    assert len(packed) * 10 < len(plain), (len(packed), len(plain))
    assert compressing(1024, compression_level=19).loads(packed) == REPETITIVE


def test_incompressible_or_tiny_bodies_stay_plain() -> None:
    noise = {"blob": os.urandom(4096)}
    assert compressing(0).dumps(noise) == serde.dumps(noise)
    assert compressing(0).dumps(SMALL) == serde.dumps(SMALL)
    assert compressing(0).dumps(1) == serde.dumps(1)


def test_bodies_above_the_decompression_limit_are_stored_uncompressed() -> None:
    ser = compressing(0, max_decompressed_size=1000)
    value = {"text": "z" * 5000}
    data = ser.dumps(value)
    assert data == serde.dumps(value)  # compressing it would write a blob ser could not read
    assert ser.loads(data) == value


def test_compression_header_layout() -> None:
    data = compressing(0).dumps(REPETITIVE)
    body = plain_body(REPETITIVE)
    flags = fmt.FLAG_ZSTD
    assert data[:4] == bytes([fmt.FORMAT_VERSION, flags, fmt.EXTENDED_MARKER, flags])
    assert int.from_bytes(data[4:8], "big") == len(body)
    assert data[8:12] == ZSTD_MAGIC
    assert zstandard.ZstdDecompressor().decompress(data[8:]) == body


# -- encryption ----------------------------------------------------------------------------------


def test_encryption_round_trip() -> None:
    ser = encrypting()
    secret = {"password": "hunter2-hunter2", "rows": REPETITIVE["rows"][:3]}
    data = ser.dumps(secret)
    assert data[1] == fmt.FLAG_AES_GCM
    assert b"hunter2" not in data
    assert ser.dumps(secret) != data  # a fresh nonce every time
    assert ser.loads(data) == secret
    assert ser.loads(bytearray(data)) == secret
    assert ser.loads(memoryview(data)) == secret


def test_encryption_header_layout_and_associated_data() -> None:
    """Decrypting by hand with the documented layout gives back the plain msgpack body."""
    key_id = "2024-q3"
    data = encrypting(key_id=key_id).dumps(SMALL)
    flags = fmt.FLAG_AES_GCM
    assert data[:4] == bytes([fmt.FORMAT_VERSION, flags, fmt.EXTENDED_MARKER, flags])
    assert data[4] == len(key_id)
    assert data[5 : 5 + len(key_id)] == key_id.encode()
    nonce_at = 5 + len(key_id)
    header_end = nonce_at + fmt.NONCE_SIZE
    body = plain_body(SMALL)
    assert len(data) == header_end + len(body) + fmt.TAG_SIZE
    nonce = data[nonce_at:header_end]
    assert AESGCM(KEY_1).decrypt(nonce, data[header_end:], data[:header_end]) == body


def test_compression_happens_before_encryption() -> None:
    data = both().dumps(REPETITIVE)
    flags = fmt.FLAG_ZSTD | fmt.FLAG_AES_GCM
    assert data[:4] == bytes([fmt.FORMAT_VERSION, flags, fmt.EXTENDED_MARKER, flags])
    body = plain_body(REPETITIVE)
    assert int.from_bytes(data[4:8], "big") == len(body)
    assert data[8] == 2 and data[9:11] == b"k1"
    header_end = 11 + fmt.NONCE_SIZE
    frame = AESGCM(KEY_1).decrypt(data[11:header_end], data[header_end:], data[:header_end])
    assert frame[:4] == ZSTD_MAGIC
    assert zstandard.ZstdDecompressor().decompress(frame) == body
    assert len(data) * 10 < len(encrypting().dumps(REPETITIVE))
    assert both().loads(data) == REPETITIVE


def test_small_bodies_are_encrypted_but_not_compressed() -> None:
    ser = serde.Serializer(compress_threshold=10_000, encryption_key=KEY_1, key_id="k1")
    assert ser.dumps(SMALL)[1] == fmt.FLAG_AES_GCM
    assert ser.dumps(REPETITIVE)[1] == fmt.FLAG_AES_GCM | fmt.FLAG_ZSTD


def test_key_rotation() -> None:
    old_blob = encrypting(KEY_1, "k1").dumps(SMALL)
    rotated = serde.Serializer(encryption_key=KEY_2, key_id="k2", decryption_keys={"k1": KEY_1})
    new_blob = rotated.dumps(SMALL)
    assert rotated.key_id == "k2"
    assert new_blob[5:7] == b"k2"  # new blobs use the current key
    assert rotated.loads(old_blob) == SMALL
    assert rotated.loads(new_blob) == SMALL
    # Without the old key, old blobs name the key they need.
    with pytest.raises(SerializationError, match=r"encrypted with key id 'k1' and no key"):
        encrypting(KEY_2, "k2").loads(old_blob)
    # The old key alone cannot read the new blobs either.
    with pytest.raises(SerializationError, match="key id 'k2'"):
        encrypting(KEY_1, "k1").loads(new_blob)


def test_turning_encryption_off_keeps_old_blobs_readable() -> None:
    old_blob = both().dumps(REPETITIVE)
    reader = serde.Serializer(decryption_keys={"k1": KEY_1})
    assert reader.key_id is None
    assert reader.dumps(SMALL) == serde.dumps(SMALL)  # writes plain blobs
    assert reader.loads(old_blob) == REPETITIVE


def test_missing_key() -> None:
    data = encrypting(key_id="prod-7").dumps(SMALL)
    for reader in (serde.Serializer(), compressing(0)):
        with pytest.raises(SerializationError) as info:
            reader.loads(data)
        message = str(info.value)
        assert "encrypted with key id 'prod-7'" in message
        assert "no key was given" in message
    with pytest.raises(SerializationError, match="encrypted with key id 'prod-7'"):
        serde.loads(data)


def test_wrong_key() -> None:
    data = both().dumps(REPETITIVE)
    for reader in (encrypting(KEY_2, "k1"), serde.Serializer(decryption_keys={"k1": KEY_2})):
        with pytest.raises(SerializationError, match="authentication failed"):
            reader.loads(data)


# -- tampering and damage -------------------------------------------------------------------------


def _flips(data: bytes, positions: range) -> Any:
    for i in positions:
        for mask in range(1, 256):
            damaged = bytearray(data)
            damaged[i] ^= mask
            yield i, bytes(damaged)


@pytest.mark.parametrize("make", [encrypting, both], ids=["aes", "zstd+aes"])
def test_changing_any_byte_is_detected(make: Any) -> None:
    """Every value of every byte (header, key id, nonce, body, tag), with a reader that also
    accepts plain blobs: none loads, not even by stripping the encryption flag."""
    ser = make()
    data = ser.dumps({"msg": "hello " * 20, "n": [1, 2, 3]})
    for i, damaged in _flips(data, range(len(data))):
        with pytest.raises(SerializationError):
            ser.loads(damaged)
        if i >= fmt.EXTENDED_HEADER_SIZE + 1 + 2 + (4 if data[1] & fmt.FLAG_ZSTD else 0):
            # nonce, ciphertext and tag: the GCM tag check itself catches it
            with pytest.raises(SerializationError, match="authentication failed"):
                ser.loads(damaged)


def test_tampered_header_fields_fail_authentication() -> None:
    ser = both()
    data = bytearray(ser.dumps(REPETITIVE))
    data[7] ^= 1  # the uncompressed size: authenticated as associated data
    with pytest.raises(SerializationError, match="authentication failed"):
        ser.loads(bytes(data))
    relabelled = serde.Serializer(
        encryption_key=KEY_1, key_id="k1", decryption_keys={"k2": KEY_1}
    )  # same key under another id: the id is authenticated too
    data = bytearray(ser.dumps(REPETITIVE))
    data[10] = ord("2")
    with pytest.raises(SerializationError, match="authentication failed"):
        relabelled.loads(bytes(data))


def test_stripping_the_flags_does_not_load_garbage() -> None:
    for ser in (encrypting(), both(), compressing()):
        data = ser.dumps(REPETITIVE)
        for flags in range(4):
            if flags != data[1]:
                with pytest.raises(SerializationError):
                    ser.loads(data[:1] + bytes([flags]) + data[2:])


def test_every_truncation_and_extension_is_refused() -> None:
    for ser in (encrypting(), both(), compressing()):
        data = ser.dumps(REPETITIVE)
        for end in range(len(data)):
            with pytest.raises(SerializationError):
                ser.loads(data[:end])
        with pytest.raises(SerializationError):
            ser.loads(data + b"\x00")


def test_damaged_compressed_body_is_refused() -> None:
    ser = compressing()
    data = ser.dumps(REPETITIVE)
    for i in range(8, len(data), 7):
        damaged = bytearray(data)
        damaged[i] ^= 0x55
        with pytest.raises(SerializationError, match="compressed body is corrupted"):
            ser.loads(bytes(damaged))


# -- decompression bombs -------------------------------------------------------------------------

_ZSTD_HEADER = bytes([fmt.FORMAT_VERSION, fmt.FLAG_ZSTD, fmt.EXTENDED_MARKER, fmt.FLAG_ZSTD])
_BOMB_SIZE = 16 * 2**20
_BOMB = zstandard.ZstdCompressor().compress(ormsgpack.packb(b"\0" * (_BOMB_SIZE - 5)))


def _zstd_blob(size: int, frame: bytes) -> bytes:
    return _ZSTD_HEADER + size.to_bytes(4, "big") + frame


def test_bomb_over_the_limit_is_refused_before_decompressing() -> None:
    assert len(_BOMB) < 10_000
    assert serde.loads(_zstd_blob(_BOMB_SIZE, _BOMB)) == b"\0" * (_BOMB_SIZE - 5)  # < the limit
    small_limit = serde.Serializer(max_decompressed_size=2**20)
    with pytest.raises(SerializationError, match="decompression bomb"):
        small_limit.loads(_zstd_blob(_BOMB_SIZE, _BOMB))
    with pytest.raises(SerializationError, match="decompression bomb"):
        serde.loads(_zstd_blob(2**32 - 1, _BOMB))


def test_bomb_lying_about_its_size_is_refused() -> None:
    # The header claims a small size but the frame declares (and holds) a big one.
    with pytest.raises(SerializationError, match=f"declares {_BOMB_SIZE} bytes, the header 100"):
        serde.loads(_zstd_blob(100, _BOMB))
    # A frame that declares no size at all.
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(b"\0" * 10**6)
    with pytest.raises(SerializationError, match="compressed body is corrupted"):
        serde.loads(_zstd_blob(100, unsized))


def test_bomb_whose_frame_understates_its_size_is_refused() -> None:
    """Header and frame agree on a small size, but the frame decodes to much more."""
    frame = bytearray(zstandard.ZstdCompressor().compress(b"\0" * 10**6))
    descriptor = frame[4]
    assert descriptor >> 6 == 2  # a 4-byte frame content size ...
    at = 5 if descriptor & 0x20 else 6  # ... after the window byte unless single-segment
    frame[at : at + 4] = (1000).to_bytes(4, "little")
    with pytest.raises(SerializationError, match="compressed body is corrupted"):
        serde.loads(_zstd_blob(1000, bytes(frame)))


def test_encrypted_bomb_is_refused_too() -> None:
    ser = both(max_decompressed_size=2**20)
    writer = both()
    with pytest.raises(SerializationError, match="decompression bomb"):
        ser.loads(writer.dumps(b"\0" * (2 * 2**20)))


# -- mixing old and new blobs --------------------------------------------------------------------


def test_plain_blobs_are_read_by_compressing_and_encrypting_serializers() -> None:
    plain = serde.dumps(REPETITIVE)
    compressed = compressing().dumps(REPETITIVE)
    for reader in (compressing(), encrypting(), both(), serde.Serializer()):
        assert reader.loads(plain) == REPETITIVE
        assert reader.loads(compressed) == REPETITIVE


def test_require_encryption_refuses_unencrypted_blobs() -> None:
    strict = both(require_encryption=True)
    assert strict.loads(strict.dumps(REPETITIVE)) == REPETITIVE
    assert strict.loads(encrypting().dumps(SMALL)) == SMALL
    for data in (serde.dumps(SMALL), compressing().dumps(REPETITIVE)):
        with pytest.raises(SerializationError, match="not encrypted"):
            strict.loads(data)
    with pytest.raises(SerializationError):
        strict.loads(b"")


# -- configuration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"compress_threshold": -1}, ValueError, "compress_threshold"),
        ({"compress_threshold": True}, ValueError, "compress_threshold"),
        ({"compress_threshold": 0, "compression_level": 23}, ValueError, "at most 22"),
        ({"compression_level": 1.5}, ValueError, "compression_level"),
        ({"max_decompressed_size": 0}, ValueError, "max_decompressed_size"),
        ({"max_decompressed_size": 2**32}, ValueError, "max_decompressed_size"),
        ({"encryption_key": KEY_1}, ValueError, "needs a key_id"),
        ({"key_id": "k1"}, ValueError, "no encryption_key"),
        ({"encryption_key": KEY_1[:16], "key_id": "k"}, ValueError, "32 bytes"),
        ({"encryption_key": KEY_1.hex(), "key_id": "k"}, TypeError, "raw bytes"),
        ({"encryption_key": KEY_1, "key_id": ""}, ValueError, "non-empty"),
        ({"encryption_key": KEY_1, "key_id": "x" * 256}, ValueError, "255"),
        ({"encryption_key": KEY_1, "key_id": "a\nb"}, ValueError, "printable"),
        ({"decryption_keys": {"old": b"short"}}, ValueError, "32 bytes"),
        ({"decryption_keys": [("old", KEY_1)]}, TypeError, "map key ids"),
        (
            {"encryption_key": KEY_1, "key_id": "k", "decryption_keys": {"k": KEY_2}},
            ValueError,
            "different key",
        ),
        ({"require_encryption": True}, ValueError, "needs a key"),
    ],
)
def test_bad_configuration(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        serde.Serializer(**kwargs)


def test_repr_names_key_ids_never_keys() -> None:
    ser = serde.Serializer(
        compress_threshold=512,
        encryption_key=KEY_2,
        key_id="k2",
        decryption_keys={"k1": KEY_1},
        require_encryption=True,
    )
    text = repr(ser)
    assert text == (
        "Serializer(allow_pickle=False, compress_threshold=512, compression_level=3, "
        "key_id='k2', decryption_key_ids=['k1', 'k2'], require_encryption=True)"
    )
    assert KEY_1.hex() not in text and str(KEY_1) not in text
    assert ser.compress_threshold == 512


def test_key_may_be_any_bytes_like() -> None:
    ser = serde.Serializer(encryption_key=bytearray(KEY_1), key_id="k1")
    assert encrypting().loads(ser.dumps(SMALL)) == SMALL


# -- optional dependencies -----------------------------------------------------------------------


def test_missing_zstandard(monkeypatch: pytest.MonkeyPatch) -> None:
    compressed = compressing().dumps(REPETITIVE)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    monkeypatch.setattr(_envelope, "_local", threading.local())  # drop cached contexts
    with pytest.raises(ImportError, match=r"pip install 'threadline\[compression\]'"):
        compressing()
    with pytest.raises(SerializationError, match=r"pip install 'threadline\[compression\]'"):
        serde.loads(compressed)
    assert serde.loads(serde.dumps(SMALL)) == SMALL
    assert encrypting().loads(encrypting().dumps(SMALL)) == SMALL


def test_missing_cryptography(monkeypatch: pytest.MonkeyPatch) -> None:
    encrypted = encrypting().dumps(SMALL)
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.ciphers.aead", None)
    with pytest.raises(ImportError, match=r"pip install 'threadline\[encryption\]'"):
        encrypting()
    with pytest.raises(ImportError, match=r"pip install 'threadline\[encryption\]'"):
        serde.Serializer(decryption_keys={"k1": KEY_1})
    with pytest.raises(SerializationError, match="encrypted with key id 'k1' and no key"):
        serde.loads(encrypted)
    assert compressing().loads(compressing().dumps(REPETITIVE)) == REPETITIVE


def test_importing_threadline_does_not_import_the_optional_libraries() -> None:
    code = (
        "import sys\n"
        "from threadline import serde\n"
        "assert serde.loads(serde.dumps({'a': (1,)})) == {'a': (1,)}\n"
        "serde.Serializer(allow_pickle=True)\n"
        "optional = ('zstandard', 'cryptography')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in optional))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


# -- concurrency ---------------------------------------------------------------------------------


def test_one_serializer_shared_by_threads() -> None:
    ser = both()
    values = [{"i": i, "rows": REPETITIVE["rows"][: i % 50]} for i in range(400)]

    def work(value: dict[str, Any]) -> bool:
        return ser.loads(ser.dumps(value)) == value

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert all(pool.map(work, values))
