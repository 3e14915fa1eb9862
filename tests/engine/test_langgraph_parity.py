"""Programs written for LangGraph get what LangGraph gives: its exception types, its messages,
``Command(resume=..., update=...)``, ``version="v2"`` outputs, managed values, Runnable methods,
updates filtered to the output schema, and its Mermaid text."""

from __future__ import annotations

import asyncio
import operator
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Command, GraphOutput, Send, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver
from threadline.errors import (
    AmbiguousResumeError,
    AsyncNodeInSyncRunError,
    CheckpointerRequiredError,
    ConfigError,
    GraphRecursionError,
    GraphValidationError,
    InvalidResumeError,
    InvalidUpdateError,
    ThreadIdRequiredError,
)
from threadline.managed import IsLastStep, RemainingSteps


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def cfg(thread: str = "t", **extra) -> dict:
    return {"configurable": {"thread_id": thread}, **extra}


def single(name: str, fn, schema=Log, **compile_kw):
    builder = StateGraph(schema)
    builder.add_node(name, fn)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile(**compile_kw)


# ------------------------------------------------------------------ exception types
def test_sync_invoke_of_an_async_node_is_a_type_error_as_in_langgraph():
    async def fetch(state: Log) -> dict:
        return {"log": ["fetched"]}

    graph = single("fetch", fetch)
    with pytest.raises(TypeError, match="'fetch' is async; run this graph with ainvoke"):
        graph.invoke({"log": []})
    with pytest.raises(AsyncNodeInSyncRunError):
        list(graph.stream({"log": []}))
    assert issubclass(AsyncNodeInSyncRunError, GraphValidationError)
    assert asyncio.run(graph.ainvoke({"log": []})) == {"log": ["fetched"]}


def test_a_bare_resume_with_several_interrupts_waiting_is_a_runtime_error():
    def fan_out(state: Log) -> list[Send]:
        return [Send("ask", {"log": [doc]}) for doc in ("a", "b")]

    def ask(state: Log) -> dict:
        return {"log": [interrupt(f"ok {state['log'][0]}?")]}

    builder = StateGraph(Log)
    builder.add_node("ask", ask)
    builder.add_conditional_edges(START, fan_out, ["ask"])
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"log": []}, cfg())

    with pytest.raises(RuntimeError, match="2 interrupts are waiting") as caught:
        graph.invoke(Command(resume="yes"), cfg())
    assert isinstance(caught.value, AmbiguousResumeError)  # an InvalidResumeError too
    assert len(graph.get_state(cfg()).interrupts) == 2  # nothing was resumed

    answers = {i.id: i.value for i in graph.get_state(cfg()).interrupts}
    assert sorted(graph.invoke(Command(resume=answers), cfg())["log"]) == ["ok a?", "ok b?"]


def test_a_checkpointer_without_a_thread_id_is_a_value_error():
    graph = single("a", lambda s: {"log": ["a"]}, checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match="needs a thread id") as caught:
        graph.invoke({"log": []})
    assert isinstance(caught.value, ThreadIdRequiredError)  # a ConfigError too
    with pytest.raises(ValueError):
        graph.get_state({"configurable": {}})


def test_build_and_config_errors_are_value_errors_as_in_langgraph():
    builder = StateGraph(Log)
    builder.add_node("a", lambda s: {"log": ["a"]})
    with pytest.raises(ValueError, match="already in the graph"):
        builder.add_node("a", lambda s: {})
    builder.add_edge("a", "nowhere")
    with pytest.raises(ValueError) as caught:
        builder.compile()
    assert isinstance(caught.value, GraphValidationError)

    graph = single("a", lambda s: {"log": ["a"]})
    with pytest.raises(ValueError, match="no checkpointer") as caught:
        graph.get_state(cfg())
    assert isinstance(caught.value, CheckpointerRequiredError)
    with pytest.raises(ValueError, match="recursion_limit"):
        graph.invoke({"log": []}, {"recursion_limit": 0})
    with pytest.raises(RuntimeError, match="needs a graph with a checkpointer") as caught:
        graph.invoke(Command(resume="yes"))
    assert isinstance(caught.value, CheckpointerRequiredError)


