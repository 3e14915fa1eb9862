"""Semantic search: ``index={"embed", "dims", "fields"}`` and ``search(query=...)``.

The embedding is a deterministic bag of words over a small vocabulary (no model can be
downloaded here), so every score is a cosine that can be worked out by hand.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from store_backends import FakeClock, postgres_schema

from threadline.errors import InvalidStoreInputError
from threadline.store import BaseStore, InMemoryStore, SearchItem, SqliteStore

VOCAB = ["apple", "pie", "red", "sky", "blue", "tart"]


def bag_of_words(texts: list[str]) -> list[list[float]]:
    """One dimension per vocabulary word, counting its occurrences."""
    return [[float(text.lower().split().count(word)) for word in VOCAB] for text in texts]


INDEX = {"embed": bag_of_words, "dims": len(VOCAB), "fields": ["text"]}


@contextmanager
def memory_store(tmp_path: Path, **index: Any) -> Iterator[BaseStore]:
    yield InMemoryStore(index={**INDEX, **index}, clock=FakeClock())


@contextmanager
def sqlite_store(tmp_path: Path, **index: Any) -> Iterator[BaseStore]:
    with SqliteStore(tmp_path / "store.db", index={**INDEX, **index}, clock=FakeClock()) as s:
        yield s


@contextmanager
def postgres_store(tmp_path: Path, **index: Any) -> Iterator[BaseStore]:
    with postgres_schema() as (url, schema):
        from threadline.store import PostgresStore

        with PostgresStore(url, schema=schema, index={**INDEX, **index}, clock=FakeClock()) as s:
            yield s


MAKERS = [memory_store, sqlite_store, postgres_store]


@pytest.fixture(params=MAKERS, ids=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    with request.param(tmp_path) as s:
        yield s


def ranked(items: list[SearchItem]) -> list[tuple[str, float | None]]:
    return [(it.key, None if it.score is None else round(it.score, 9)) for it in items]


def test_query_ranks_by_cosine_similarity(store: BaseStore) -> None:
    store.put(("docs",), "pie", {"text": "red apple pie"})
    store.put(("docs",), "sky", {"text": "blue sky"})
    store.put(("docs",), "apple", {"text": "apple"})
    found = store.search(("docs",), query="apple")
    assert ranked(found) == [("apple", 1.0), ("pie", round(1 / math.sqrt(3), 9)), ("sky", 0.0)]
    assert all(isinstance(it, SearchItem) for it in found)


def test_no_query_means_no_score(store: BaseStore) -> None:
    store.put(("docs",), "pie", {"text": "red apple pie"})
    [item] = store.search(("docs",))
    assert item.score is None
    assert item.dict()["score"] is None


def test_filter_limit_and_offset_apply_to_ranked_results(store: BaseStore) -> None:
    for key, text, n in [("a", "apple", 1), ("b", "apple pie", 2), ("c", "apple pie red", 3)]:
        store.put(("docs",), key, {"text": text, "n": n})
    assert [it.key for it in store.search(("docs",), query="apple")] == ["a", "b", "c"]
    assert [it.key for it in store.search(("docs",), query="apple", limit=1, offset=1)] == ["b"]
    filtered = store.search(("docs",), query="apple", filter={"n": {"$gte": 2}})
    assert [it.key for it in filtered] == ["b", "c"]
    assert [it.key for it in store.search(("other",), query="apple")] == []


def test_field_paths_choose_what_is_embedded(tmp_path: Path) -> None:
    fields = ["metadata.title", "items[*].name"]
    for make in MAKERS:
        (folder := tmp_path / make.__name__).mkdir()
        with make(folder, fields=fields) as store:
            store.put(("docs",), "nested", {"metadata": {"title": "blue sky"}, "text": "apple"})
            store.put(("docs",), "listed", {"items": [{"name": "red tart"}, {"name": "apple"}]})
            # "listed" has two vectors; its best one ("apple") decides its score.
            assert ranked(store.search(("docs",), query="apple")) == [
                ("listed", 1.0),
                ("nested", 0.0),
            ]
            assert ranked(store.search(("docs",), query="sky")) == [
                ("nested", round(1 / math.sqrt(2), 9)),
                ("listed", 0.0),
            ]


def test_put_index_overrides_the_fields(tmp_path: Path) -> None:
    for make in MAKERS:
        (folder := tmp_path / make.__name__).mkdir()
        with make(folder) as store:
            store.put(("docs",), "k", {"text": "blue sky", "note": "apple"}, index=["note"])
            assert ranked(store.search(("docs",), query="apple")) == [("k", 1.0)]


def test_index_false_item_is_unscored_in_memory_and_absent_in_sql(store: BaseStore) -> None:
    """As in LangGraph: its InMemoryStore lists unembedded items last with no score; its SQL
    stores only return items that have vectors."""
    store.put(("docs",), "plain", {"text": "apple"}, index=False)
    store.put(("docs",), "pie", {"text": "apple pie"})
    pie = ("pie", round(1 / math.sqrt(2), 9))
    expected = [pie, ("plain", None)] if isinstance(store, InMemoryStore) else [pie]
    assert ranked(store.search(("docs",), query="apple")) == expected
    assert len(store.search(("docs",))) == 2  # without a query both are found, unscored


def test_replacing_a_value_replaces_its_vectors(store: BaseStore) -> None:
    store.put(("docs",), "k", {"text": "apple"})
    store.put(("docs",), "k", {"text": "blue sky"})
    assert ranked(store.search(("docs",), query="apple")) == [("k", 0.0)]
    store.put(("docs",), "k", {"text": "apple"}, index=False)  # no vectors now
    unscored = [("k", None)] if isinstance(store, InMemoryStore) else []
    assert ranked(store.search(("docs",), query="apple")) == unscored


def test_deleted_and_expired_items_are_not_found(store: BaseStore) -> None:
    clock: FakeClock = store._clock  # type: ignore[assignment]
    store.put(("docs",), "gone", {"text": "apple"})
    store.put(("docs",), "brief", {"text": "apple pie"}, ttl=10)
    store.put(("docs",), "kept", {"text": "red apple"})
    store.delete(("docs",), "gone")
    clock.advance(11)
    assert [it.key for it in store.search(("docs",), query="apple")] == ["kept"]


def test_scores_agree_across_backends(tmp_path: Path) -> None:
    """Every backend computes the same cosine, bit for bit, and ranks ties alike."""
    texts = ["apple pie", "red apple pie tart", "sky", "blue sky apple", "tart tart pie", ""]
    results = []
    for make in MAKERS:
        (folder := tmp_path / make.__name__).mkdir()
        with make(folder) as store:
            for i, text in enumerate(texts):
                store.put(("docs",), f"k{i}", {"text": text})
            found = store.search(("docs",), query="apple tart pie", limit=100)
            results.append([(it.key, it.score) for it in found if it.score])
    assert results[0] == results[1] == results[2]
    assert [key for key, _ in results[0]] == ["k1", "k0", "k4", "k3"]


def test_sqlite_triggers_drop_vectors_with_their_item(tmp_path: Path) -> None:
    with sqlite_store(tmp_path) as store:
        store.put(("docs",), "a", {"text": "apple"})
        store.put(("docs",), "b", {"text": "apple"}, ttl=1)
        store.delete(("docs",), "a")
        store._clock.advance(2)  # type: ignore[attr-defined]
        assert store.sweep_expired() == 1  # type: ignore[attr-defined]
    with sqlite3.connect(tmp_path / "store.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM threadline_store_vectors").fetchone() == (0,)


def test_sqlite_keeps_vectors_across_reopening(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def counting(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return bag_of_words(texts)

    path = tmp_path / "kept.db"
    index = {**INDEX, "embed": counting}
    with SqliteStore(path, index=index) as store:
        store.put(("docs",), "pie", {"text": "apple pie"})
    calls.clear()
    with SqliteStore(path, index=index) as store:
        assert ranked(store.search(("docs",), query="pie")) == [("pie", round(1 / math.sqrt(2), 9))]
    assert calls == [["pie"]]  # only the query was embedded
    with pytest.raises(InvalidStoreInputError, match="vectors of 6 dims, but index says dims=3"):
        SqliteStore(path, index={**index, "dims": 3})


def test_sqlite_schema_1_file_gains_the_vectors_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteStore(path) as store:
        store.put(("docs",), "old", {"text": "apple"})
    with sqlite3.connect(path) as conn:  # what a schema-1 file looked like
        conn.execute("DROP TRIGGER threadline_store_drop_vectors")
        conn.execute("DROP TRIGGER threadline_store_replace_vectors")
        conn.execute("DROP TABLE threadline_store_vectors")
        conn.execute("UPDATE threadline_store_schema_version SET version = 1")
    with SqliteStore(path, index=INDEX) as store:
        store.put(("docs",), "new", {"text": "apple pie"})
        # Items written before the index existed have no vectors (as in LangGraph).
        assert [it.key for it in store.search(("docs",), query="apple")] == ["new"]
        assert {it.key for it in store.search(("docs",))} == {"old", "new"}
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM threadline_store_schema_version").fetchall() == [
            (2,)
        ]


def test_langchain_style_embeddings_object() -> None:
    class Embeddings:
        """The two methods LangChain's ``Embeddings`` interface requires."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return bag_of_words(texts)

        def embed_query(self, text: str) -> list[float]:
            return bag_of_words([text])[0]

    store = InMemoryStore(index={"embed": Embeddings(), "dims": len(VOCAB), "fields": ["text"]})
    store.put(("docs",), "pie", {"text": "apple pie"})
    assert ranked(store.search(("docs",), query="pie")) == [("pie", round(1 / math.sqrt(2), 9))]

    async def main() -> list[SearchItem]:  # no aembed_* methods: the sync ones run in a thread
        await store.aput(("docs",), "sky", {"text": "blue sky"})
        return await store.asearch(("docs",), query="sky")

    assert [it.key for it in asyncio.run(main())] == ["sky", "pie"]


