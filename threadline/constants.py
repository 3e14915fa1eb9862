"""Names with a fixed meaning in every graph."""

START = "__start__"
END = "__end__"
INTERRUPT_KEY = "__interrupt__"

#: Node names a user may not take: they would clash with the graph's own markers.
RESERVED_NAMES = frozenset({START, END, INTERRUPT_KEY, "__input__", "__parent__"})
