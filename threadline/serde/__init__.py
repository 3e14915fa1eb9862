"""Safe, typed encoding of state values (see ``codec`` for the format).

``dumps``/``loads`` never pickle and never import: classes are rebuilt only if registered with
``register``. ``Serializer(allow_pickle=True)`` is the explicit opt-in for trusted data.
"""

from threadline.serde.codec import DEFAULT, Serializer, dumps, loads
from threadline.serde.registry import lookup, name_of, register

__all__ = ["DEFAULT", "Serializer", "dumps", "loads", "lookup", "name_of", "register"]
