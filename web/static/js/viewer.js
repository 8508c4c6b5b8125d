// The viewer: one desktop live through noVNC over /v1/desktops/{id}/vnc,
// view-only until this person takes control, with the desktop's events in
// a strip below, clipboard paste and a screenshot button.

import { ApiError, AuthError, api, desktopToken, forgetToken, personName, showLogin, takeFragmentToken, tokenFor } from './auth.js';
import { streamEvents } from './events.js';
import { clock, controlText, el, live, notice } from './ui.js';

const NOVNC = '/static/vendor/novnc/core/rfb.js';
const RETRY_MIN_MS = 1000;
const RETRY_MAX_MS = 10000;
const MAX_ACTIVITY = 60;

const id = decodeURIComponent(location.pathname.split('/')[2] || '');
const $ = (s) => document.getElementById(s);
const screen = $('screen');

let token = '';
let mayControl = false;
let desktop = null;
let RFB = null;
let rfb = null;
let rfbMode = 'none';
let retry = RETRY_MIN_MS;
let retryTimer = 0;
// mine is the control.since of the control this page took: the page drives
// the desktop only while that same hold lasts (someone else taking over, or
// a hand back from anywhere, ends it).
let mine = null;
let stream = null;
let loggedMode = ''; // the last mode the strip announced, so reconnects stay quiet

// For tests and the console: the live noVNC connection, if any.
window.warmdesk = Object.freeze({ get rfb() { return rfb; } });

takeFragmentToken();
start();

function start() {
  token = tokenFor(id);
  if (!token) { login(''); return; }
  api(`/v1/desktops/${encodeURIComponent(id)}`, { token }).then(run, (e) => {
    if (e instanceof AuthError) { forgetToken(token); login('That token was not accepted: it is wrong or has expired.'); }
    else if (e instanceof ApiError && e.status === 404) notice(`There is no desktop ${id}.`);
    else notice('Could not reach hostd: ' + e.message);
  });
}

function login(message) {
  stop();
  showLogin(message, (tok) => api(`/v1/desktops/${encodeURIComponent(id)}`, { token: tok }), () => start());
}

function authLost() {
  forgetToken(token);
  login('The token is no longer accepted: log in again.');
}

function stop() {
  if (stream) stream.close();
  stream = null;
  disconnect();
}

async function run(d) {
  notice('');
  const dt = desktopToken(token);
  mayControl = !dt || dt.role === 'control' || dt.role === 'shell';
  if (dt) log(`using a ${dt.role} token for this desktop, valid until ${clock(dt.expires)}`);
  $('take').onclick = takeControl;
  $('handback').onclick = handBack;
  $('shot').onclick = screenshot;
  $('shot').hidden = false;
  setupPaste();
  update(d);
  try {
    RFB = (await import(NOVNC)).default;
  } catch (e) {
    const res = await fetch(NOVNC, { method: 'HEAD', cache: 'no-store' }).catch(() => null);
    notice(res && res.status === 404
      ? 'noVNC is not installed on this host: run ./scripts/setup, then reload this page.'
      : 'Could not load noVNC: ' + e.message);
    screen.dataset.novnc = 'missing';
    return;
  }
  stream = streamEvents(`/v1/events?desktop=${encodeURIComponent(id)}`, token, {
    onOpen: refresh,
    onEvent: ({ data }) => {
      if (!data || !data.desktop || data.desktop.id !== id) return;
      logEvent(data);
      if (data.type === 'desktop.deleted') { gone(); return; }
      update(data.desktop);
      if (data.type === 'desktop.reset') reconnectNow();
    },
    onDown: (e, ms) => log(`events: disconnected, retrying in ${Math.round(ms / 1000)}s`),
    onAuth: authLost,
  });
  sync();
}

async function refresh() {
  try {
    update(await api(`/v1/desktops/${encodeURIComponent(id)}`, { token }));
  } catch (e) {
    if (e instanceof AuthError) authLost();
    else if (e instanceof ApiError && e.status === 404) gone();
  }
}

function gone() {
  desktop = null;
  mine = null;
  disconnect();
  notice('This desktop was deleted.');
  for (const b of ['take', 'handback', 'paste-open', 'shot']) $(b).hidden = true;
  $('state').textContent = 'deleted';
}

