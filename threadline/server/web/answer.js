// One pending interrupt, readable, with the form that answers it and resumes its thread.

import { h, isObject, show, valueTable, fill } from './dom.js';
import { inferSchema, refusedProblems, schemaForm } from './schemaform.js';
import { runWithProgress } from './runlog.js';

const NAMES = { accept: 'Accept', edit: 'Edit', respond: 'Respond', reject: 'Reject' };
const TEXT_KEYS = ['question', 'text', 'message', 'description', 'prompt', 'title'];

// A review request in either shape (threadline/LangChain's, or Agent Inbox's list), or null.
export function reviewRequest(value) {
  if (isObject(value) && Array.isArray(value.action_requests) && Array.isArray(value.review_configs)) return value;
  if (Array.isArray(value) && value.length && value.every((i) => isObject(i?.action_request))) {
    const flags = { accept: 'allow_accept', edit: 'allow_edit', respond: 'allow_respond', reject: 'allow_ignore' };
    return {
      action_requests: value.map((i) => ({ name: i.action_request.action, args: i.action_request.args, description: i.description })),
      review_configs: value.map((i) => ({
        action_name: i.action_request.action,
        allowed_decisions: Object.keys(flags).filter((k) => i.config?.[flags[k]]),
        args_schema: i.config?.args_schema,
      })),
    };
  }
  return null;
}

// The interrupt as a section: what it asks, the form, and where the run's progress appears.
// `thread` is the thread record; `onDone(result)` is called after a run that was not refused.
export function interruptView(thread, interrupt, pendingCount, onDone) {
  const log = h('div', { class: 'log' });
  const review = reviewRequest(interrupt.value);
  const form = review ? reviewForm(review) : typedForm(interrupt);
  const submit = h('button', { type: 'submit', class: 'primary' }, review ? 'Send decision' : 'Send answer');
  const el = h('form', { class: 'interrupt', novalidate: true, 'aria-label': 'Answer' },
    review ? null : questionOf(interrupt.value), form.el, h('div', { class: 'actions' }, submit), log);
  el.addEventListener('submit', async (event) => {
    event.preventDefault();
    const { value, problems } = form.read();
    if (problems.length) {
      form.showErrors(problems);
      return;
    }
    submit.disabled = true;
    const resume = pendingCount > 1 ? { [interrupt.id]: value } : value;
    const result = await runWithProgress(log, thread.thread_id, {
      assistant_id: thread.metadata?.graph_id,
      command: { resume },
    });
    submit.disabled = false;
    if (result.notStarted) {
      form.showErrors([['', result.error.message]]);
      return;
    }
    if (result.refused) {
      form.showErrors(refusedProblems(result.error, interrupt.id));
      return;
    }
    for (const control of el.elements) control.disabled = true;
    el.classList.add('answered');
    onDone?.(result);
  });
  return el;
}

function questionOf(value) {
  if (!isObject(value)) return h('p', { class: 'question' }, show(value));
  const key = TEXT_KEYS.find((k) => typeof value[k] === 'string');
  const rest = Object.fromEntries(Object.entries(value).filter(([k]) => k !== key));
  return h('div', {}, key ? h('p', { class: 'question' }, value[key]) : null,
    Object.keys(rest).length ? valueTable(rest, 'Details') : null);
}

function typedForm(interrupt) {
  if (interrupt.response_schema) return schemaForm(interrupt.response_schema);
  // No schema: any answer; JSON when it parses, the text otherwise.
  const form = schemaForm({ title: 'Answer', type: 'string', description: 'Text, or JSON' });
  return {
    el: form.el,
    showErrors: form.showErrors,
    read() {
      const { value, problems } = form.read();
      if (problems.length || value === undefined) return { value, problems: problems.length ? problems : [['', 'Write an answer.']] };
      try { return { value: JSON.parse(value), problems }; } catch { return { value, problems }; }
    },
  };
}