def test_async_embed_function(tmp_path: Path) -> None:
    async def embed(texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(0)
        return bag_of_words(texts)

    with SqliteStore(tmp_path / "a.db", index={**INDEX, "embed": embed}) as store:
        with pytest.raises(InvalidStoreInputError, match="async, so the sync store methods"):
            store.put(("docs",), "k", {"text": "apple"})

        async def main() -> list[SearchItem]:
            await store.aput(("docs",), "k", {"text": "apple"})
            await store.aput(("docs",), "j", {"text": "sky"})
            return await store.asearch(("docs",), query="apple")

        assert ranked(asyncio.run(main())) == [("k", 1.0), ("j", 0.0)]


def test_default_fields_embed_the_whole_value() -> None:
    seen: list[str] = []

    def embed(texts: list[str]) -> list[list[float]]:
        seen.extend(texts)
        return bag_of_words(texts)

    store = InMemoryStore(index={"embed": embed, "dims": len(VOCAB)})
    store.put(("docs",), "k", {"text": "apple", "n": 1})
    assert seen == ['{"n": 1, "text": "apple"}']  # JSON with sorted keys, as LangGraph embeds it


def test_bad_embeddings_are_named(store: BaseStore) -> None:
    short = InMemoryStore(index={**INDEX, "embed": lambda texts: [[1.0, 2.0] for _ in texts]})
    with pytest.raises(InvalidStoreInputError, match=r"vector of 2 numbers.*dims=6"):
        short.put(("docs",), "k", {"text": "apple"})
    empty = InMemoryStore(index={**INDEX, "embed": lambda texts: []})
    with pytest.raises(InvalidStoreInputError, match="returned 0 vectors for 1 texts"):
        empty.search(("docs",), query="apple")
    with pytest.raises(InvalidStoreInputError, match="put index must be False, None or a list"):
        store.put(("docs",), "k", {"text": "apple"}, index="text")  # type: ignore[arg-type]
    with pytest.raises(InvalidStoreInputError, match="query must be a string"):
        store.search(("docs",), query=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ({"embed": bag_of_words}, "dims must be a positive int"),
        ({"dims": 3}, "index needs 'embed'"),
        ({**INDEX, "distance_type": "l2"}, "distance_type 'l2' is not supported"),
        ({**INDEX, "dimensions": 3}, r"unsupported index option\(s\) \['dimensions'\]"),
        ({**INDEX, "fields": "text"}, "fields must be a list of paths"),
        ({**INDEX, "fields": ["items[*"]}, "has an unclosed"),
        ({**INDEX, "embed": 42}, "must be a function, an Embeddings object or a string"),
    ],
)
def test_bad_index_configuration(index: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidStoreInputError, match=message):
        InMemoryStore(index=index)


