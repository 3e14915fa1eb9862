"""Memory store on PostgreSQL: PostgresStore.from_conn_string, setup, put/get/search."""

import os
import uuid

from langgraph.store.postgres import PostgresStore

DB_URI = os.environ.get("THREADLINE_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")

user = f"compat-{uuid.uuid4()}"
with PostgresStore.from_conn_string(DB_URI) as store:
    store.setup()
    namespace = ("memories", user)
    try:
        store.put(namespace, "1", {"food": "pizza", "rank": 1})
        store.put(namespace, "2", {"food": "sushi", "rank": 2})
        print(store.get(namespace, "1").value)
        print(sorted(i.key for i in store.search(namespace)))
        print([i.value["food"] for i in store.search(namespace, filter={"rank": 2})])
        print(store.get(namespace, "3"))
    finally:
        store.delete(namespace, "1")
        store.delete(namespace, "2")
    print(store.search(namespace))
