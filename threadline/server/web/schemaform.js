// A form generated from a JSON Schema: fields, types, required, enums, defaults, and
// validation messages before anything is sent. Patterns, anyOf/oneOf/allOf combinations and
// whatever only Python knows are left to the server, whose answer is the authority: its
// messages are shown next to the field they name (see showErrors).

import { h, isObject, uid } from './dom.js';

export function resolve(schema, root) {
  let s = schema || {};
  for (let i = 0; i < 10 && s.$ref; i++) {
    const path = s.$ref.replace(/^#\//, '').split('/');
    let target = root;
    for (const part of path) target = target?.[part];
    s = { ...(target || {}), ...Object.fromEntries(Object.entries(s).filter(([k]) => k !== '$ref')) };
  }
  if (Array.isArray(s.allOf) && s.allOf.length === 1) s = { ...resolve(s.allOf[0], root), ...s };
  const options = s.anyOf || s.oneOf;
  if (Array.isArray(options)) {
    const real = options.filter((o) => o.type !== 'null');
    if (real.length === 1) return { ...resolve(real[0], root), ...dropKeys(s, ['anyOf', 'oneOf']), nullable: true };
  }
  return s;
}

function dropKeys(obj, keys) {
  return Object.fromEntries(Object.entries(obj).filter(([k]) => !keys.includes(k)));
}

function kindOf(s) {
  if (Array.isArray(s.enum) || 'const' in s) return 'enum';
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (type === 'object' && isObject(s.properties)) return 'object';
  if (['string', 'integer', 'number', 'boolean'].includes(type)) return type;
  return 'json';
}

const label = (s, name) => s.title || humanize(name) || 'Answer';
const humanize = (name) => (name ? name.charAt(0).toUpperCase() + name.slice(1).replace(/_/g, ' ') : '');

// A form for `schema`, filled with `initial` (or the schema's defaults). Fields are known by
// their path in the answer ("amount", "address.city"), as the server's messages name them.
export function schemaForm(schema, { initial, optional = false } = {}) {
  const fields = new Map(); // path -> field
  const top = build(resolve(schema, schema), '', '', initial, !optional, schema, fields);
  const formError = h('p', { class: 'error form-error', role: 'alert' });
  const el = h('div', { class: 'schema-form' }, top.el, formError);

  function read() {
    for (const field of fields.values()) field.setError('');
    formError.textContent = '';
    const problems = [];
    const value = top.read(problems);
    return { value, problems };
  }

  // Show [path, message] pairs next to the field each names (the longest matching path).
  function showErrors(problems) {
    for (const [path, message] of problems) {
      const field = findField(fields, path);
      if (field) field.setError(message);
      else formError.textContent = path ? `${path}: ${message}` : message;
    }
    const first = el.querySelector('[aria-invalid="true"]');
    if (first) first.focus();
  }

  return { el, read, showErrors, fields };
}

export function findField(fields, path) {
  let p = path;
  while (p) {
    if (fields.has(p)) return fields.get(p);
    const cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['));
    p = cut > 0 ? p.slice(0, cut) : '';
  }
  return fields.get('') || null;
}

function join(path, name) {
  return path ? `${path}.${name}` : name;
}

function build(s, name, path, initial, required, root, fields) {
  const kind = kindOf(s);
  if (kind === 'object') return buildObject(s, name, path, initial, root, fields);
  return buildField(s, kind, name, path, initial, required, fields);
}

function buildObject(s, name, path, initial, root, fields) {
  const required = new Set(s.required || []);
  // A property's own title, else its name: a $ref'd model's title names the type, not the field.
  const parts = Object.entries(s.properties).map(([key, sub]) =>
    build({ ...resolve(sub, root), title: sub.title }, key, join(path, key),
      isObject(initial) ? initial[key] : undefined, required.has(key), root, fields));
  const body = parts.map((p) => p.el);
  const el = name
    ? h('fieldset', {}, h('legend', {}, label(s, name)), body)
    : h('div', { class: 'fields' }, body);
  return {
    el,
    read(problems) {
      const out = {};
      Object.keys(s.properties).forEach((key, i) => {
        const v = parts[i].read(problems);
        if (v !== undefined) out[key] = v;
      });
      return out;
    },
  };
}

function buildField(s, kind, name, path, initial, required, fields) {
  const id = uid('field');
  const start = initial !== undefined ? initial : s.default;
  const help = describe(s, kind);
  const helpId = help ? `${id}-help` : null;
  const errorId = `${id}-error`;
  const described = [helpId, errorId].filter(Boolean).join(' ');
  let input;
  if (kind === 'enum') {
    const options = Array.isArray(s.enum) ? s.enum : [s.const];
    input = h('select', { id, name: path, 'aria-describedby': described },
      required && start !== undefined ? null : h('option', { value: '' }, '(choose)'),
      options.map((o, i) => h('option', { value: String(i), selected: start === o }, String(o))));
  } else if (kind === 'boolean') {
    input = h('input', { id, name: path, type: 'checkbox', checked: start === true, 'aria-describedby': described });
  } else if (kind === 'integer' || kind === 'number') {
    input = h('input', {
      id, name: path, type: 'number', inputmode: kind === 'integer' ? 'numeric' : 'decimal',
      step: kind === 'integer' ? '1' : 'any', value: start ?? '', 'aria-describedby': described,
    });
  } else if (kind === 'string') {
    const long = (s.maxLength || 0) > 200 || /message|reason|comment|note|text/i.test(name || '');
    input = long
      ? h('textarea', { id, name: path, rows: 3, 'aria-describedby': described }, start ?? '')
      : h('input', { id, name: path, type: s.format === 'date' ? 'date' : 'text', value: start ?? '', 'aria-describedby': described });
  } else {
    input = h('textarea', { id, name: path, rows: 4, class: 'json', spellcheck: 'false', 'aria-describedby': described },
      start === undefined ? '' : JSON.stringify(start, null, 2));
  }
  if (required) input.setAttribute('aria-required', 'true');
  const error = h('p', { class: 'error', id: errorId });
  const labelEl = h('label', { for: id }, label(s, name),
    required ? h('span', { class: 'req' }, ' (required)') : null);
  const el = h('div', { class: `field field-${kind}` },
    kind === 'boolean' ? h('div', { class: 'check' }, input, labelEl) : [labelEl, input],
    help ? h('p', { class: 'help', id: helpId }, help) : null, error);
  const field = {
    el,
    input,
    setError(message) {
      error.textContent = message;
      if (message) input.setAttribute('aria-invalid', 'true');
      else input.removeAttribute('aria-invalid');
    },
    read(problems) {
      const [value, message] = readValue(s, kind, input, required);
      const wrong = message || (value === undefined ? null : check(s, kind, value));
      if (wrong) {
        field.setError(wrong);
        problems.push([path, wrong]);
      }
      return value;
    },
  };
  input.addEventListener(kind === 'boolean' || kind === 'enum' ? 'change' : 'input', () => field.setError(''));
  fields.set(path, field);
  return field;
}

function describe(s, kind) {
  const parts = [];
  if (s.description) parts.push(s.description);
  if (kind === 'integer') parts.push('a whole number');
  if (kind === 'json') parts.push('JSON');
  if (s.minimum !== undefined && s.maximum !== undefined) parts.push(`from ${s.minimum} to ${s.maximum}`);
  else if (s.minimum !== undefined) parts.push(`at least ${s.minimum}`);
  else if (s.maximum !== undefined) parts.push(`at most ${s.maximum}`);
  if (s.minLength) parts.push(`at least ${s.minLength} characters`);
  if (s.maxLength) parts.push(`at most ${s.maxLength} characters`);
  if (s.pattern) parts.push(`format ${s.pattern}`);
  return parts.join('; ');
}

function readValue(s, kind, input, required) {
  if (kind === 'boolean') return [input.checked, null];
  const raw = input.value;
  if (raw.trim() === '') return [undefined, required ? 'This field is required.' : null];
  if (kind === 'enum') return [(Array.isArray(s.enum) ? s.enum : [s.const])[Number(raw)], null];
  if (kind === 'integer' || kind === 'number') {
    const n = Number(raw);
    if (!Number.isFinite(n)) return [undefined, 'Enter a number.'];
    if (kind === 'integer' && !Number.isInteger(n)) return [undefined, 'Enter a whole number.'];
    return [n, null];
  }
  if (kind === 'json') {
    try { return [JSON.parse(raw), null]; } catch (e) { return [undefined, `Not valid JSON: ${e.message}`]; }
  }
  return [raw, null];
}

function check(s, kind, v) {
  if (kind === 'integer' || kind === 'number') {
    if (s.minimum !== undefined && v < s.minimum) return `Must be at least ${s.minimum}.`;
    if (s.maximum !== undefined && v > s.maximum) return `Must be at most ${s.maximum}.`;
    if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return `Must be more than ${s.exclusiveMinimum}.`;
    if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) return `Must be less than ${s.exclusiveMaximum}.`;
  }
  if (kind === 'string') {
    if (s.minLength !== undefined && v.length < s.minLength) return `Must be at least ${s.minLength} characters.`;
    if (s.maxLength !== undefined && v.length > s.maxLength) return `Must be at most ${s.maxLength} characters.`;
  }
  return null;
}

// A schema for arguments that came without one: each key typed from its current value.
export function inferSchema(args) {
  const properties = {};
  for (const [key, value] of Object.entries(args || {})) {
    if (typeof value === 'boolean') properties[key] = { type: 'boolean' };
    else if (typeof value === 'number') properties[key] = { type: Number.isInteger(value) ? 'integer' : 'number' };
    else if (typeof value === 'string') properties[key] = { type: 'string' };
    else properties[key] = {};
  }
  return { type: 'object', properties, required: Object.keys(args || {}) };
}

// The [path, message] pairs of a refused answer to interrupt `interruptId`: the `problems` of
// the run's error event, or, from a server that sends none, read from its message.
export function refusedProblems(error, interruptId) {
  const listed = Array.isArray(error?.problems)
    ? error.problems.filter((p) => Array.isArray(p) && p.length === 2) : [];
  if (!listed.length) return serverProblems(error?.message);
  if (error.interrupt_id && interruptId && error.interrupt_id !== interruptId) return [['', error.message]];
  return listed.map(([path, message]) => [typeof path === 'string' ? path : '', String(message)]);
}

// The [path, message] pairs of a server's InvalidAnswerError message (the fallback).
export function serverProblems(message) {
  const m = /is invalid: ([\s\S]*?)\. (Nothing was resumed|The node that asked)/.exec(message || '');
  if (!m) return [['', message]];
  return m[1].split('; ').map((part) => {
    const i = part.indexOf(': ');
    const path = i > 0 ? part.slice(0, i) : '';
    return /^[\w[\].-]+$/.test(path) ? [path, part.slice(i + 2)] : ['', part];
  });
}
