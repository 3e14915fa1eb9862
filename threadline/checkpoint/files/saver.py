"""``FileSaver``: ``core.CoreSaver`` over a ``FilesBackend`` in a directory (package doc)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from contextlib import suppress

from threadline.checkpoint.base import Retention
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.files.backend import FilesBackend
from threadline.checkpoint.files.disk import TMP, TRASH, make_dirs, read_json, write_json
from threadline.checkpoint.formats import migrations_from
from threadline.errors import SaverUnavailableError
from threadline.serde import DEFAULT, Serializer

__all__ = ["FORMAT_VERSION", "FileSaver"]

#: The folder format; ``MIGRATIONS[n]`` rewrites a folder of version ``n`` as ``n + 1`` (see
#: ``formats``; none yet: version 1, whose rows keep the loop's metadata as bytes, is refused).
FORMAT_VERSION = 2
MIGRATIONS: dict[int, Callable[[str], None]] = {}
_FORMAT_NAME = "threadline.files"


class FileSaver(CoreSaver):
    """Checkpoints as plain files under ``directory`` (created if missing); see the package doc.

    Several savers, threads and processes may share one directory. ``retention`` prunes each
    (thread, namespace) on save. ``previews=False`` writes no readable previews (and keeps
    every blob in msgpack). ``close()`` is a no-op (nothing stays open), so the saver works as
    a context manager and can be used again afterwards.
    """

    backend: FilesBackend

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        retention: Retention | None = None,
        previews: bool = True,
        serde: Serializer | None = None,
    ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        codec = serde or DEFAULT
        backend = FilesBackend(self.directory, codec, previews)
        self.previews = backend.previews
        try:
            make_dirs(backend.threads_dir)
            self._check_format()
        except SaverUnavailableError:
            raise
        except OSError as exc:
            raise SaverUnavailableError(
                f"cannot open checkpoint directory {self.directory!r}: {exc}"
            ) from exc
        self._empty_trash()
        super().__init__(backend, retention=retention, serde=codec)

    def __repr__(self) -> str:
        return f"FileSaver({self.directory!r})"

    def _check_format(self) -> None:
        """Mark a new directory with the format version; check or migrate an older one."""
        path = os.path.join(self.directory, "FORMAT.json")
        marker = {"format": _FORMAT_NAME, "version": FORMAT_VERSION}
        try:
            found = read_json(path)
        except FileNotFoundError:
            write_json(path, marker, replace=False)  # nor a marker another process just wrote
            return
        except ValueError as exc:
            raise SaverUnavailableError(
                f"checkpoint directory {self.directory!r}: FORMAT.json is unreadable ({exc})"
            ) from exc
        if not isinstance(found, dict) or found.get("format") != _FORMAT_NAME:
            raise SaverUnavailableError(
                f"{self.directory!r} is not a threadline checkpoint directory (FORMAT.json)"
            )
        version = found.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise SaverUnavailableError(
                f"checkpoint directory {self.directory!r} has format version {version!r}, newer "
                f"than this threadline understands ({FORMAT_VERSION}); upgrade threadline"
            )
        where = f"checkpoint directory {self.directory!r}"
        steps = migrations_from(version, FORMAT_VERSION, MIGRATIONS, where)
        for migrate in steps:
            migrate(self.directory)
        if steps:
            write_json(path, marker)

    def _empty_trash(self) -> None:
        """Finish deletions a crash interrupted, and drop stale temp files at the top."""
        for entry in os.scandir(self.directory):
            if entry.name.startswith(TRASH):
                shutil.rmtree(entry.path, ignore_errors=True)
            elif entry.name.startswith(TMP):
                with suppress(OSError):
                    if time.time() - entry.stat().st_mtime > 3600:
                        os.unlink(entry.path)
