"""A saver that keeps checkpoints as plain files: one folder per thread, JSON you can ``cat``.

``FileSaver(directory)`` stores the rows ``threadline.checkpoint.layout`` makes, each file with
a CRC-32, written whole and renamed into place (the row file last, so a crash mid-put leaves
the previous checkpoint the newest); writers of a thread take its ``flock`` (Linux), so savers
and processes may share a directory. docs/storage.md ("Files") shows the folder tree and what
each file holds.

The package: ``disk.py`` (names, paths, atomic writes, locks, heads, crash sweeps), ``rows.py``
(each file's bytes, written and read back), ``preview.py`` (readable renderings),
``backend.py`` (``FilesBackend`` and its transaction, the ``checkpoint.backend`` protocol)
and ``saver.py`` (``FileSaver``: ``core.CoreSaver`` over it, the folder's format version).
"""

from threadline.checkpoint.files.saver import FORMAT_VERSION, FileSaver

__all__ = ["FORMAT_VERSION", "FileSaver"]
