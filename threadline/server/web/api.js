// The server's HTTP API, called like any other client: the same x-api-key rules.

const KEY = 'threadline.apiKey';

export const apiKey = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (value) => (value ? sessionStorage.setItem(KEY, value) : sessionStorage.removeItem(KEY)),
};

export class ApiError extends Error {
  constructor(status, detail) {
    super(detailText(detail));
    this.status = status;
    this.detail = detail;
  }
}

export function detailText(detail) {
  if (Array.isArray(detail)) {
    return detail.map((d) => `${(d.loc || []).join('.')}: ${d.msg}`).join('; ');
  }
  return typeof detail === 'string' ? detail : JSON.stringify(detail);
}

function headers(json, extra = {}) {
  const out = { ...extra };
  if (json) out['content-type'] = 'application/json';
  const key = apiKey.get();
  if (key) out['x-api-key'] = key;
  return out;
}

async function failure(res) {
  const data = await res.json().catch(() => null);
  return new ApiError(res.status, data?.detail ?? res.statusText);
}

export async function api(method, path, body) {
  const res = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return null;
  return res.json();
}

// POST a run and yield its server-sent events ({event, data}) as they arrive.
export async function* streamRun(path, body) {
  const res = await fetch(path, {
    method: 'POST',
    headers: headers(true, { accept: 'text/event-stream' }),
    body: JSON.stringify(body),
  });
  if (!res.ok) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = parseEvent(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (event) yield event;
    }
  }
}

function parseEvent(block) {
  let event = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
  }
  if (!data.length) return null;
  const text = data.join('\n');
  try { return { event, data: JSON.parse(text) }; } catch { return { event, data: text }; }
}