def test_query_without_index_is_ignored_with_a_warning() -> None:
    store = InMemoryStore()
    store.put(("docs",), "k", {"text": "apple"}, index=["text"])  # accepted, as in LangGraph
    with pytest.warns(UserWarning, match="without index=..., so search ignores query='apple'"):
        [item] = store.search(("docs",), query="apple")
    assert item.score is None


def test_same_output_as_langgraph_in_memory_store() -> None:
    """What LangGraph 1.2.22's ``InMemoryStore`` printed for this program, order and scores."""
    store = InMemoryStore(index=INDEX)
    store.put(("docs", "b"), "k2", {"text": "red apple pie"})
    store.put(("docs", "a"), "k1", {"text": "apple tart"})
    store.put(("docs", "b"), "k3", {"text": "blue sky"})
    store.put(("docs", "b"), "k2", {"text": "red apple"})  # an update keeps its place
    store.put(("docs", "a"), "k0", {"text": "apple"}, index=False)
    assert [(it.namespace, it.key) for it in store.search(("docs",))] == [
        (("docs", "b"), "k2"),
        (("docs", "b"), "k3"),
        (("docs", "a"), "k1"),
        (("docs", "a"), "k0"),
    ]
    # Equal scores keep insertion order; the unembedded item comes last, unscored.
    assert ranked(store.search(("docs",), query="apple")) == [
        ("k2", 0.707106781),
        ("k1", 0.707106781),
        ("k3", 0.0),
        ("k0", None),
    ]
    assert ranked(store.search(("docs",), query="apple", limit=2, offset=1)) == [
        ("k1", 0.707106781),
        ("k3", 0.0),
    ]
    assert ranked(store.search(("docs",), query="apple", offset=3)) == [("k0", None)]


