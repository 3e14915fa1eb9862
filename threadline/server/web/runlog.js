// A run's progress, live: its server-sent events as readable lines, until it stops or ends.

import { api, streamRun } from './api.js';
import { h, show, fill } from './dom.js';

const ENDINGS = {
  interrupted: 'The run stopped again: it waits for a person.',
  idle: 'The run ended.',
  error: 'The run failed.',
  busy: 'The run is still going on.',
};

// Start a run on the thread and show its events in `box`; returns {error, status, refused
// (the answer was refused: nothing resumed), notStarted (the server refused the run itself)}.
export async function runWithProgress(box, threadId, body) {
  const list = h('ol', { class: 'runlog' });
  const heading = h('h4', {}, 'Run progress');
  fill(box, h('section', { class: 'run', 'aria-live': 'polite', 'aria-label': 'Run progress' }, heading, list));
  const say = (text, cls) => list.append(h('li', { class: cls || '' }, text));
  let error = null;
  try {
    for await (const { event, data } of streamRun(`/threads/${encodeURIComponent(threadId)}/runs/stream`, { stream_mode: ['updates', 'custom'], ...body })) {
      const mode = event.split('|')[0];
      if (mode === 'metadata') say(`Run ${String(data.run_id).slice(0, 8)} started.`);
      else if (mode === 'updates') describeUpdate(data).forEach((line) => say(line));
      else if (mode === 'custom') say(`Message: ${show(data)}`);
      else if (mode === 'error') {
        error = data;
        say(`Error: ${data.error ? `${data.error}: ` : ''}${data.message ?? show(data)}`, 'error');
      }
    }
  } catch (e) { // refused before it started (e.g. 409: another run is going on)
    say(`Error: ${e.message}`, 'error');
    return { error: { error: 'RequestFailed', message: e.message }, status: null, refused: false, notStarted: true };
  }
  const status = await settledStatus(threadId);
  const refused = error && /InvalidAnswerError|InvalidResumeError/.test(error.error || '');
  say(refused ? 'Nothing was resumed: the answer was refused.' : (ENDINGS[status] || 'The run ended.'), 'end');
  return { error, status, refused };
}

// The thread's status once the server has recorded where the run stopped (the stream can end
// a moment before the thread stops being "busy").
async function settledStatus(threadId) {
  let status = null;
  for (let tries = 0; tries < 30; tries++) {
    try {
      status = (await api('GET', `/threads/${encodeURIComponent(threadId)}`)).status;
    } catch {
      return null; // the thread is gone (a stateless run, or deleted meanwhile)
    }
    if (status !== 'busy') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return status;
}

function describeUpdate(data) {
  const lines = [];
  for (const [node, update] of Object.entries(data || {})) {
    if (node === '__interrupt__') {
      lines.push('Waiting for a person.');
      continue;
    }
    const keys = update && typeof update === 'object' ? Object.keys(update) : [];
    lines.push(`${node} finished${keys.length ? `, wrote ${keys.join(', ')}` : ''}.`);
  }
  return lines;
}