def test_the_recursion_limit_says_what_langgraph_says_and_is_a_recursion_error():
    graph = StateGraph(Log)
    graph.add_node("tick", lambda s: {"log": ["t"]})
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", lambda s: "tick")
    graph = graph.compile(checkpointer=InMemorySaver())

    with pytest.raises(RecursionError) as caught:
        graph.invoke({"log": []}, cfg(recursion_limit=3))
    assert isinstance(caught.value, GraphRecursionError)
    message = str(caught.value)
    assert message.startswith("Recursion limit of 3 reached without hitting a stop condition")
    assert "'t'" in message and "tick" in message  # names the thread and the next node
    assert graph.get_state(cfg()).next == ("tick",)


# ------------------------------------------------------------------ Command(update=..., goto=...)
class Review(TypedDict, total=False):
    draft: str
    reviewer: str
    log: Annotated[list[str], operator.add]


def review_graph(saver, runs: list[str] | None = None):
    def review(state: Review) -> dict:
        if runs is not None:
            runs.append(state["reviewer"])
        verdict = interrupt({"draft": state["draft"]})
        return {"reviewer": "done", "log": [f"{state['reviewer']}: {verdict}"]}

    builder = StateGraph(Review)
    builder.add_node("review", review)
    builder.add_node("publish", lambda s: {"log": ["published"]})
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver)


def test_resume_with_an_update_applies_it_before_the_node_runs_again(saver):
    graph = review_graph(saver)
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())

    out = graph.invoke(Command(resume="ok", update={"reviewer": "bob", "log": ["u"]}), cfg())

    # the node saw the update; its own write of the same key wins, as in LangGraph
    assert out == {"draft": "v1", "reviewer": "done", "log": ["u", "bob: ok"]}
    assert graph.get_state(cfg()).next == ()


def test_an_update_alone_reruns_the_waiting_node_and_is_kept_until_it_is_answered(saver):
    runs: list[str] = []
    graph = review_graph(saver, runs)
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())
    history = len(list(graph.get_state_history(cfg())))

    out = graph.invoke(Command(update={"reviewer": "zed"}), cfg())

    assert out["reviewer"] == "zed" and len(out["__interrupt__"]) == 1
    state = graph.get_state(cfg())
    assert state.values["reviewer"] == "zed" and state.next == ("review",)
    assert len(list(graph.get_state_history(cfg()))) == history  # no checkpoint of its own
    assert graph.invoke(Command(resume="y"), cfg())["log"] == ["zed: y"]
    assert runs == ["ann", "zed", "zed"]


def test_resume_with_goto_adds_the_target_to_the_step():
    graph = review_graph(InMemorySaver())
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())
    out = graph.invoke(Command(resume="ok", goto="publish"), cfg())
    assert out["log"] == ["ann: ok", "published"]
    with pytest.raises(InvalidUpdateError, match=r"goto='nowhere'\) names no node"):
        graph.invoke(Command(goto="nowhere"), cfg())


def test_a_command_with_nothing_in_it_or_for_a_parent_is_refused():
    graph = review_graph(InMemorySaver())
    graph.invoke({"draft": "v1", "reviewer": "ann", "log": []}, cfg())
    with pytest.raises(InvalidResumeError, match="no resume value, update or goto"):
        graph.invoke(Command(), cfg())
    with pytest.raises(InvalidUpdateError, match="no parent graph"):
        graph.invoke(Command(graph=Command.PARENT, update={"draft": "x"}), cfg())


# ------------------------------------------------------------------ get_state after a failed step
def test_get_state_shows_what_the_finished_siblings_of_a_failed_task_wrote(saver):
    def steady(state: Log) -> dict:
        return {"log": ["steady"]}

    def flaky(state: Log) -> dict:
        raise ConnectionError("service unavailable")

    builder = StateGraph(Log)
    builder.add_node("steady", steady)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "steady")
    builder.add_edge(START, "flaky")
    graph = builder.compile(checkpointer=saver)
    with pytest.raises(ConnectionError):
        graph.invoke({"log": []}, cfg())

    state = graph.get_state(cfg())
    assert state.values == {"log": ["steady"]}  # live: the sibling's write is shown
    assert state.next == ("flaky",)
    errors = {t.name: t.error for t in state.tasks}
    assert errors == {"flaky": "ConnectionError: service unavailable", "steady": None}
    # addressed by id, the checkpoint shows the values its step started from
    assert graph.get_state(state.config).values == {"log": []}
    assert next(iter(graph.get_state_history(cfg()))).values == {"log": []}


