// A thread's execution trace (GET /threads/{id}/trace): every attempt of a node or task (retries
// and their errors included), each question asked and the answer given, and the events nodes
// recorded, grouped by the step they ran in. The step that made the selected checkpoint is
// highlighted, the step that ran from it outlined (as the graph fills and dashes them).

import { api } from './api.js';
import { h, shortCheckpoint, show, when } from './dom.js';
import { question } from './timeline.js';

const COLUMNS = ['Time', 'Step', 'Kind', 'Name', 'Attempt', 'Took', 'Status']; // then a row of details
const MARKS = { made: 'made the selected checkpoint', from: 'ran from the selected checkpoint' };

// `known` (the entries read before, oldest first) and the ones after its last: only those are asked for.
export async function readTrace(threadPath, known = []) {
  const last = known[known.length - 1];
  const since = last ? `?since=${encodeURIComponent(last.id)}` : '';
  const more = await api('GET', `${threadPath}/trace${since}`);
  return more.length ? [...known, ...more] : known;
}

// The entries by the checkpoint their step started from, in the order the steps first appear.
export function traceSteps(entries) {
  const steps = new Map();
  for (const entry of entries) {
    if (!steps.has(entry.checkpoint_id)) {
      steps.set(entry.checkpoint_id, { checkpointId: entry.checkpoint_id, step: entry.step, entries: [] });
    }
    steps.get(entry.checkpoint_id).entries.push(entry);
  }
  return [...steps.values()];
}

// The panel. `entries` is the trace (or an Error when it could not be read); `target(checkpointId)`
// is the timeline entry a step of the trace belongs to (or null), `onSelect(timelineEntry)`
// selects it; `only` filters to the selected checkpoint's steps, `onOnly(checked)` keeps that
// choice across refreshes. Returns {el, select(timelineEntry)}.
export function tracePanel(entries, { target, onSelect, only = false, onOnly } = {}) {
  const failed = entries instanceof Error;
  const steps = failed ? [] : traceSteps(entries);
  const asked = new Map();
  const answered = new Map();
  for (const e of failed ? [] : entries) {
    if (e.kind === 'interrupt') asked.set(e.interrupt_id, e);
    if (e.kind === 'resume') answered.set(e.interrupt_id, e);
  }
  const bodies = steps.map((s) => stepBody(s, { asked, answered, target, onSelect }));
  const head = h('thead', {}, h('tr', {}, COLUMNS.map((c) => h('th', { scope: 'col' }, c))));
  const box = h('div', { class: 'scroll trace-scroll', tabindex: '0', role: 'region', 'aria-label': 'Execution trace entries' },
    h('table', { class: 'trace' }, h('caption', {}, 'Execution trace, oldest first, by step'), head, bodies.map((b) => b.el)));
  const filter = h('input', { type: 'checkbox', id: 'trace-only', checked: only, 'aria-describedby': 'trace-summary' });
  const summary = h('p', { class: 'help', id: 'trace-summary', 'aria-live': 'polite' });
  let selected = null;

  const el = h('section', { class: 'trace-pane', 'aria-labelledby': 'trace-title' },
    h('h2', { id: 'trace-title' }, 'Trace'),
    h('p', { class: 'help' }, 'Every attempt of a node or task (retries included), each question asked and answered, the events nodes recorded. ',
      h('span', { class: 'key-made' }, 'Highlighted'), ': the step that made the selected checkpoint; ',
      h('span', { class: 'key-from' }, 'outlined'), ': the step that ran from it. A step\'s heading selects it in the timeline.'),
    failed ? h('p', { class: 'error', role: 'alert' }, `The trace could not be read: ${entries.message}`)
      : !steps.length ? h('p', { class: 'empty' }, 'No entries: nothing has run yet, or this graph keeps no trace.')
        : [h('div', { class: 'check' }, filter, h('label', { for: 'trace-only' }, 'Only the steps of the selected checkpoint')), summary, box]);

  function mark() {
    const fromId = selected?.snap.checkpoint.checkpoint_id;
    const madeId = selected?.snap.metadata?.source === 'loop' ? selected.snap.parent_checkpoint?.checkpoint_id : null;
    let shown = 0;
    let marked = null;
    for (const body of bodies) {
      const kind = body.step.checkpointId === madeId ? 'made' : body.step.checkpointId === fromId ? 'from' : null;
      body.mark(kind);
      body.el.hidden = filter.checked && !kind;
      if (!body.el.hidden) shown += body.step.entries.length;
      if (kind && !marked) marked = body.el;
    }
    const count = (n) => (n === 1 ? '1 entry' : `${n} entries`);
    const total = bodies.reduce((n, b) => n + b.step.entries.length, 0);
    const text = filter.checked
      ? (shown ? `${count(shown)} of ${total}: the steps of the selected checkpoint.` : 'No entries for the selected checkpoint: nothing ran to make it or from it.')
      : `${count(total)} in ${bodies.length === 1 ? '1 step' : `${bodies.length} steps`}.`;
    if (summary.textContent !== text) summary.textContent = text; // a live region: said once
    if (marked && !filter.checked) scrollTo(marked);
  }

  function scrollTo(body) {
    const top = body.getBoundingClientRect().top - box.getBoundingClientRect().top - head.getBoundingClientRect().height;
    box.scrollTop += top;
  }

  filter.addEventListener('change', () => {
    onOnly?.(filter.checked);
    mark();
  });

  return {
    el,
    select(timelineEntry) {
      selected = timelineEntry;
      mark();
    },
  };
}

