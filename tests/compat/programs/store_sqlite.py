"""Memory store on SQLite: SqliteStore.from_conn_string, setup, put/get/search."""

from langgraph.store.sqlite import SqliteStore

with SqliteStore.from_conn_string(":memory:") as store:
    store.setup()
    namespace = ("users", "u1")
    store.put(namespace, "prefs", {"theme": "dark", "lang": "en"})
    store.put(namespace, "profile", {"name": "Ada"})
    store.put(("users", "u2"), "prefs", {"theme": "light", "lang": "fr"})

    item = store.get(namespace, "prefs")
    print(item.key, item.namespace, item.value)
    print(sorted(i.key for i in store.search(namespace)))
    print([(i.namespace, i.key) for i in store.search(("users",), filter={"theme": "light"})])
    print(store.list_namespaces(prefix=("users",)))
    store.delete(namespace, "profile")
    print(sorted(i.key for i in store.search(namespace)))
