"""``HeldBlobs``: which large blobs of each thread the process holds the bytes of, within the
byte cache's bound (shared by the PostgreSQL and Redis savers)."""

from __future__ import annotations

import zlib

from threadline.checkpoint.bytecache import MIN_BYTES, HeldBlobs

SIZE = MIN_BYTES


def test_held_blobs_follow_the_cache_bound_and_keep_no_small_ones() -> None:
    held: HeldBlobs[tuple[str, str]] = HeldBlobs(per_namespace=16, max_bytes=3 * SIZE)
    held.add("t1", "", ("small", "1"), "small", "1", 7, b"s" * (SIZE - 1))
    for version in "1234":
        data = version.encode() * SIZE
        held.add("t1", "", ("doc", version), "doc", version, int(version), data)
    assert held.held("t1", "") == {("doc", v): (int(v), v.encode() * SIZE) for v in "234"}
    held.add("t2", "", ("doc", "1"), "doc", "1", 1, b"x" * SIZE)  # the cache drops t1's oldest
    assert set(held.held("t1", "")) == {("doc", "3"), ("doc", "4")}
    held.drop("t1", "", [("doc", "3")])
    assert set(held.held("t1", "")) == {("doc", "4")}
    held.forget_thread("t1")
    assert held.held("t1", "") == {} and set(held.held("t2", "")) == {("doc", "1")}


def test_held_blobs_name_a_few_per_namespace_with_their_checksums() -> None:
    held: HeldBlobs[str] = HeldBlobs(per_namespace=2, max_bytes=10 * SIZE)
    for version in "123":
        data = version.encode() * SIZE
        held.add("t", "ns", f"b:{version}", "doc", version, zlib.crc32(data), data)
    found = held.held("t", "ns")
    assert set(found) == {"b:2", "b:3"}  # the oldest is no longer named
    assert found["b:3"] == (zlib.crc32(b"3" * SIZE), b"3" * SIZE)
    assert held.held("t", "") == {}  # namespaces apart
    held.clear()
    assert held.held("t", "ns") == {}