def test_a_run_stopped_at_an_interrupt_returns_what_the_finished_siblings_wrote():
    def ask(state: Log) -> dict:
        return {"log": [f"b {interrupt('q')}"]}

    builder = StateGraph(Log)
    builder.add_node("ask", ask)
    builder.add_node("quick", lambda s: {"log": ["c"]})
    builder.add_edge(START, "ask")
    builder.add_edge(START, "quick")
    graph = builder.compile(checkpointer=InMemorySaver())

    out = graph.invoke({"log": ["i"]}, cfg())
    assert out["log"] == ["i", "c"] and len(out["__interrupt__"]) == 1
    # running the step again re-asks; "quick" does not run again but its write still shows
    chunks = list(graph.stream(None, cfg(), stream_mode="values"))
    assert chunks[0] == {"log": ["i"]} and "__interrupt__" in chunks[1]
    assert chunks[-1] == {"log": ["i", "c"]}
    assert graph.invoke(Command(resume="y"), cfg())["log"] == ["i", "b y", "c"]


# ------------------------------------------------------------------ version="v2"
def asking_graph(schema=Review):
    def ask(state) -> dict:
        return {"reviewer": interrupt("who?")}

    builder = StateGraph(schema)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_invoke_v2_returns_the_output_and_the_interrupts_apart():
    graph = asking_graph()
    output = graph.invoke({"draft": "v1"}, cfg(), version="v2")
    assert isinstance(output, GraphOutput)
    assert output.value == {"draft": "v1", "log": []}
    assert [i.value for i in output.interrupts] == ["who?"]

    done = asyncio.run(graph.ainvoke(Command(resume="ann"), cfg(), version="v2"))
    assert done == GraphOutput({"draft": "v1", "reviewer": "ann", "log": []}, ())
    with pytest.warns(DeprecationWarning):
        assert done["reviewer"] == "ann" and "__interrupt__" not in done

    parts = graph.invoke({"draft": "v2"}, cfg("u"), stream_mode="updates", version="v2")
    assert parts[-1]["type"] == "updates" and "__interrupt__" in parts[-1]["data"]
    with pytest.raises(ConfigError, match="version must be one of"):
        graph.invoke({"draft": "v1"}, cfg(), version="v3")


@dataclass
class DraftState:
    draft: str = ""
    reviewer: str = ""


def test_v2_outputs_of_a_dataclass_state_are_instances_of_it():
    graph = asking_graph(DraftState)
    output = graph.invoke({"draft": "v1"}, cfg(), version="v2")
    assert output.value == DraftState(draft="v1", reviewer="")
    parts = list(graph.stream(Command(resume="bob"), cfg(), stream_mode="values", version="v2"))
    assert parts[-1] == {
        "type": "values",
        "ns": (),
        "data": DraftState(draft="v1", reviewer="bob"),
        "interrupts": (),
    }
    assert graph.invoke({"draft": "v2"}, cfg("v1"))["draft"] == "v2"  # v1 stays a dict


# ------------------------------------------------------------------ Runnable methods
class Num(TypedDict):
    n: int


def doubler(**compile_kw):
    return single("double", lambda s: {"n": s["n"] * 2}, schema=Num, **compile_kw)


def test_batch_runs_every_input_and_keeps_their_order():
    graph = doubler()
    assert graph.batch([{"n": 1}, {"n": 2}, {"n": 3}]) == [{"n": 2}, {"n": 4}, {"n": 6}]
    assert graph.batch([]) == []
    assert asyncio.run(graph.abatch([{"n": 5}, {"n": 6}])) == [{"n": 10}, {"n": 12}]


def test_batch_with_a_config_each_and_errors_returned():
    graph = doubler(checkpointer=InMemorySaver())
    out = graph.batch([{"n": 1}, {"n": None}], [cfg("a"), cfg("b")], return_exceptions=True)
    assert out[0] == {"n": 2} and isinstance(out[1], TypeError)
    assert graph.get_state(cfg("a")).values == {"n": 2}
    with pytest.raises(ValueError, match="2 inputs but 1 configs"):
        graph.batch([{"n": 1}, {"n": 2}], [cfg("a")])
    with pytest.raises(ValueError, match="max_concurrency"):
        graph.batch([{"n": 1}], {"max_concurrency": 0})


