"""Functional API: short-term memory with `previous` and entrypoint.final."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint


@entrypoint(checkpointer=InMemorySaver())
def accumulate(n: int, *, previous: int | None) -> entrypoint.final[int, int]:
    previous = previous or 0
    total = previous + n
    return entrypoint.final(value=previous, save=total)


config = {"configurable": {"thread_id": "my-thread"}}
print(accumulate.invoke(1, config=config))
print(accumulate.invoke(2, config=config))
print(accumulate.invoke(3, config=config))
