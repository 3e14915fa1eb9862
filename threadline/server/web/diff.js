// What changed between two states, as readable lines.

import { h, show } from './dom.js';

export function changes(before, after) {
  const out = [];
  const a = before || {};
  const b = after || {};
  for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const was = JSON.stringify(a[key]);
    const now = JSON.stringify(b[key]);
    if (was === now) continue;
    if (!(key in a)) out.push({ key, kind: 'added', now: b[key] });
    else if (!(key in b)) out.push({ key, kind: 'removed', was: a[key] });
    else out.push({ key, kind: 'changed', was: a[key], now: b[key] });
  }
  return out;
}

export function diffList(before, after) {
  const found = changes(before, after);
  if (!found.length) return h('p', { class: 'muted' }, 'No change to the state.');
  return h('ul', { class: 'diff' }, found.map((c) => h('li', { class: c.kind },
    h('code', {}, c.key), c.kind === 'added' ? ' set to ' : c.kind === 'removed' ? ' removed (was ' : ': ',
    c.kind === 'changed' ? [h('del', {}, clip(c.was)), ' → ', h('ins', {}, clip(c.now))] : null,
    c.kind === 'added' ? h('ins', {}, clip(c.now)) : null,
    c.kind === 'removed' ? [h('del', {}, clip(c.was)), ')'] : null)));
}

function clip(value) {
  const text = show(value);
  return text.length > 160 ? `${text.slice(0, 157)}…` : text;
}