def test_with_config_binds_config_under_each_calls_own():
    graph = doubler(checkpointer=InMemorySaver())
    bound = graph.with_config({"configurable": {"thread_id": "bound"}}, recursion_limit=5)
    assert bound.invoke({"n": 21}) == {"n": 42}
    assert bound.get_state({}).values == {"n": 42}
    assert bound.invoke({"n": 1}, cfg("own")) == {"n": 2}  # the call's thread wins
    assert graph.get_state(cfg("own")).values == {"n": 2}
    assert graph.config is None and bound.name == graph.name

    builder = StateGraph(Num)
    builder.add_sequence([("one", lambda s: {"n": 1}), ("two", lambda s: {"n": 2})])
    builder.add_edge(START, "one")
    limited = builder.compile().with_config(recursion_limit=1)
    with pytest.raises(GraphRecursionError, match="Recursion limit of 1 reached"):
        limited.invoke({"n": 0})
    assert limited.invoke({"n": 0}, {"recursion_limit": 2}) == {"n": 2}


def test_input_and_output_jsonschema_follow_the_io_schemas():
    class In(TypedDict):
        question: str

    class Out(TypedDict):
        answer: str

    class Everything(In, Out):
        notes: list[str]

    builder = StateGraph(Everything, input_schema=In, output_schema=Out)
    builder.add_node("answer", lambda s: {"answer": s["question"].upper()})
    builder.add_edge(START, "answer")
    graph = builder.compile(name="qa")
    assert graph.get_input_jsonschema() == {
        "properties": {"question": {"title": "Question", "type": "string"}},
        "required": ["question"],
        "title": "In",
        "type": "object",
    }
    assert graph.get_output_jsonschema()["properties"] == {
        "answer": {"title": "Answer", "type": "string"}
    }
    assert doubler().get_input_jsonschema()["properties"] == {
        "n": {"title": "N", "type": "integer"}
    }
    assert asking_graph(DraftState).get_output_jsonschema()["title"] == "LangGraph_output"


# ------------------------------------------------------------------ managed values
class Steps(TypedDict):
    log: Annotated[list[str], operator.add]
    remaining_steps: RemainingSteps
    is_last_step: IsLastStep


def counting(saver=None, ask_in: str = ""):
    def make(name: str):
        def node(state: Steps) -> dict:
            if name == ask_in:
                interrupt("go on?")
            return {"log": [f"{name}:{state['remaining_steps']}:{state['is_last_step']}"]}

        return node

    builder = StateGraph(Steps)
    builder.add_sequence([(n, make(n)) for n in "abc"])
    builder.add_edge(START, "a")
    return builder.compile(checkpointer=saver)


def test_remaining_steps_counts_down_to_the_recursion_limit_as_in_langgraph():
    graph = counting()
    out = graph.invoke({"log": []}, {"recursion_limit": 10})
    assert out == {"log": ["a:9:False", "b:8:False", "c:7:False"]}  # never in the output
    # the input and START steps count: with a limit of 4, "c" is the last step
    assert graph.invoke({"log": []}, {"recursion_limit": 4})["log"][-1] == "c:1:True"
    with pytest.raises(GraphRecursionError):
        graph.invoke({"log": []}, {"recursion_limit": 2})


def test_a_resumed_run_counts_from_the_checkpoint_it_starts_at():
    graph = counting(InMemorySaver(), ask_in="b")
    graph.invoke({"log": []}, cfg(recursion_limit=10))
    assert graph.get_state(cfg()).values == {"log": ["a:9:False"]}  # not saved, not shown
    out = graph.invoke(Command(resume=True), cfg(recursion_limit=5))
    assert out["log"] == ["a:9:False", "b:6:False", "c:5:False"]


def test_a_resumed_run_may_take_the_steps_langgraph_allows_it():
    """LangGraph counts a resumed run's limit from the checkpoint it starts at, so such a run
    may take more steps than one given input (which spends two on its input and START)."""
    graph = counting(InMemorySaver(), ask_in="a")
    graph.invoke({"log": []}, cfg())  # stops in "a", the first step
    out = graph.invoke(Command(resume=True), cfg(recursion_limit=2))  # a, b, c: three steps
    assert out["log"] == ["a:3:False", "b:2:False", "c:1:True"]


def test_a_managed_key_is_computed_not_written():
    def echo(state: Steps) -> dict:
        return {**state, "log": ["echo"]}  # hands back what it got, remaining_steps too

    graph = single("echo", echo, schema=Steps)
    assert graph.invoke({"log": [], "remaining_steps": 99}) == {"log": ["echo"]}
    from threadline.managed.is_last_step import RemainingSteps as FromLangGraphPath

    assert FromLangGraphPath is RemainingSteps


@dataclass
class DataSteps:
    log: Annotated[list[str], operator.add] = field(default_factory=list)
    remaining_steps: RemainingSteps = 0


