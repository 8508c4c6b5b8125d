// Server-sent events over fetch. EventSource cannot send an Authorization
// header, and the token must not go in the URL, so the stream is read and
// parsed here instead.

import { AuthError } from './auth.js';

const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 15000;

// streamEvents reads path until close() is called, reconnecting with
// backoff. onOpen runs on every (re)connect: events may have been missed
// while disconnected, so the page reloads what it shows there.
export function streamEvents(path, token, { onOpen, onEvent, onDown, onAuth }) {
  const ctl = new AbortController();
  let retry = RETRY_MIN_MS;
  let timer = null;

  async function run() {
    try {
      const res = await fetch(path, {
        headers: { Authorization: 'Bearer ' + token, Accept: 'text/event-stream' },
        signal: ctl.signal, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      });
      if (res.status === 401) throw new AuthError('the token was not accepted');
      if (!res.ok || !res.body) throw new Error(`events: HTTP ${res.status}`);
      retry = RETRY_MIN_MS;
      onOpen && onOpen();
      await read(res.body, onEvent);
      throw new Error('events: the stream ended');
    } catch (e) {
      if (ctl.signal.aborted) return;
      if (e instanceof AuthError) { onAuth && onAuth(e); return; }
      onDown && onDown(e, retry);
      timer = setTimeout(run, retry);
      retry = Math.min(retry * 2, RETRY_MAX_MS);
    }
  }
  run();
  return { close() { ctl.abort(); clearTimeout(timer); } };
}

async function read(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
      const ev = parse(block);
      if (ev) onEvent(ev);
    }
  }
}

// parse turns one event block into {type, data}; comments (keepalives)
// and blocks without data are skipped.
function parse(block) {
  let type = 'message';
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'event') type = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  try {
    return { type, data: JSON.parse(data.join('\n')) };
  } catch {
    return null;
  }
}
