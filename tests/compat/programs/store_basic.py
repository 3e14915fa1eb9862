"""Persistence concepts: the memory store (put, get, search, delete, list_namespaces)."""

from langgraph.store.memory import InMemoryStore

store = InMemoryStore()

user_id = "1"
namespace_for_memory = (user_id, "memories")

store.put(namespace_for_memory, "a-memory", {"food_preference": "I like pizza"})
store.put(namespace_for_memory, "b-memory", {"food_preference": "I like sushi", "rank": 2})
store.put(("2", "memories"), "c-memory", {"food_preference": "I like soup"})

memories = store.search(namespace_for_memory)
print(len(memories))
for item in memories:
    d = item.dict()
    print(d["namespace"], d["key"], d["value"], sorted(d))

item = store.get(namespace_for_memory, "a-memory")
print(item.value, item.key, item.namespace, item.created_at <= item.updated_at)
print(store.get(namespace_for_memory, "missing"))

print([i.key for i in store.search(namespace_for_memory, filter={"rank": 2})])
print([i.key for i in store.search(("1",))])
print([i.key for i in store.search(namespace_for_memory, limit=1)])
print(sorted(store.list_namespaces()))
print(store.list_namespaces(prefix=("2",)))

store.put(namespace_for_memory, "a-memory", {"food_preference": "I like pasta"})
print(store.get(namespace_for_memory, "a-memory").value)
store.delete(namespace_for_memory, "a-memory")
print(store.get(namespace_for_memory, "a-memory"))
print([i.key for i in store.search(namespace_for_memory)])
