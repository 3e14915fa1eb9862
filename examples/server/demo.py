"""The server demo: ``threadline serve`` on SQLite, and a client that answers a refund over HTTP.

    python examples/server/demo.py          # what `make serve-demo` runs; Ctrl-C stops it
    python examples/server/demo.py --exit   # the same, stopping the server at the end

It starts the server in its own process, then with LangGraph's own client (``langgraph-sdk``):
starts a run that stops for a person, lists the threads waiting for one, approves the refund,
and prints the outcome. It then leaves a second refund waiting and keeps serving, so the
approval can be given from any other client or the web page.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from langgraph_sdk import get_client

HERE = Path(__file__).resolve().parent


# THREADLINE_DEMO_DB lets the test suite run the demo on a file of its own.
DB = Path(os.environ.get("THREADLINE_DEMO_DB") or HERE.parent.parent / ".demo" / "server.db")


def start_server(port: int) -> subprocess.Popen[bytes]:
    """``threadline serve`` on a fresh SQLite file, in a process of its own."""
    DB.parent.mkdir(parents=True, exist_ok=True)
    for old in DB.parent.glob(DB.name + "*"):  # the demo starts from no threads
        old.unlink()
    config = str(HERE / "threadline.toml")
    command = [sys.executable, "-m", "threadline.cli", "serve", "--config", config]
    command += ["--port", str(port), "--db", f"sqlite:///{DB}"]
    server = subprocess.Popen(command)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ok", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not start; see its output above")


async def answer_one(url: str) -> None:
    client = get_client(url=url)
    thread = await client.threads.create(metadata={"team": "refunds"})
    request = {"customer": "Ada", "amount": 42.0}
    async for part in client.runs.stream(
        thread["thread_id"], "refunds", input=request, stream_mode="updates"
    ):
        if part.event == "updates":
            print("  step:", part.data)
    waiting = await client.threads.search(status="interrupted", metadata={"team": "refunds"})
    print(f"{len(waiting)} thread(s) wait for a person:")
    for t in waiting:
        for asked in t["interrupts"].values():
            print(f"  {t['thread_id']}: {asked[0]['value']['question']}")
    answer = {"decision": "approve", "note": "loyal customer"}
    done = await client.runs.wait(thread["thread_id"], "refunds", command={"resume": answer})
    print("approved over HTTP; the thread's log:", done["log"])
    second = await client.threads.create(metadata={"team": "refunds"})
    await client.runs.wait(second["thread_id"], "refunds", input={"customer": "Bo", "amount": 7.5})
    print(f"a second refund waits: thread {second['thread_id']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exit", action="store_true", help="stop the server at the end")
    parser.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", 2024)))
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}"
    server = start_server(args.port)
    try:
        asyncio.run(answer_one(url))
        if not args.exit:
            print(f"serving on {url} (web page: {url}/ui/); Ctrl-C stops it")
            server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.terminate()
        server.wait(timeout=20)


if __name__ == "__main__":
    main()