function holding(d) {
  return !!mine && d.control && d.control.holder === 'person' && d.control.since === mine;
}

// update shows a desktop's state and control, and brings the connection in
// line with them.
function update(d) {
  desktop = d;
  if (mine && !holding(d)) {
    mine = null;
    log(d.control.holder === 'person' ? `${d.control.by || 'someone'} took control over` : 'control went back to the agent');
  }
  document.title = `${d.name || d.id} · warmdesk`;
  $('title').textContent = d.name || d.id;
  $('state').textContent = d.state;
  $('state').className = 'badge state-' + d.state;
  $('rec').hidden = !d.recording;
  const c = $('control');
  const me = holding(d);
  c.textContent = me ? 'You are in control' : d.control.holder === 'person' ? `${d.control.by || 'A person'} is in control` : 'Agent in control';
  c.className = 'badge ' + (d.control.holder === 'person' ? 'person' : 'agent');
  document.body.dataset.control = me ? 'mine' : d.control.holder;
  $('take').hidden = !mayControl || me || !live(d.state);
  $('handback').hidden = !mayControl || d.control.holder !== 'person';
  $('paste-open').hidden = !mayControl || !live(d.state);
  sync();
}

// sync connects, reconnects or disconnects noVNC to match the desktop.
function sync() {
  if (!RFB || !desktop) return;
  const want = live(desktop.state) ? (holding(desktop) ? 'control' : 'view') : 'none';
  if (want === rfbMode && (rfb || retryTimer)) return;
  clearTimeout(retryTimer);
  retryTimer = 0;
  // A new mode starts its backoff afresh; a retry of the same mode keeps it
  // growing, so a refused connection is not retried every second forever.
  if (want !== rfbMode) retry = RETRY_MIN_MS;
  if (want === 'none') {
    disconnect();
    conn(`${desktop.state}: no screen`);
    return;
  }
  connect(want);
}

function connect(mode) {
  disconnect();
  rfbMode = mode;
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const url = `${scheme}//${location.host}/v1/desktops/${encodeURIComponent(id)}/vnc?mode=${mode}`;
  conn('connecting…');
  // The token travels as a WebSocket subprotocol: a browser cannot set an
  // Authorization header on a WebSocket, and a URL would be logged.
  const r = new RFB(screen, url, { wsProtocols: ['binary', 'bearer.' + token], shared: true });
  rfb = r;
  r.viewOnly = mode !== 'control';
  r.scaleViewport = true;
  r.resizeSession = false;
  r.showDotCursor = mode === 'control';
  r.background = 'transparent';
  r.addEventListener('connect', () => {
    if (rfb !== r) return;
    retry = RETRY_MIN_MS;
    screen.dataset.connected = 'true';
    screen.dataset.mode = mode;
    conn(mode === 'control' ? 'live: your input goes to the desktop' : 'live: view only');
    if (mode !== loggedMode) log(mode === 'control' ? 'connected: your mouse and keyboard drive the desktop' : 'connected: view only');
    loggedMode = mode;
    if (mode === 'control') r.focus();
  });
  r.addEventListener('disconnect', () => {
    if (rfb !== r) return; // a connection this page already replaced
    rfb = null;
    screen.dataset.connected = 'false';
    // The server ends a control connection when control goes back to the
    // agent: find out what changed, then reconnect as that allows.
    const wait = retry;
    retry = Math.min(retry * 2, RETRY_MAX_MS);
    conn(`disconnected: retrying in ${Math.round(wait / 1000)}s`);
    retryTimer = setTimeout(async () => {
      retryTimer = 0;
      await refresh();
      if (!rfb && !retryTimer && desktop && live(desktop.state)) connect(holding(desktop) ? 'control' : 'view');
    }, wait);
  });
}

// reconnectNow connects to a reset desktop's new machine at once, not after
// the backoff that the old connection's end started.
function reconnectNow() {
  if (!desktop || !live(desktop.state)) return;
  retry = RETRY_MIN_MS;
  connect(holding(desktop) ? 'control' : 'view');
}

function disconnect() {
  clearTimeout(retryTimer);
  retryTimer = 0;
  const r = rfb;
  rfb = null;
  rfbMode = 'none';
  screen.dataset.connected = 'false';
  screen.dataset.mode = 'none';
  if (r) r.disconnect();
}

