"""threadline's benchmark suite: the same workloads on threadline and on LangGraph, side by side.

Run it with ``make bench`` (which builds ``bench/.venv-peer`` with LangGraph 1.2.22 and this
checkout of threadline), or from Python::

    from bench.run import run_suite
    report = run_suite(quick=True)      # about a minute; LangGraph columns are skipped if absent

See ``docs/performance.md`` for the method and the latest figures.
"""
