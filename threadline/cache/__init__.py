"""Caches for node results (``add_node(..., cache_policy=CachePolicy(...))``,
``compile(cache=...)``): ``InMemoryCache`` in ``threadline.cache.memory`` and ``SqliteCache`` in
``threadline.cache.sqlite``, as LangGraph names them."""