def test_a_dataclass_state_gets_managed_values_too():
    def node(state: DataSteps) -> dict:
        return {"log": [f"left {state.remaining_steps}"]}

    graph = single("node", node, schema=DataSteps)
    assert graph.invoke(DataSteps(), {"recursion_limit": 5}) == {"log": ["left 4"]}


# ------------------------------------------------------------------ chunks of an invoked run
class Question(TypedDict):
    question: str


class Findings(TypedDict):
    findings: str


class Research(Question, Findings):
    notes: str


def research_graph():
    def gather(state: Question) -> dict:
        return {"notes": f"notes on {state['question']}"}

    def conclude(state: Research) -> dict:
        return {"findings": state["notes"].upper()}

    builder = StateGraph(Research, input_schema=Question, output_schema=Findings)
    builder.add_sequence([("gather", gather), ("conclude", conclude)])
    builder.add_edge(START, "gather")
    return builder.compile()


def test_an_invoked_run_shows_only_its_output_keys_in_its_chunks():
    graph = research_graph()
    assert graph.invoke({"question": "owls"}, stream_mode="updates") == [
        {"gather": None},  # wrote only a private key
        {"conclude": {"findings": "NOTES ON OWLS"}},
    ]
    assert graph.invoke({"question": "owls"}, stream_mode=["values"]) == [
        ("values", {"findings": "NOTES ON OWLS"})  # no chunk for steps that wrote none of them
    ]
    # stream() shows every key, as LangGraph's does
    assert next(graph.stream({"question": "owls"})) == {"gather": {"notes": "notes on owls"}}


def test_a_subgraph_streamed_through_its_parent_shows_its_output_keys():
    class Parent(TypedDict):
        question: str
        findings: str

    builder = StateGraph(Parent)
    builder.add_node("research", research_graph())
    builder.add_edge(START, "research")
    parent = builder.compile()
    chunks = [
        (tuple(p.split(":")[0] for p in ns), mode, data)
        for ns, mode, data in parent.stream(
            {"question": "bats"}, subgraphs=True, stream_mode=["updates", "values"]
        )
    ]
    assert chunks == [
        ((), "values", {"question": "bats"}),
        (("research",), "updates", {"gather": None}),
        (("research",), "updates", {"conclude": {"findings": "NOTES ON BATS"}}),
        (("research",), "values", {"findings": "NOTES ON BATS"}),
        ((), "updates", {"research": {"findings": "NOTES ON BATS"}}),
        ((), "values", {"question": "bats", "findings": "NOTES ON BATS"}),
    ]


# ------------------------------------------------------------------ drawing
def test_draw_mermaid_writes_what_langgraph_writes():
    def noop(state: Num) -> dict:
        return {}

    builder = StateGraph(Num)
    for name in ("fetch", "parse", "save", "Zed", "lonely", "my step"):
        builder.add_node(name, noop)
    builder.add_edge(START, "fetch")
    builder.add_edge(START, "Zed")
    route = {"ok": "parse", "skip": "save", "done": END, "my step": "my step"}
    builder.add_conditional_edges("fetch", lambda s: "ok", route)
    builder.add_edge("parse", "save")
    builder.add_edge("Zed", "lonely")  # lonely has no edge out: it ends its branch
    builder.add_edge("save", END)
    builder.add_edge("my step", END)

    assert builder.compile().get_graph().draw_mermaid() == (
        "---\nconfig:\n  flowchart:\n    curve: linear\n---\ngraph TD;\n"
        "\t__start__([<p>__start__</p>]):::first\n"
        "\tfetch(fetch)\n\tparse(parse)\n\tsave(save)\n\tZed(Zed)\n\tlonely(lonely)\n"
        "\tmy\\20step(my step)\n"
        "\t__end__([<p>__end__</p>]):::last\n"
        "\tZed --> lonely;\n"
        "\t__start__ --> Zed;\n"
        "\t__start__ --> fetch;\n"
        "\tfetch -. &nbsp;done&nbsp; .-> __end__;\n"
        "\tfetch -.-> my\\20step;\n"
        "\tfetch -. &nbsp;ok&nbsp; .-> parse;\n"
        "\tfetch -. &nbsp;skip&nbsp; .-> save;\n"
        "\tparse --> save;\n"
        "\tlonely --> __end__;\n"
        "\tmy\\20step --> __end__;\n"
        "\tsave --> __end__;\n"
        "\tclassDef default fill:#f2f0ff,line-height:1.2\n"
        "\tclassDef first fill-opacity:0\n"
        "\tclassDef last fill:#bfb6fc\n"
    )
