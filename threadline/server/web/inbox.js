// The inbox: every thread waiting for a person, newest first, each pending interrupt with the
// form that answers it.

import { api } from './api.js';
import { badge, clear, h, parseMetadata, short, when, fill } from './dom.js';
import { interruptView } from './answer.js';
import { runWithProgress } from './runlog.js';

export async function graphIds() {
  const assistants = await api('POST', '/assistants/search', { limit: 100 });
  return [...new Set(assistants.map((a) => a.graph_id))].sort();
}

// Threads waiting for a person. A thread whose last answer was refused keeps its interrupts but
// is marked "error" by the server, so those are listed too.
export async function waitingThreads(filter) {
  const query = { metadata: filter, limit: 100, sort_by: 'updated_at', sort_order: 'desc' };
  const [waiting, failed] = await Promise.all([
    api('POST', '/threads/search', { ...query, status: 'interrupted' }),
    api('POST', '/threads/search', { ...query, status: 'error' }),
  ]);
  const refused = failed.filter((t) => pending(t).length);
  return [...waiting, ...refused].sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)));
}

export function pending(thread) {
  return Object.values(thread.interrupts || {}).flat();
}

export async function renderInbox(main, params) {
  const graphs = await graphIds();
  const graphSelect = h('select', { id: 'inbox-graph', name: 'graph' },
    h('option', { value: '' }, 'All graphs'),
    graphs.map((g) => h('option', { value: g, selected: params.get('graph') === g }, g)));
  const metaInput = h('input', { id: 'inbox-meta', name: 'metadata', value: params.get('metadata') || '', placeholder: 'customer=ada, priority=high' });
  const list = h('div', { class: 'cards' });
  const count = h('p', { class: 'muted', 'aria-live': 'polite' });
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the inbox' },
    h('div', { class: 'field' }, h('label', { for: 'inbox-graph' }, 'Graph'), graphSelect),
    h('div', { class: 'field' }, h('label', { for: 'inbox-meta' }, 'Metadata (key=value, …)'), metaInput),
    h('div', { class: 'field' }, h('button', { type: 'submit' }, 'Filter')));
  filters.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (graphSelect.value) q.set('graph', graphSelect.value);
    if (metaInput.value.trim()) q.set('metadata', metaInput.value.trim());
    location.hash = `#/inbox${q.toString() ? `?${q}` : ''}`;
  });
  const refresh = h('button', { type: 'button', onclick: () => load() }, 'Refresh');
  fill(main, h('h1', {}, 'Inbox'),
    h('p', { class: 'muted' }, 'Threads waiting for a person, newest first.'), filters,
    h('div', { class: 'bar' }, count, refresh), list);

  async function load() {
    const filter = parseMetadata(params.get('metadata'));
    if (params.get('graph')) filter.graph_id = params.get('graph');
    const threads = await waitingThreads(filter);
    count.textContent = threads.length === 1 ? '1 thread waits.' : `${threads.length} threads wait.`;
    clear(list).append(...threads.map((t) => threadCard(t)));
    if (!threads.length) list.append(h('p', { class: 'empty' }, 'Nothing waits for a person.'));
  }
  await load();
}

// A thread and its pending interrupts, each with its answer form; `onAnswered(result)` after a
// run that took an answer.
export function threadCard(thread, onAnswered) {
  const items = pending(thread);
  const graph = thread.metadata?.graph_id || '?';
  const meta = Object.entries(thread.metadata || {}).filter(([k]) => !['graph_id', 'assistant_id'].includes(k));
  const titleId = `card-${thread.thread_id}`;
  const note = h('p', { class: 'notice', 'aria-live': 'polite' });
  const done = (result) => {
    note.textContent = result.status === 'interrupted'
      ? 'Answered. The thread waits again: refresh the inbox to see what it asks now.'
      : 'Answered.';
    onAnswered?.(result);
  };
  const body = items.length
    ? items.map((i) => interruptView(thread, i, items.length, done))
    : [breakpoint(thread, done)];
  return h('article', { class: 'card', 'aria-labelledby': titleId, 'data-thread': thread.thread_id },
    h('h2', { id: titleId }, h('a', { href: `#/thread/${thread.thread_id}` }, `${graph} · ${short(thread.thread_id)}`), ' ', badge(thread.status)),
    h('p', { class: 'muted' }, `Waiting since ${when(thread.updated_at)}`,
      meta.length ? ` · ${meta.map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' · ')}` : ''),
    thread.status === 'error' ? h('p', { class: 'notice' }, 'The last answer was refused; the question still waits.') : null,
    body, note);
}

// Stopped at a breakpoint (interrupt_before/after): nothing to answer, only to continue.
function breakpoint(thread, done) {
  const log = h('div', { class: 'log' });
  const button = h('button', { type: 'button', class: 'primary' }, 'Continue');
  button.addEventListener('click', async () => {
    button.disabled = true;
    done(await runWithProgress(log, thread.thread_id, { assistant_id: thread.metadata?.graph_id, input: null }));
  });
  return h('div', {}, h('p', {}, 'Stopped at a breakpoint.'), button, log);
}
