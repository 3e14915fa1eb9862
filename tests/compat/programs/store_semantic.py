"""Memory store: semantic search with an index (a deterministic embedding function)."""

from langgraph.store.memory import InMemoryStore

VOCAB = ["pizza", "sushi", "food", "hiking", "mountains", "code", "python"]


def embed(texts: list[str]) -> list[list[float]]:
    vectors = []
    for text in texts:
        words = text.lower().replace(".", "").split()
        vectors.append([float(sum(w.startswith(v) for w in words)) + 0.01 for v in VOCAB])
    return vectors


store = InMemoryStore(index={"embed": embed, "dims": len(VOCAB), "fields": ["text"]})

namespace = ("user_123", "memories")
store.put(namespace, "1", {"text": "I love pizza and sushi food"})
store.put(namespace, "2", {"text": "I go hiking in the mountains"})
store.put(namespace, "3", {"text": "I write python code"})
store.put(namespace, "4", {"text": "not indexed", "other": "pizza"}, index=False)

for query in ["what food do I like?", "do I like mountains", "python"]:
    items = store.search(namespace, query=query, limit=2)
    print(query, [(item.key, round(item.score, 4)) for item in items])

items = store.search(namespace, query="pizza", filter={"text": "I write python code"})
print([(item.key, round(item.score, 4)) for item in items])
print([item.score for item in store.search(namespace)])
