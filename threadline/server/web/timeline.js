// A thread's checkpoints as a timeline: which node(s) made each, what changed, when, how long,
// errors and questions; forks (checkpoints with the same parent) shown as branches.

import { h, shortCheckpoint, show, when } from './dom.js';
import { diffList } from './diff.js';

// History (newest first) as entries, oldest first, each with its parent, branch and nodes.
export function timelineEntries(history) {
  const byId = new Map(history.map((s) => [s.checkpoint.checkpoint_id, s]));
  const ordered = [...history].sort((a, b) =>
    String(a.created_at).localeCompare(String(b.created_at)) ||
    String(a.checkpoint.checkpoint_id).localeCompare(String(b.checkpoint.checkpoint_id)));
  const children = new Map();
  for (const s of ordered) {
    const parent = s.parent_checkpoint?.checkpoint_id || null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(s);
  }
  const branchOf = new Map();
  const forkOf = new Map();
  let branches = 0;
  for (const s of ordered) {
    const pid = s.parent_checkpoint?.checkpoint_id || null;
    const siblings = children.get(pid) || [];
    const first = siblings[0] === s;
    if (!pid || !byId.has(pid)) {
      branchOf.set(s, branchOf.size ? ++branches : 0);
    } else if (first) {
      branchOf.set(s, branchOf.get(byId.get(pid)));
    } else {
      branchOf.set(s, ++branches);
      forkOf.set(s, byId.get(pid));
    }
  }
  return ordered.map((s) => {
    const parent = byId.get(s.parent_checkpoint?.checkpoint_id) || null;
    return { snap: s, parent, branch: branchOf.get(s), forkOf: forkOf.get(s) || null, ran: ranNodes(s, parent) };
  });
}

// The node(s) whose writes made this checkpoint: the tasks its parent had to run.
export function ranNodes(snap, parent) {
  const source = snap.metadata?.source;
  if (source === 'input') return [];
  if (source === 'update' || source === 'fork') return [];
  const writes = snap.metadata?.writes;
  if (writes && typeof writes === 'object') return Object.keys(writes);
  if (parent) return parent.tasks?.length ? parent.tasks.map((t) => t.name) : [...(parent.next || [])];
  return [];
}

function whatRan(entry) {
  const source = entry.snap.metadata?.source;
  if (source === 'input') return 'input received';
  if (source === 'update') return 'state edited';
  if (source === 'fork') return 'copied to run again';
  return entry.ran.length ? `${entry.ran.join(', ')} ran` : 'started';
}

function duration(entry) {
  if (!entry.parent || entry.snap.metadata?.source !== 'loop') return '';
  const ms = new Date(entry.snap.created_at) - new Date(entry.parent.created_at);
  if (!Number.isFinite(ms) || ms < 0) return '';
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

// The timeline as a list of buttons; `onSelect(entry)` when one is chosen.
export function timelineList(entries, headId, onSelect) {
  const items = entries.map((entry) => {
    const s = entry.snap;
    const errors = (s.tasks || []).filter((t) => t.error);
    const asks = (s.tasks || []).flatMap((t) => t.interrupts || []);
    const step = s.metadata?.step ?? '?';
    const id = s.checkpoint.checkpoint_id;
    const button = h('button', { type: 'button', class: 'entry', 'aria-pressed': 'false', 'data-checkpoint': id, onclick: () => onSelect(entry) },
      h('span', { class: 'step' }, `Step ${step}`), ' ', h('span', { class: 'ran' }, whatRan(entry)),
      s.next?.length ? h('span', { class: 'next' }, ` · next: ${s.next.join(', ')}`) : h('span', { class: 'next' }, ' · end'),
      id === headId ? h('span', { class: 'badge current' }, 'current') : null);
    return h('li', { class: `branch branch-${Math.min(entry.branch, 5)}${errors.length ? ' failed' : ''}`, 'data-step': step, 'data-branch': entry.branch },
      entry.forkOf ? h('p', { class: 'fork-note' }, `Branch ${entry.branch + 1}: a fork from step ${entry.forkOf.metadata?.step ?? '?'} (${shortCheckpoint(entry.forkOf.checkpoint.checkpoint_id)})`) : null,
      button,
      h('p', { class: 'when' }, h('time', { datetime: s.created_at }, when(s.created_at)), duration(entry) ? ` · took ${duration(entry)}` : ''),
      entry.parent || s.metadata?.source !== 'input' ? diffList(entry.parent?.values, s.values) : null,
      errors.map((t) => h('p', { class: 'error task-error' }, `${t.name} failed: ${t.error}`)),
      asks.map((i) => h('p', { class: 'asks' }, `Asks: ${question(i.value)}`)));
  });
  return h('ol', { class: 'timeline', 'aria-label': 'Checkpoints, oldest first' }, items);
}

// What an interrupt asks, as one line of text.
export function question(value) {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    if (Array.isArray(value.action_requests)) return `review of ${value.action_requests.map((a) => a.name).join(', ')}`;
    const text = ['question', 'text', 'message', 'description', 'prompt'].find((k) => typeof value[k] === 'string');
    if (text) return value[text];
  }
  return show(value);
}
