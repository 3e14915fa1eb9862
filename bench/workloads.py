"""The workloads, written once and built for each library from its own classes (see ``libs.py``).

Each case is a context manager factory ``factory(lib, env, scale)`` that prepares whatever is
slow to set up (a saver, a thread with 1,000 checkpoints) and yields ``measure()``: one
repetition, returning ``{metric_key: value}``. The runner calls ``measure`` for both libraries
in turn (A, B, B, A, ...), so both see the same machine state.

Every timed call checks its result (``check``): a run that fails or returns the wrong state
raises, and is reported as a failure instead of producing a figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import operator
import os
import random
import string
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypedDict

from bench.backends import CommitCounter, Env, Store, opener
from bench.libs import Lib
from bench.measures import Factory, Measure, Scale, check, median, now

# ------------------------------------------------------------------------------ helpers


def _open(backend: str, lib: Lib, env: Env) -> contextlib.AbstractContextManager[Store]:
    return opener(backend, lib.name).open(env)


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _kwargs(store: Store, durability: str | None) -> dict[str, Any]:
    return {"durability": durability} if durability and store.saver is not None else {}


def _stored(store: Store) -> int | None:
    return store.bytes_stored() if store.bytes_stored is not None else None


# ------------------------------------------------------------------------------ (a) chain


class ChainState(TypedDict, total=False):
    n: int


def _inc(state: ChainState) -> dict[str, int]:
    return {"n": state["n"] + 1}


async def _ainc(state: ChainState) -> dict[str, int]:
    return {"n": state["n"] + 1}


def chain_graph(lib: Lib, nodes: int, fn: Callable[..., Any] = _inc) -> Any:
    g = lib.StateGraph(ChainState)
    previous = lib.START
    for i in range(nodes):
        name = f"step_{i:03d}"
        g.add_node(name, fn)
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, lib.END)
    return g


def chain_case(backend: str, durability: str | None) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        n = scale.chain_nodes
        with _open(backend, lib, env) as store:
            graph = chain_graph(lib, n).compile(checkpointer=store.saver)
            kwargs = _kwargs(store, durability)
            ids = itertools.count()

            def run_once() -> tuple[float, dict[str, Any]]:
                config = _config(f"chain-{next(ids)}")
                t0 = now()
                out = graph.invoke({"n": 0}, config, **kwargs)
                elapsed = now() - t0
                check(out["n"] == n, f"chain ended with n={out.get('n')!r}, expected {n}")
                return elapsed, config

            run_once()  # warm-up: imports, caches, lazily created tables
            commits = saved_per_run = None
            if store.sqlite_conn is not None:  # one untimed run with the statement trace on
                with CommitCounter(store.sqlite_conn) as counter:
                    _, counted = run_once()
                saved_per_run = _history_len(graph, counted)
                commits = counter.write_commits / saved_per_run

            def measure() -> dict[str, float]:
                times = []
                for _ in range(scale.chain_invokes):
                    elapsed, config = run_once()
                    times.append(elapsed)
                if store.saver is not None:  # what was saved is the final state, too
                    saved = graph.get_state(config).values
                    check(saved.get("n") == n, f"saved state has n={saved.get('n')!r}")
                result = {"us_per_step": median(times) / n * 1e6}
                if commits is not None:
                    result["commits_per_checkpoint"] = commits
                    result["checkpoints_per_run"] = saved_per_run
                return result

            yield measure

    return factory


# ------------------------------------------------------------------------------ (b) conversation


class ChatState(TypedDict, total=False):
    messages: Annotated[list[dict], operator.add]


_rng = random.Random(20261122)
_ALPHABET = string.ascii_letters + string.digits + " .,"
# Random text so that compression (PostgreSQL TOAST) does not make a 1 KB message tiny.
_TEXTS = ["".join(_rng.choices(_ALPHABET, k=1000)) for _ in range(64)]


def _message(role: str, turn: int) -> dict[str, Any]:
    return {"role": role, "turn": turn, "content": _TEXTS[(turn * 2 + (role == "ai")) % 64]}


def _reply(state: ChatState) -> dict[str, list[dict]]:
    last = state["messages"][-1]
    return {"messages": [_message("ai", last["turn"])]}


def chat_graph(lib: Lib) -> Any:
    g = lib.StateGraph(ChatState)
    g.add_node("reply", _reply)
    g.add_edge(lib.START, "reply")
    g.add_edge("reply", lib.END)
    return g


def conversation_case(backend: str) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        turns = scale.turns

        def measure() -> dict[str, float]:
            with _open(backend, lib, env) as store:  # a fresh database for each repetition
                graph = chat_graph(lib).compile(checkpointer=store.saver)
                config = _config("conversation")
                latencies = []
                out: dict[str, Any] = {}
                for turn in range(turns):
                    t0 = now()
                    out = graph.invoke({"messages": [_message("human", turn)]}, config)
                    latencies.append(now() - t0)
                    msgs = out["messages"]
                    check(
                        len(msgs) == 2 * (turn + 1) and msgs[-1]["turn"] == turn,
                        f"turn {turn}: {len(msgs)} messages, expected {2 * (turn + 1)}",
                    )
                raw = sum(len(json.dumps(m).encode()) for m in out["messages"])
                stored = _stored(store)
            early = median(latencies[5:15])
            late = median(latencies[-10:])
            result = {
                "turn_early_ms": early * 1e3,
                "turn_late_ms": late * 1e3,
                "late_over_early": late / early,
                "raw_bytes": raw,
            }
            if stored is not None:
                result["bytes"] = stored
                result["bytes_over_raw"] = stored / raw
            return result

        yield measure

    return factory


# ------------------------------------------------------------------------------ (c) big value


class BlobState(TypedDict, total=False):
    blob: bytes
    k: int


_PAYLOADS: dict[int, bytes] = {}


def payload(size: int) -> bytes:
    if size not in _PAYLOADS:
        _PAYLOADS[size] = os.urandom(size)  # incompressible
    return _PAYLOADS[size]


def blob_graph(lib: Lib, size: int, touches: int = 9) -> Any:
    data = payload(size)

    def make(state: BlobState) -> dict[str, Any]:
        return {"blob": data, "k": 0}

    g = lib.StateGraph(BlobState)
    g.add_node("make", make)
    g.add_edge(lib.START, "make")
    previous = "make"
    for i in range(touches):
        name = f"touch_{i}"
        g.add_node(name, _touch)
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, lib.END)
    return g


def _touch(state: BlobState) -> dict[str, int]:
    return {"k": state["k"] + 1}


def blob_case(backend: str, size: int) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        data = payload(size)
        steps = 10

        def measure() -> dict[str, float]:
            with _open(backend, lib, env) as store:  # fresh storage: bytes are this run's only
                graph = blob_graph(lib, size).compile(checkpointer=store.saver)
                t0 = now()
                out = graph.invoke({"k": 0}, _config("blob"))
                elapsed = now() - t0
                check(out["k"] == steps - 1, f"k={out.get('k')!r}, expected {steps - 1}")
                check(out["blob"] == data, "the big value came back changed")
                stored = _stored(store)
            result = {"ms_per_step": elapsed / steps * 1e3}
            if stored is not None:
                result["bytes"] = stored
                result["bytes_over_value"] = stored / size
            return result

        yield measure

    return factory


# ------------------------------------------------------------------------------ (d) interrupt


class AskState(TypedDict, total=False):
    request: str
    answer: str
    done: bool


def ask_graph(lib: Lib) -> Any:
    def ask(state: AskState) -> dict[str, Any]:
        return {"answer": lib.interrupt({"question": f"approve {state['request']}?"})}

    def finish(state: AskState) -> dict[str, Any]:
        return {"done": True}

    g = lib.StateGraph(AskState)
    g.add_node("ask", ask)
    g.add_node("finish", finish)
    g.add_edge(lib.START, "ask")
    g.add_edge("ask", "finish")
    g.add_edge("finish", lib.END)
    return g


def _history_len(graph: Any, config: dict[str, Any]) -> int:
    return sum(1 for _ in graph.get_state_history(config))


def interrupt_case(backend: str) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        with _open(backend, lib, env) as store:
            graph = ask_graph(lib).compile(checkpointer=store.saver)
            ids = itertools.count()

            def cycle(config: dict[str, Any]) -> float:
                t0 = now()
                paused = graph.invoke({"request": "refund", "done": False}, config)
                check("__interrupt__" in paused, f"did not stop at the interrupt: {paused!r}")
                check(not paused.get("done"), "ran past the interrupt")
                out = graph.invoke(lib.Command(resume="yes"), config)
                elapsed = now() - t0
                check(
                    out.get("answer") == "yes" and out.get("done") is True, f"resume gave {out!r}"
                )
                return elapsed

            old = _config("long-thread")
            cycle(old)
            cycle(_config(f"fresh-{next(ids)}"))  # warm-up
            per_cycle = _history_len(graph, old)
            for _ in range(-(-scale.history // per_cycle) - 1):
                cycle(old)
            history = _history_len(graph, old)
            check(history >= scale.history, f"only {history} checkpoints on the long thread")

            def measure() -> dict[str, float]:
                fresh, long = [], []
                for _ in range(scale.cycles):
                    fresh.append(cycle(_config(f"fresh-{next(ids)}")))
                    long.append(cycle(old))
                f, h = median(fresh), median(long)
                return {
                    "fresh_ms": f * 1e3,
                    "history_ms": h * 1e3,
                    "history_over_fresh": h / f,
                    "history_checkpoints": history,
                }

            yield measure

    return factory


# ------------------------------------------------------------------------------ (e) history


def history_case(backend: str) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        n = scale.chain_nodes
        with _open(backend, lib, env) as store:
            graph = chain_graph(lib, n).compile(checkpointer=store.saver)
            config = _config("listed")
            while True:
                out = graph.invoke({"n": 0}, config)
                check(out["n"] == n, f"chain ended with n={out.get('n')!r}")
                if _history_len(graph, config) >= scale.history:
                    break
            limit = scale.history

            def measure() -> dict[str, float]:
                times = []
                for _ in range(scale.listings):
                    t0 = now()
                    snaps = list(graph.get_state_history(config, limit=limit))
                    times.append(now() - t0)
                    check(len(snaps) == limit, f"listed {len(snaps)} checkpoints, not {limit}")
                    check(snaps[0].values.get("n") == n, "newest checkpoint has the wrong state")
                t = median(times)
                return {"ms": t * 1e3, "us_per_checkpoint": t / limit * 1e6}

            yield measure

    return factory


# ------------------------------------------------------------------------------ (f) fan-out


class FanState(TypedDict, total=False):
    width: int
    results: Annotated[list[int], operator.add]


def _fan(state: FanState) -> dict[str, Any]:
    return {}


def _work(arg: dict[str, int]) -> dict[str, list[int]]:
    return {"results": [arg["i"]]}


def fan_graph(lib: Lib) -> Any:
    def route(state: FanState) -> list[Any]:
        return [lib.Send("work", {"i": i}) for i in range(state["width"])]

    g = lib.StateGraph(FanState)
    g.add_node("fan", _fan)
    g.add_node("work", _work)
    g.add_edge(lib.START, "fan")
    g.add_conditional_edges("fan", route)
    g.add_edge("work", lib.END)
    return g


def fanout_case(backend: str) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        wide = scale.fanout
        with _open(backend, lib, env) as store:
            graph = fan_graph(lib).compile(checkpointer=store.saver)
            ids = itertools.count()

            def run_once(width: int) -> float:
                t0 = now()
                out = graph.invoke({"width": width, "results": []}, _config(f"fan-{next(ids)}"))
                elapsed = now() - t0
                check(
                    sorted(out["results"]) == list(range(width)),
                    f"{len(out['results'])} results from {width} branches",
                )
                return elapsed

            run_once(1)
            run_once(wide)

            def measure() -> dict[str, float]:
                one, many = [], []
                for _ in range(scale.fanout_invokes):
                    one.append(run_once(1))
                    many.append(run_once(wide))
                t1, tn = median(one), median(many)
                return {
                    "one_ms": t1 * 1e3,
                    "wide_ms": tn * 1e3,
                    "us_per_branch": (tn - t1) / (wide - 1) * 1e6,
                }

            yield measure

    return factory


# ------------------------------------------------------------------------------ (g) concurrency


def concurrency_case(backend: str) -> Factory:
    @contextlib.contextmanager
    def factory(lib: Lib, env: Env, scale: Scale) -> Iterator[Measure]:
        n, threads = scale.async_nodes, scale.threads
        loop = asyncio.new_event_loop()
        stack = contextlib.AsyncExitStack()
        try:
            store = loop.run_until_complete(
                stack.enter_async_context(opener(backend, lib.name).async_open(env))
            )
            graph = chain_graph(lib, n, _ainc).compile(checkpointer=store.saver)
            ids = itertools.count()

            async def burst() -> float:
                rep = next(ids)
                configs = [_config(f"conc-{rep}-{i}") for i in range(threads)]
                t0 = now()
                # return_exceptions: every run finishes before we look, none is left running.
                outs = await asyncio.gather(
                    *(graph.ainvoke({"n": 0}, c) for c in configs), return_exceptions=True
                )
                elapsed = now() - t0
                errors = [o for o in outs if isinstance(o, BaseException)]
                if errors:
                    raise errors[0]
                bad = [o for o in outs if o.get("n") != n]
                check(not bad, f"{len(bad)} of {threads} threads ended with the wrong n")
                return elapsed

            loop.run_until_complete(burst())  # warm-up (pool connections, tables)

            def measure() -> dict[str, float]:
                elapsed = loop.run_until_complete(burst())
                return {"steps_per_s": threads * n / elapsed, "wall_ms": elapsed * 1e3}

            yield measure
        finally:
            try:
                loop.run_until_complete(stack.aclose())
            finally:
                loop.close()

    return factory