function stepBody(step, { asked, answered, target, onSelect }) {
  const goal = target?.(step.checkpointId);
  const label = `Step ${step.step}`;
  const badge = h('span', { class: 'badge mark' });
  const names = [...new Set(step.entries.filter((e) => e.kind === 'node' || e.kind === 'task').map((e) => e.name))];
  const el = h('tbody', { class: 'trace-step', 'data-checkpoint': step.checkpointId, 'data-step': step.step },
    h('tr', { class: 'step-head' }, h('th', { scope: 'colgroup', colspan: COLUMNS.length },
      h(goal ? 'button' : 'span', goal
        ? { type: 'button', class: 'step-link', title: 'Select this step in the timeline', onclick: () => onSelect(goal) }
        : { class: 'step-link' },
      h('strong', {}, label), ' from ', h('code', {}, shortCheckpoint(step.checkpointId))),
      names.length ? ` · ${names.join(', ')}` : '', ' ', badge)),
    step.entries.map((e) => entryRows(e, asked, answered)));
  return {
    el,
    step,
    mark(kind) {
      el.classList.toggle('made', kind === 'made');
      el.classList.toggle('from', kind === 'from');
      badge.textContent = kind ? MARKS[kind] : '';
    },
  };
}

// An entry as a row of the table, and what it says (an error, the question and its answer, an
// event's data) as a full-width row under it.
function entryRows(e, asked, answered) {
  const said = details(e, asked, answered);
  return [
    h('tr', { class: `trace-entry kind-${e.kind}`, 'data-kind': e.kind, 'data-entry': e.id },
      h('td', { 'data-label': 'Time' }, h('time', { datetime: e.at, title: when(e.at) }, clock(e.at))),
      h('td', { 'data-label': 'Step', class: 'num' }, String(e.step)),
      h('td', { 'data-label': 'Kind' }, e.kind),
      h('td', { 'data-label': 'Name' }, h('code', {}, e.name)),
      h('td', { 'data-label': 'Attempt', class: 'num' }, e.attempt ?? null),
      h('td', { 'data-label': 'Took', class: 'num' }, took(e.duration) || null),
      h('td', { 'data-label': 'Status' }, e.status ? h('span', { class: `badge trace-${e.status}` }, e.status) : null)),
    said ? h('tr', { class: `trace-detail detail-${e.kind}`, 'data-entry': e.id },
      h('td', { colspan: COLUMNS.length }, said)) : null,
  ];
}

function details(e, asked, answered) {
  if (e.kind === 'node' || e.kind === 'task') {
    if (e.status === 'error') return h('span', { class: 'error' }, `${e.error_type || 'Error'}: ${e.error_message ?? ''}`);
    if (e.status === 'interrupted') return h('span', { class: 'muted' }, 'Stopped to ask a person.');
    return null;
  }
  if (e.kind === 'interrupt') {
    const answer = answered.get(e.interrupt_id);
    return [h('span', { class: 'asked' }, `Asked: ${question(e.data)}`), h('br'),
      answer ? h('span', { class: 'answered' }, `Answered: ${show(answer.data)}`) : h('span', { class: 'muted' }, 'No answer yet.')];
  }
  if (e.kind === 'resume') {
    const ask = asked.get(e.interrupt_id);
    return [h('span', { class: 'answered' }, `Answer: ${show(e.data)}`),
      ask ? [h('br'), h('span', { class: 'muted' }, `to “${question(ask.data)}”`)] : null];
  }
  return [e.recorded_by ? h('span', { class: 'muted' }, `by ${e.recorded_by}: `) : null,
    e.data === null || e.data === undefined ? h('span', { class: 'muted' }, '(no data)') : h('code', {}, show(e.data))];
}

function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso ?? '');
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3, hour12: false });
}

function took(seconds) {
  if (typeof seconds !== 'number' || !Number.isFinite(seconds)) return '';
  if (seconds < 0.001) return `${(seconds * 1000).toFixed(2)} ms`;
  if (seconds < 1) return `${(seconds * 1000).toFixed(1)} ms`;
  if (seconds < 60) return `${seconds.toFixed(2)} s`;
  return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
}
