// The page's entry: the API-key field, and which view the address (#/inbox, #/threads,
// #/thread/<id>) shows.

import { apiKey } from './api.js';
import { h, fill } from './dom.js';
import { renderInbox } from './inbox.js';
import { renderThread } from './thread.js';
import { renderThreads } from './threads.js';

const main = document.getElementById('main');

function route() {
  const [path, query] = (location.hash.replace(/^#/, '') || '/inbox').split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean);
  const view = parts[0] || 'inbox';
  for (const link of document.querySelectorAll('nav a')) {
    if (link.dataset.view === view) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (view === 'thread' && parts[1]) return renderThread(main, decodeURIComponent(parts[1]), params);
  if (view === 'threads') return renderThreads(main, params);
  return renderInbox(main, params);
}

async function show() {
  main.setAttribute('aria-busy', 'true');
  try {
    await route();
  } catch (e) {
    const hint = e.status === 401
      ? 'This server needs an API key: enter it above.'
      : e.status === 404 ? 'Not found (or not visible with this API key).' : '';
    fill(main, h('h1', {}, 'Something went wrong'),
      h('p', { class: 'error', role: 'alert' }, e.message), hint ? h('p', {}, hint) : null);
  } finally {
    main.removeAttribute('aria-busy');
    document.title = `${main.querySelector('h1')?.textContent || ''} · threadline`;
  }
}

const keyForm = document.getElementById('key-form');
const keyInput = document.getElementById('api-key');
keyInput.value = apiKey.get();
keyForm.addEventListener('submit', (e) => {
  e.preventDefault();
  apiKey.set(keyInput.value.trim());
  show();
});
window.addEventListener('hashchange', show);
show();
