// Small DOM helpers: element construction, formatting, tables of values.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (value === true) el.setAttribute(key, '');
    else el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

let counter = 0;
export const uid = (prefix = 'f') => `${prefix}-${++counter}`;

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

export const short = (id) => (id ? String(id).slice(0, 8) : '');
// Checkpoint ids grow with time and share their first characters: show a few more.
export const shortCheckpoint = (id) => (id ? String(id).slice(0, 13) : '');

// A value as short readable text: strings as they are, everything else as compact JSON.
export function show(value) {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  return JSON.stringify(value);
}

export function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// A table of an object's keys and values (nested values as compact JSON).
export function valueTable(obj, caption) {
  const rows = Object.entries(obj || {}).map(([k, v]) =>
    h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, h('code', {}, show(v)))));
  return h('div', { class: 'scroll' },
    h('table', { class: 'kv' }, caption ? h('caption', {}, caption) : null,
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: 2 }, '(none)')))));
}

export function badge(status) {
  return h('span', { class: `badge status-${status}` }, status);
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

// "a=1, b=x" as {a: 1, b: "x"} (values parsed as JSON when they are JSON).
// A filter value is text (ids such as 12345678 or 8e907397 stay text); JSON only when written
// as JSON that cannot be taken for text: "quoted", {...}, [...], true, false, null.
function metadataValue(raw) {
  if (!/^["{\[]|^(true|false|null)$/.test(raw)) return raw;
  try { return JSON.parse(raw); } catch { return raw; }
}

export function parseMetadata(text) {
  const out = {};
  for (const part of String(text || '').split(',')) {
    const i = part.indexOf('=');
    if (i < 1) continue;
    const key = part.slice(0, i).trim();
    const raw = part.slice(i + 1).trim();
    out[key] = metadataValue(raw);
  }
  return out;
}

// Replace el's children (null, undefined and false are left out).
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}