def test_semantic_memory_in_a_graph_prints_what_langgraph_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LangGraph's semantic-memory how-to, with a word-stem embedding instead of a model; the
    printed lines are what LangGraph 1.2.22 printed for the same program."""
    from typing import TypedDict

    from threadline import END, START, StateGraph

    topics = ["pizza", "italian", "food", "hungry", "engineer", "code"]

    def embed(texts: list[str]) -> list[list[float]]:
        words = [[w.strip(".,'!") for w in text.lower().split()] for text in texts]
        return [[float(sum(w.startswith(t[:4]) for w in ws)) for t in topics] for ws in words]

    store = InMemoryStore(index={"embed": embed, "dims": len(topics)})
    store.put(("user_123", "memories"), "1", {"text": "I love pizza"})
    store.put(("user_123", "memories"), "2", {"text": "I prefer Italian food"})
    store.put(("user_123", "memories"), "3", {"text": "I am a software engineer who writes code"})
    for item in store.search(("user_123", "memories"), query="I'm hungry for pizza", limit=2):
        print(f"Memory: {item.value['text']} (similarity: {item.score})")

    class State(TypedDict):
        question: str
        answer: str

    def chat(state: State, *, store: BaseStore) -> dict[str, str]:
        items = store.search(("user_123", "memories"), query=state["question"], limit=2)
        return {"answer": "; ".join(f"{i.value['text']}={i.score:.3f}" for i in items)}

    builder = StateGraph(State)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    print(builder.compile(store=store).invoke({"question": "italian food please"}))
    assert capsys.readouterr().out.splitlines() == [
        "Memory: I love pizza (similarity: 0.7071067811865475)",
        "Memory: I prefer Italian food (similarity: 0.0)",
        "{'question': 'italian food please', 'answer': 'I prefer Italian food=1.000; "
        "I love pizza=0.000'}",
    ]