// One decision per action: buttons for the decisions each allows; edit opens the arguments as
// a form, respond asks for the answer, reject for an optional reason.
function reviewForm(request) {
  const actions = request.action_requests.map((action, i) =>
    actionPart(action, request.review_configs[i] || {}, i, request.action_requests.length));
  const formError = h('p', { class: 'error form-error', role: 'alert' });
  return {
    el: h('div', { class: 'review' }, actions.map((a) => a.el), formError),
    read() {
      formError.textContent = '';
      const problems = [];
      const decisions = actions.map((a) => a.read(problems));
      return { value: { decisions }, problems };
    },
    showErrors(problems) {
      for (const [path, message] of problems) {
        const m = /^decisions\[(\d+)\]/.exec(path);
        const part = m ? actions[Number(m[1])] : actions.length === 1 ? actions[0] : null;
        if (part) part.showError(path, message);
        else formError.textContent = path ? `${path}: ${message}` : message;
      }
    },
  };
}

function actionPart(action, config, index, count) {
  const allowed = config.allowed_decisions || Object.keys(NAMES);
  const prefix = `decisions[${index}]`;
  let chosen = null;
  let detail = null; // {form} of the chosen decision's fields
  const area = h('div', { class: 'decision-area' });
  const chooseError = h('p', { class: 'error', role: 'alert' });
  const buttons = allowed.map((kind) => h('button', {
    type: 'button', class: `decision decision-${kind}`, 'aria-pressed': 'false',
    onclick: () => choose(kind),
  }, NAMES[kind] || kind));

  function choose(kind) {
    chosen = kind;
    chooseError.textContent = '';
    buttons.forEach((b, i) => b.setAttribute('aria-pressed', String(allowed[i] === kind)));
    detail = null;
    area.replaceChildren();
    if (kind === 'edit') {
      const schema = config.args_schema || inferSchema(action.args);
      detail = schemaForm(schema, { initial: action.args });
      area.append(h('h5', {}, `Edit the arguments of ${action.name}`), detail.el);
    } else if (kind === 'respond') {
      detail = schemaForm({ title: 'Response', type: 'string', description: `Sent back instead of running ${action.name}` });
      area.append(detail.el);
    } else if (kind === 'reject') {
      detail = schemaForm({ title: 'Reason', type: 'string', description: 'Optional' }, { optional: true });
      area.append(detail.el);
    }
    const first = area.querySelector('input, select, textarea');
    if (first) first.focus();
  }

  const title = count > 1 ? `Action ${index + 1}: ${action.name}` : action.name;
  const el = h('section', { class: 'action' },
    h('h4', {}, 'Tool call ', h('code', {}, title)),
    action.description ? h('p', { class: 'question' }, action.description) : null,
    valueTable(action.args, 'Arguments'),
    h('div', { class: 'decisions', role: 'group', 'aria-label': `Decision for ${action.name}` }, buttons),
    chooseError, area);

  return {
    el,
    read(problems) {
      if (!chosen) {
        chooseError.textContent = 'Choose a decision.';
        problems.push([prefix, 'Choose a decision.']);
        return null;
      }
      const decision = { type: chosen };
      if (!detail) return decision;
      const { value, problems: found } = detail.read();
      if (chosen === 'edit') {
        decision.args = value;
        found.forEach(([p, m]) => problems.push([p ? `${prefix}.args.${p}` : `${prefix}.args`, m]));
      } else if (value !== undefined) decision.message = value;
      else if (chosen === 'respond') {
        detail.showErrors([['', 'Write the response.']]);
        problems.push([`${prefix}.message`, 'Write the response.']);
      }
      return decision;
    },
    showError(path, message) {
      if (detail && path.startsWith(`${prefix}.args`) && chosen === 'edit') {
        detail.showErrors([[path.slice(`${prefix}.args`.length).replace(/^\./, ''), message]]);
      } else if (detail && path === `${prefix}.message`) {
        detail.showErrors([['', message]]);
      } else chooseError.textContent = message;
    },
  };
}
