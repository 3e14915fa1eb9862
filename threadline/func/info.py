"""``get_task_context()``: what a running task call or node knows about itself."""

from __future__ import annotations

from threadline.func.call import CallInfo, current_call
from threadline.runtime.context import current_task


def get_task_context() -> CallInfo:
    """The running ``@task`` call (or graph node): its name and a stable ``idempotency_key``.

    The key is the same each time this call runs again for the same checkpoint (a retry, a
    resume after an interrupt, a run continued after a crash) and unique otherwise, so an
    external API that deduplicates by key performs the side effect once.
    """
    call = current_call()
    if call is not None:
        return call
    ctx = current_task()
    if ctx is None:
        raise RuntimeError(
            "get_task_context() can only be called inside a running @task, entrypoint or node"
        )
    return CallInfo(ctx.name, ctx.task_id, 0, 1, ctx.name)
