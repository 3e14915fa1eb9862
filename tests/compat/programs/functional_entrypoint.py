"""Functional API: @entrypoint and @task, with an interrupt and resume."""

import time

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.types import Command, interrupt


@task
def write_essay(topic: str) -> str:
    time.sleep(0.01)
    return f"An essay about topic: {topic}"


@entrypoint(checkpointer=InMemorySaver())
def workflow(topic: str) -> dict:
    essay = write_essay(topic).result()
    is_approved = interrupt({"essay": essay, "action": "Please approve/reject the essay"})
    return {"essay": essay, "is_approved": is_approved}


config = {"configurable": {"thread_id": "some_thread"}}
for item in workflow.stream("cat", config):
    if "__interrupt__" in item:
        print("interrupt", [i.value for i in item["__interrupt__"]])
    else:
        print(item)

for item in workflow.stream(Command(resume=True), config):
    print(item)