function conn(s) { $('conn').textContent = s; }

async function takeControl() {
  const b = $('take');
  b.disabled = true;
  try {
    const d = await api(`/v1/desktops/${encodeURIComponent(id)}/control`, { method: 'POST', body: { holder: 'person', by: personName() }, token });
    mine = d.control.since;
    log('you took control: the agent\'s actions are refused until you hand back');
    update(d);
  } catch (e) {
    failed(e, 'take control');
  } finally {
    b.disabled = false;
  }
}

async function handBack() {
  const b = $('handback');
  b.disabled = true;
  try {
    const d = await api(`/v1/desktops/${encodeURIComponent(id)}/control`, { method: 'POST', body: { holder: 'agent' }, token });
    if (mine) log('you handed control back to the agent');
    mine = null;
    update(d);
  } catch (e) {
    failed(e, 'hand back');
  } finally {
    b.disabled = false;
  }
}

function failed(e, what) {
  if (e instanceof AuthError) { authLost(); return; }
  notice(`Could not ${what}: ${e.message}`);
}

async function screenshot() {
  const b = $('shot');
  b.disabled = true;
  try {
    const res = await api(`/v1/desktops/${encodeURIComponent(id)}/screenshot?format=png`, { token, raw: true });
    const url = URL.createObjectURL(await res.blob());
    const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
    const a = el('a', { href: url, download: `warmdesk-${id}-${stamp}.png`, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    log('screenshot saved');
  } catch (e) {
    failed(e, 'take a screenshot');
  } finally {
    b.disabled = false;
  }
}

function setupPaste() {
  const form = $('paste');
  const open = $('paste-open');
  const show = (on) => {
    form.hidden = !on;
    open.setAttribute('aria-expanded', String(on));
    if (on) $('paste-text').focus();
  };
  open.onclick = () => show(form.hidden);
  $('paste-cancel').onclick = () => show(false);
  form.onsubmit = async (e) => {
    e.preventDefault();
    const text = $('paste-text').value;
    const st = $('paste-status');
    st.textContent = 'sending…';
    try {
      await api(`/v1/desktops/${encodeURIComponent(id)}/clipboard`, { method: 'PUT', body: { text }, token });
      st.textContent = '';
      log(`clipboard set (${text.length} characters): paste it in the desktop`);
      show(false);
      if (rfb && rfbMode === 'control') rfb.focus();
    } catch (err) {
      if (err instanceof AuthError) { authLost(); return; }
      st.textContent = err instanceof ApiError && err.status === 404 && err.code !== 'not_found'
        ? 'this hostd has no clipboard API'
        : 'failed: ' + err.message;
    }
  };
}

// logEvent describes a desktop event in the activity strip.
function logEvent(ev) {
  const d = ev.desktop;
  switch (ev.type) {
    case 'desktop.state':
      log(`state: ${d.state}${d.reason ? ' (' + d.reason + ')' : ''}`, ev.time, 'state');
      break;
    case 'desktop.control':
      log(d.control.holder === 'person' ? `control: ${controlText(d.control)}` : 'control: agent', ev.time, 'control');
      break;
    case 'desktop.deleted':
      log('deleted', ev.time, 'state');
      break;
    case 'desktop.reset':
      log(`reset to ${d.snapshot}`, ev.time, 'state');
      break;
    case 'desktop.network':
      // A connection the guest made (or a policy change, without summary).
      log(ev.summary ? `network: ${ev.summary}` : `network policy: ${d.network.mode}`, ev.time,
        ev.summary && ev.summary.startsWith('refused') ? 'refused' : 'network');
      break;
    default:
      // Other events (an agent's actions, once hostd publishes them) show
      // their type and, when they have one, their summary.
      log(ev.summary ? `${ev.type}: ${ev.summary}` : ev.type, ev.time, ev.type.includes('action') ? 'action' : 'other');
  }
}

function log(text, time = new Date().toISOString(), kind = 'page') {
  const list = $('activity');
  list.prepend(el('li', { class: 'kind-' + kind }, el('time', { datetime: time }, clock(time)), ' ', text));
  while (list.children.length > MAX_ACTIVITY) list.lastElementChild.remove();
}
