"""Property tests: any mix of the supported types loads back equal and of the same type,
compressed and encrypted too, and the fast and slow encoders agree.
"""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serde_types import (
    Color,
    Level,
    Message,
    Model,
    Pair,
    Point,
    Role,
    check,
    roundtrip,
    same,
)

from threadline import serde

# -- property test -------------------------------------------------------------------------------

_offsets = st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23))
_tzs = st.none() | st.just(UTC) | st.builds(timezone, _offsets) | st.timezones()


hashables = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.dates()
    | st.uuids()
    | st.sampled_from(list(Color) + list(Level) + list(Role)),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)


leaves = (
    hashables
    | st.floats()
    | st.binary(max_size=16).map(bytearray)
    | st.datetimes(timezones=_tzs)
    | st.times(timezones=st.none() | st.builds(timezone, _offsets))
    | st.timedeltas()
    | st.decimals(allow_nan=False)
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.sets(hashables, max_size=3)
        | st.frozensets(hashables, max_size=3)
        | st.builds(Message, st.sampled_from(Role), st.text(max_size=5), inner)
        | st.builds(Point, st.integers(), st.integers())
        | st.builds(Pair, inner, inner)
        | st.builds(Model, name=st.text(max_size=5), data=inner)
    )


values = st.recursive(leaves, _containers, max_leaves=25)


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(values)
def test_property_round_trip(value: Any) -> None:
    check(value)


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(values)
def test_property_fast_and_slow_paths_agree(value: Any) -> None:
    """The Python re-encoder must write exactly what the single ormsgpack call writes."""
    ser = serde.Serializer()
    assert ser.dumps(value)[2:] == ser._dumps_slow(value, "")


_KEY = bytes(range(32))


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(values, st.sampled_from([0, 64]))
def test_property_round_trip_compressed_and_encrypted(value: Any, threshold: int) -> None:
    ser = serde.Serializer(compress_threshold=threshold, encryption_key=_KEY, key_id="k")
    loaded = roundtrip(value, ser)
    assert same(value, loaded), (value, loaded)
    assert same(value, ser.loads(serde.dumps(value)))  # plain blobs stay readable
