// Drives a threadline server with LangGraph's JavaScript client (@langchain/langgraph-sdk)
// and prints what it saw as one JSON object. Usage: node interop.mjs http://127.0.0.1:PORT
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.argv[2], defaultHeaders: {} });
const results = {};

async function step(name, fn) {
  try {
    results[name] = await fn();
  } catch (error) {
    results[name] = { thrown: String(error?.message ?? error), status: error?.status ?? null };
  }
}

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push({ event: part.event, data: part.data });
  return parts;
}

async function thrown(fn) {
  try {
    await fn();
    return { status: null };
  } catch (error) {
    return { status: error?.status ?? null, message: String(error?.message ?? error) };
  }
}

await step("assistants", async () => {
  const found = await client.assistants.search({ graphId: "counter" });
  const byName = await client.assistants.get("counter");
  const byId = await client.assistants.get(found[0].assistant_id);
  return { found: found.map((a) => a.graph_id), same: byName.assistant_id === byId.assistant_id };
});

let threadId;
await step("threads", async () => {
  const thread = await client.threads.create({ metadata: { via: "js" } });
  threadId = thread.thread_id;
  const waited = await client.runs.wait(threadId, "counter", { input: { n: 1 } });
  const searched = await client.threads.search({ metadata: { via: "js" }, status: "idle" });
  const state = await client.threads.getState(threadId);
  const history = await client.threads.getHistory(threadId, { limit: 2 });
  const updated = await client.threads.updateState(threadId, { values: { n: 0 }, asNode: "tick" });
  const after = await client.threads.getState(threadId);
  return {
    waited,
    searched: searched.map((t) => t.thread_id === threadId),
    state: state.values,
    historyLength: history.length,
    historyFirst: history[0].values,
    updatedCheckpoint: updated.checkpoint.checkpoint_id === after.checkpoint.checkpoint_id,
    after: { values: after.values, next: after.next },
  };
});

for (const mode of ["values", "updates", "messages-tuple", "custom"]) {
  await step(`stream_${mode}`, async () => {
    const thread = await client.threads.create();
    if (mode === "custom") {
      await client.runs.wait(thread.thread_id, "approval", { input: { request: "r" } });
      return collect(
        client.runs.stream(thread.thread_id, "approval", {
          command: { resume: "yes" },
          streamMode: "custom",
        })
      );
    }
    const [graph, input] =
      mode === "messages-tuple"
        ? ["chat", { messages: [{ type: "human", content: "hi js" }] }]
        : ["counter", { n: 1 }];
    return collect(client.runs.stream(thread.thread_id, graph, { input, streamMode: mode }));
  });
}

await step("interrupt", async () => {
  const thread = await client.threads.create();
  const asked = await client.runs.wait(thread.thread_id, "approval", {
    input: { request: "refund" },
  });
  const status = (await client.threads.get(thread.thread_id)).status;
  const done = await client.runs.wait(thread.thread_id, "approval", {
    command: { resume: "approved" },
  });
  return { asked: asked.__interrupt__, status, done };
});

await step("background", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "counter", { input: { n: 0 } });
  const joined = await client.runs.join(thread.thread_id, run.run_id);
  const got = await client.runs.get(thread.thread_id, run.run_id);
  return { joined, status: got.status };
});

await step("joinStream", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "counter", {
    input: { n: 1 },
    streamMode: ["values"],
    streamResumable: true,
  });
  await client.runs.join(thread.thread_id, run.run_id);
  const all = [];
  for await (const part of client.runs.joinStream(thread.thread_id, run.run_id)) {
    all.push({ event: part.event, data: part.data, id: part.id ?? null });
  }
  const ids = all.filter((p) => p.id !== null).map((p) => p.id);
  const later = [];
  for await (const part of client.runs.joinStream(thread.thread_id, run.run_id, {
    lastEventId: ids[0],
    streamMode: ["values", "updates"],
  })) {
    later.push({ event: part.event, data: part.data });
  }
  return { all, later };
});

await step("cancel", async () => {
  const thread = await client.threads.create();
  const run = await client.runs.create(thread.thread_id, "counter", {
    input: { n: 0, delay: 0.5 },
  });
  await new Promise((resolve) => setTimeout(resolve, 750));
  await client.runs.cancel(thread.thread_id, run.run_id, true, "interrupt");
  const got = await client.runs.get(thread.thread_id, run.run_id);
  const state = await client.threads.getState(thread.thread_id);
  return { status: got.status, n: state.values.n ?? 0 };
});

await step("store", async () => {
  await client.store.putItem(["js", "prefs"], "theme", { value: "dark" });
  const item = await client.store.getItem(["js", "prefs"], "theme");
  const found = await client.store.searchItems(["js"], { filter: { value: "dark" } });
  return { value: item.value, namespace: item.namespace, found: found.items.map((i) => i.key) };
});

await step("errors", async () => ({
  missingThread: await thrown(() =>
    client.threads.get("00000000-0000-4000-8000-000000000000")
  ),
  missingAssistant: await thrown(() => client.assistants.get("no-such-graph")),
  conflict: await thrown(() => client.threads.create({ threadId, ifExists: "raise" })),
  invalid: await thrown(() => client.threads.search({ status: "sleeping" })),
}));

console.log(JSON.stringify(results));
