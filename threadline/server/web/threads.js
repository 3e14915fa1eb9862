// Threads: search by id, metadata and status; open or delete one.

import { api } from './api.js';
import { badge, clear, h, parseMetadata, short, when, fill } from './dom.js';

const STATUSES = ['idle', 'busy', 'interrupted', 'error'];

export async function renderThreads(main, params) {
  const idInput = h('input', { id: 'threads-id', name: 'id', value: params.get('id') || '' });
  const metaInput = h('input', { id: 'threads-meta', name: 'metadata', value: params.get('metadata') || '', placeholder: 'graph_id=approval' });
  const statusSelect = h('select', { id: 'threads-status', name: 'status' }, h('option', { value: '' }, 'Any status'),
    STATUSES.map((s) => h('option', { value: s, selected: params.get('status') === s }, s)));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Search threads' },
    h('div', { class: 'field' }, h('label', { for: 'threads-id' }, 'Thread id'), idInput),
    h('div', { class: 'field' }, h('label', { for: 'threads-meta' }, 'Metadata (key=value, …)'), metaInput),
    h('div', { class: 'field' }, h('label', { for: 'threads-status' }, 'Status'), statusSelect),
    h('div', { class: 'field' }, h('button', { type: 'submit' }, 'Search')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (idInput.value.trim()) q.set('id', idInput.value.trim());
    if (metaInput.value.trim()) q.set('metadata', metaInput.value.trim());
    if (statusSelect.value) q.set('status', statusSelect.value);
    location.hash = `#/threads${q.toString() ? `?${q}` : ''}`;
  });
  const tbody = h('tbody');
  const message = h('p', { class: 'muted', 'aria-live': 'polite' });
  fill(main, h('h1', {}, 'Threads'), form, message,
    h('div', { class: 'scroll' }, h('table', { class: 'threads' },
      h('thead', {}, h('tr', {}, ['Thread', 'Graph', 'Status', 'Updated', 'Metadata', ''].map((c) => h('th', { scope: 'col' }, c)))),
      tbody)));

  async function load() {
    const query = { limit: 100, sort_by: 'updated_at', sort_order: 'desc', metadata: parseMetadata(params.get('metadata')) };
    if (params.get('id')) query.ids = [params.get('id')];
    if (params.get('status')) query.status = params.get('status');
    const threads = await api('POST', '/threads/search', query);
    message.textContent = `${threads.length} thread${threads.length === 1 ? '' : 's'}.`;
    clear(tbody).append(...threads.map((t) => row(t, load)));
  }
  await load();
}

function row(thread, reload) {
  const meta = Object.entries(thread.metadata || {}).filter(([k]) => !['graph_id', 'assistant_id'].includes(k));
  const del = h('button', { type: 'button', class: 'danger', 'aria-label': `Delete thread ${short(thread.thread_id)}` }, 'Delete');
  const error = h('span', { class: 'error', role: 'alert' });
  del.addEventListener('click', async () => {
    if (del.dataset.armed !== 'yes') { // a second press confirms
      del.dataset.armed = 'yes';
      del.textContent = 'Confirm delete';
      return;
    }
    try {
      await api('DELETE', `/threads/${encodeURIComponent(thread.thread_id)}`);
      await reload();
    } catch (e) {
      error.textContent = e.message;
    }
  });
  return h('tr', { 'data-thread': thread.thread_id },
    h('td', {}, h('a', { href: `#/thread/${thread.thread_id}` }, h('code', {}, short(thread.thread_id)))),
    h('td', {}, thread.metadata?.graph_id || ''),
    h('td', {}, badge(thread.status)),
    h('td', {}, when(thread.updated_at)),
    h('td', {}, meta.map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', ')),
    h('td', {}, del, error));
}
