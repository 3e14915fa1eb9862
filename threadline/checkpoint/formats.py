"""Format versions: which migrations bring stored data of an older version up to date.

Every durable backend records the version of the format its data is in (a table, a key, a
file). Opening data of a newer version is refused by the backend ("made by a newer
threadline"); data of an older one is brought up to date by the backend's ``MIGRATIONS``, a
mapping from a version ``n`` to what rewrites data of version ``n`` as version ``n + 1``, run in
order inside the backend's opening transaction. The package is unreleased, so version-1 data is
refused rather than migrated; SQLite is at version 3 and migrates version 2 (its ``writes``
table keyed by rowid), the other backends are at version 2. Each backend's tests run the
mechanism on an older format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from threadline.errors import SaverUnavailableError

_M = TypeVar("_M")


def migrations_from(
    found: int | None, current: int, migrations: Mapping[int, _M], where: str
) -> list[_M]:
    """The migrations that take data of version ``found`` to ``current``, oldest first.

    ``found`` is ``None`` for new storage (nothing to migrate). ``where`` names the storage in
    the error raised when some step from ``found`` is not known (data older than any format
    this threadline can read).
    """
    if found is None or found >= current:
        return []
    steps = range(found, current)
    if any(version not in migrations for version in steps):
        raise SaverUnavailableError(
            f"{where} has format version {found}, which this threadline cannot migrate "
            f"(it reads version {current}): read it with the threadline that wrote it, or "
            "point the saver at new storage"
        )
    return [migrations[version] for version in steps]
