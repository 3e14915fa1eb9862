// One thread: its pending questions, the timeline of checkpoints, the selected checkpoint's
// state with "Fork from here" and "Replay from here", the execution trace with that step's
// entries highlighted, and the graph with that step's nodes.

import { api } from './api.js';
import { badge, fill, h, short, shortCheckpoint, valueTable } from './dom.js';
import { changes } from './diff.js';
import { drawGraph } from './graph.js';
import { pending, threadCard } from './inbox.js';
import { runWithProgress } from './runlog.js';
import { timelineEntries, timelineList } from './timeline.js';
import { readTrace, tracePanel } from './trace.js';

const threadPath = (thread) => `/threads/${encodeURIComponent(thread.thread_id)}`;

export async function renderThread(main, threadId, params) {
  const thread = await api('GET', `/threads/${encodeURIComponent(threadId)}`);
  const graphId = thread.metadata?.graph_id;
  const drawing = graphId
    ? await api('GET', `/assistants/${encodeURIComponent(graphId)}/graph`).catch(() => null)
    : null;
  const pane = h('div', { class: 'thread-layout' });
  const log = h('div', { class: 'log' }); // a fork's or replay's progress; kept across refreshes
  // The trace read so far (each refresh asks only for what came after) and its filter.
  const view = { thread, drawing, pane, log, trace: [], traceOnly: false };
  view.refresh = (wanted) => showTimeline(view, wanted);
  view.run = async (body) => {
    const result = await runWithProgress(log, thread.thread_id, { assistant_id: graphId, ...body });
    await view.refresh(null); // the new checkpoints; the thread's head selected
    return result;
  };
  const meta = Object.entries(thread.metadata || {}).filter(([k]) => k !== 'assistant_id');
  fill(main,
    h('h1', {}, 'Thread ', h('code', {}, short(threadId)), ' ', badge(thread.status)),
    h('p', { class: 'muted' }, h('span', { class: 'thread-id' }, threadId),
      meta.map(([k, v]) => ` · ${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)),
    thread.error ? h('p', { class: 'error banner', role: 'alert' }, `This thread failed: ${thread.error}`) : null,
    pending(thread).length ? threadCard(thread, () => view.refresh(null)) : null,
    log, pane);
  await view.refresh(params.get('checkpoint'));
}

// The timeline, the selected checkpoint, the trace and the graph, read afresh from the server.
async function showTimeline(view, wanted) {
  const [state, history, trace] = await Promise.all([
    api('GET', `${threadPath(view.thread)}/state`),
    api('POST', `${threadPath(view.thread)}/history`, { limit: 500 }),
    readTrace(threadPath(view.thread), view.trace).catch((e) => e),
  ]);
  if (!(trace instanceof Error)) view.trace = trace;
  const entries = timelineEntries(history);
  const headId = state.checkpoint?.checkpoint_id;
  const detail = h('section', { class: 'detail', 'aria-labelledby': 'detail-title' });
  const picture = h('figure', { class: 'picture' });
  const list = timelineList(entries, headId, (entry) => select(entry));
  const traced = tracePanel(trace, {
    target: (checkpointId) => stepEntry(entries, checkpointId),
    onSelect: (entry) => select(entry),
    only: view.traceOnly,
    onOnly: (checked) => { view.traceOnly = checked; },
  });
  fill(view.pane,
    h('section', { class: 'timeline-pane', 'aria-labelledby': 'timeline-title' },
      h('h2', { id: 'timeline-title' }, 'Timeline'),
      entries.length ? list : h('p', { class: 'empty' }, 'No checkpoints yet.')),
    h('div', { class: 'side' }, detail, traced.el, picture));

  function select(entry) {
    for (const b of list.querySelectorAll('button.entry')) {
      b.setAttribute('aria-pressed', String(b.dataset.checkpoint === entry.snap.checkpoint.checkpoint_id));
    }
    showDetail(detail, entry, view);
    traced.select(entry);
    picture.replaceChildren();
    if (view.drawing) {
      picture.append(drawGraph(view.drawing, { ran: entry.ran, next: entry.snap.next || [] }),
        h('figcaption', {}, `Graph “${view.thread.metadata?.graph_id}”: `,
          h('span', { class: 'key-ran' }, 'filled, ran to make this checkpoint'), '; ',
          h('span', { class: 'key-next' }, 'dashed, runs next')));
    }
  }
  const first = entries.find((e) => e.snap.checkpoint.checkpoint_id === wanted) ||
    entries.find((e) => e.snap.checkpoint.checkpoint_id === headId) || entries[entries.length - 1];
  if (first) select(first);
}

// The timeline entry of a step that started from `checkpointId`: the checkpoint the step made,
// or, when it made none (it waits for a person, or failed), the one it started from.
function stepEntry(entries, checkpointId) {
  return entries.find((e) => e.snap.metadata?.source === 'loop' && e.snap.parent_checkpoint?.checkpoint_id === checkpointId) ||
    entries.find((e) => e.snap.checkpoint.checkpoint_id === checkpointId) || null;
}

function showDetail(box, entry, view) {
  const s = entry.snap;
  const checkpointId = s.checkpoint.checkpoint_id;
  const editor = h('div', { class: 'editor' });
  const fork = h('button', { type: 'button', onclick: () => openEditor(editor, s, view) }, 'Fork from here');
  const replay = h('button', {
    type: 'button', disabled: !s.next?.length,
    onclick: () => view.run({ input: null, checkpoint_id: checkpointId }),
  }, 'Replay from here');
  fill(box,
    h('h2', { id: 'detail-title' }, `Step ${s.metadata?.step ?? '?'}`, ' ', h('code', { class: 'muted' }, shortCheckpoint(checkpointId))),
    valueTable(s.values, 'State at this checkpoint'),
    h('div', { class: 'actions' }, fork, replay),
    s.next?.length ? null : h('p', { class: 'help' }, 'Nothing runs after this checkpoint, so there is nothing to replay.'),
    editor);
}

// "Fork from here": the checkpoint's state as JSON, checked as it is typed; the changed keys
// are written at that checkpoint (POST /threads/{id}/state) and the graph runs from there.
function openEditor(box, snap, view) {
  const id = 'fork-json';
  const area = h('textarea', { id, rows: 10, class: 'json', spellcheck: 'false', 'aria-describedby': 'fork-help fork-error' },
    JSON.stringify(snap.values, null, 2));
  const error = h('p', { class: 'error', id: 'fork-error', role: 'alert' });
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save fork and run');
  const form = h('form', { class: 'fork', novalidate: true },
    h('label', { for: id }, `State to fork from step ${snap.metadata?.step ?? '?'} (JSON)`), area,
    h('p', { class: 'help', id: 'fork-help' }, 'Changed keys are written as an update at this checkpoint (through the state\'s reducers); then the graph runs from there.'),
    error, h('div', { class: 'actions' }, save, h('button', { type: 'button', onclick: () => box.replaceChildren() }, 'Cancel')));
  const parse = () => {
    try {
      const value = JSON.parse(area.value);
      if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('the state must be a JSON object');
      error.textContent = '';
      area.removeAttribute('aria-invalid');
      return value;
    } catch (e) {
      error.textContent = `Not valid: ${e.message}`;
      area.setAttribute('aria-invalid', 'true');
      return null;
    }
  };
  area.addEventListener('input', parse);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const edited = parse();
    if (!edited) return;
    const changed = Object.fromEntries(changes(snap.values, edited)
      .filter((c) => c.kind !== 'removed').map((c) => [c.key, c.now]));
    if (!Object.keys(changed).length) {
      error.textContent = 'Nothing changed: edit a value first.';
      return;
    }
    save.disabled = true;
    try {
      const made = await api('POST', `${threadPath(view.thread)}/state`,
        { values: changed, checkpoint_id: snap.checkpoint.checkpoint_id });
      await view.run({ input: null, checkpoint_id: made.checkpoint.checkpoint_id });
    } catch (e) {
      error.textContent = e.message;
      save.disabled = false;
    }
  });
  fill(box, form);
  area.focus();
}
