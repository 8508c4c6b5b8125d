// The dashboard: every desktop with a live thumbnail, its state and who is
// in control, lifecycle buttons, and live updates from /v1/events.

import { ApiError, AuthError, api, desktopToken, forgetAll, forgetToken, showLogin, takeFragmentToken, tokenFor } from './auth.js';
import { streamEvents } from './events.js';
import { Thumbnails } from './thumbs.js';
import { age, controlText, el, notice } from './ui.js';

const grid = document.getElementById('desktops');
const cards = new Map(); // desktop id → {card, desktop}
let token = '';
let thumbs = null;
let stream = null;
let ticker = 0;

takeFragmentToken();
start();

function start() {
  token = tokenFor('');
  if (!token) { login(''); return; }
  api('/v1/desktops', { token }).then(() => run(), (e) => {
    if (e instanceof AuthError) { forgetToken(token); login('That token was not accepted: it is wrong or has expired.'); }
    else notice('Could not reach hostd: ' + e.message);
  });
}

function login(message) {
  teardown();
  showLogin(message, async (tok) => {
    const dt = desktopToken(tok);
    await api(dt ? `/v1/desktops/${encodeURIComponent(dt.desktop)}` : '/v1/desktops', { token: tok });
  }, (tok) => {
    // A desktop's own token is for its viewer only.
    const dt = desktopToken(tok);
    if (dt) { location.assign('/desktops/' + encodeURIComponent(dt.desktop)); return; }
    start();
  });
}

function authLost() {
  forgetToken(token);
  login('The token is no longer accepted: log in again.');
}

function teardown() {
  if (stream) stream.close();
  stream = null;
  clearInterval(ticker);
  for (const id of [...cards.keys()]) removeCard(id);
}

function run() {
  notice('');
  document.getElementById('logout').hidden = false;
  document.getElementById('logout').onclick = () => { forgetAll(); location.replace('/'); };
  thumbs = new Thumbnails(token, authLost);
  loadSnapshots();
  stream = streamEvents('/v1/events', token, {
    onOpen: () => { status('live'); reload(); },
    onEvent: ({ data }) => {
      if (data && data.pull) { showPull(data); return; }
      // Another host's events pass from here on; those it sent before are
      // missed (it restarted, or joined): what is shown is read again.
      if (data && data.type === 'fleet.following') { reload(); return; }
      if (!data || !data.desktop) return;
      if (data.type === 'desktop.deleted') removeCard(data.desktop.id);
      else upsert(data.desktop);
    },
    onDown: (e, ms) => status(`reconnecting in ${Math.round(ms / 1000)}s`),
    onAuth: authLost,
  });
  // Ages tick on their own; the host's line is read again with them.
  showHost();
  ticker = setInterval(() => {
    for (const { card, desktop } of cards.values()) card.querySelector('.age').textContent = age(desktop.created_at);
    showHost();
  }, 5000);
}

// showHost shows what the host admits: desktops, CPU pressure and the
// creates waiting for CPU. A desktop's token may not read it: no line then.
async function showHost() {
  const line = document.getElementById('host');
  try {
    const h = await api('/v1/host', { token });
    let text = `${h.desktops}/${h.max_desktops} desktops, CPU pressure ${Math.round(100 * h.cpu.pressure)}%`;
    if (h.cpu.bound > 0 && (h.cpu.pressure >= h.cpu.bound || h.cpu.queued > 0)) text += ` (over ${Math.round(100 * h.cpu.bound)}%: ${h.cpu.queued} creates waiting)`;
    line.textContent = text;
  } catch (e) {
    line.textContent = '';
  }
}

function status(s) { document.getElementById('events-status').textContent = s; }

// showPull tells how a fleet host's pull of a snapshot goes: the first
// create of a snapshot on a host that lacks it waits for it.
function showPull({ type, pull, host, summary }) {
  const where = host ? ` on ${host}` : '';
  let line = `pulling ${pull.snapshot}${where} from ${pull.from}: ${pull.total ? Math.floor(100 * pull.bytes / pull.total) : 0}%`;
  if (type === 'snapshot.pulled') line = `pulled ${pull.snapshot}${where} (${summary})`;
  if (type === 'snapshot.pull_failed') line = `pulling ${pull.snapshot}${where} failed: ${summary}`;
  document.getElementById('pulls').textContent = line;
}

async function reload() {
  try {
    const { desktops } = await api('/v1/desktops', { token });
    const seen = new Set();
    for (const d of desktops) { seen.add(d.id); upsert(d); }
    for (const id of [...cards.keys()]) if (!seen.has(id)) removeCard(id);
  } catch (e) {
    if (e instanceof AuthError) authLost();
    else notice('Could not list desktops: ' + e.message);
  }
}

async function loadSnapshots() {
  const form = document.getElementById('create');
  const sel = document.getElementById('create-snapshot');
  try {
    const { snapshots } = await api('/v1/snapshots', { token });
    sel.replaceChildren(...snapshots.filter((s) => !s.ephemeral).map((s) => el('option', { value: s.name }, s.name)));
    form.hidden = snapshots.length === 0;
  } catch (e) {
    // A desktop's token may not list snapshots: no create form then.
    form.hidden = true;
    return;
  }
  form.onsubmit = async (e) => {
    e.preventDefault();
    const body = { snapshot: sel.value };
    const name = document.getElementById('create-name').value.trim();
    if (name) body.name = name;
    await act(form.querySelector('button'), () => api('/v1/desktops', { method: 'POST', body, token }), (d) => {
      upsert(d);
      document.getElementById('create-name').value = '';
    });
  };
}

// act runs a request with its button disabled, showing errors.
async function act(button, req, ok) {
  button.disabled = true;
  try {
    const r = await req();
    notice('');
    if (ok) ok(r);
  } catch (e) {
    if (e instanceof AuthError) { authLost(); return; }
    notice(e instanceof ApiError ? e.message : 'Request failed: ' + e.message);
  } finally {
    button.disabled = false;
  }
}

function op(d, name, label) {
  return el('button', {
    type: 'button', class: 'small', 'data-op': name,
    onclick: (e) => act(e.currentTarget, () => api(`/v1/desktops/${encodeURIComponent(d.id)}/${name}`, { method: 'POST', body: {}, token }), (r) => {
      if (r && r.desktops) r.desktops.forEach(upsert);
      else if (r && r.id) upsert(r);
    }),
  }, label);
}

// deleteButton asks once more on the button itself (no modal dialog).
function deleteButton(d) {
  const b = el('button', { type: 'button', class: 'small danger', 'data-op': 'delete' }, 'Delete');
  let armed = 0;
  b.onclick = () => {
    if (!armed) {
      b.textContent = 'Really delete?';
      armed = setTimeout(() => { armed = 0; b.textContent = 'Delete'; }, 4000);
      return;
    }
    clearTimeout(armed);
    act(b, () => api(`/v1/desktops/${encodeURIComponent(d.id)}`, { method: 'DELETE', token }), () => removeCard(d.id));
  };
  return b;
}

function buttons(d) {
  const out = [];
  if (d.state === 'running') out.push(op(d, 'pause', 'Pause'));
  if (d.state === 'paused') out.push(op(d, 'resume', 'Resume'));
  if (d.state === 'hibernated') out.push(op(d, 'wake', 'Wake'));
  if (d.state === 'running' || d.state === 'paused') out.push(op(d, 'fork', 'Fork'));
  if (d.state !== 'stopping') out.push(deleteButton(d));
  return out;
}

function upsert(d) {
  const prev = cards.get(d.id);
  if (prev && JSON.stringify(prev.desktop) === JSON.stringify(d)) return;
  const viewer = '/desktops/' + encodeURIComponent(d.id);
  let card = prev && prev.card;
  if (!card) {
    const img = el('img', { alt: `Screen of ${d.name || d.id}`, width: 320, height: 200 });
    const box = el('a', { class: 'thumb', href: viewer, title: 'Open the viewer' }, img, el('span', { class: 'thumb-state' }));
    card = el('article', { class: 'card', dataset: { id: d.id } },
      box,
      el('div', { class: 'card-head' }, el('a', { class: 'name', href: viewer }), el('span', { class: 'badge state' })),
      el('dl', { class: 'facts' },
        el('dt', {}, 'snapshot'), el('dd', { class: 'snapshot' }),
        el('dt', {}, 'age'), el('dd', { class: 'age' }),
        el('dt', {}, 'control'), el('dd', { class: 'control' }),
        el('dt', { class: 'forkof' }, 'fork of'), el('dd', { class: 'forkof' })),
      el('p', { class: 'reason error', hidden: true }),
      el('div', { class: 'ops' }));
    grid.append(card);
    thumbs.watch(d.id, box, img, d.state);
  }
  cards.set(d.id, { card, desktop: d });
  card.dataset.state = d.state;
  card.dataset.control = d.control ? d.control.holder : 'agent';
  card.querySelector('.name').textContent = d.name || d.id;
  const st = card.querySelector('.state');
  st.textContent = d.state;
  st.className = 'badge state state-' + d.state;
  card.querySelector('.thumb-state').textContent = d.state === 'running' ? '' : d.state;
  card.querySelector('.snapshot').textContent = d.snapshot;
  card.querySelector('.age').textContent = age(d.created_at);
  card.querySelector('.age').title = new Date(d.created_at).toLocaleString();
  const ctl = card.querySelector('.control');
  ctl.textContent = controlText(d.control);
  ctl.classList.toggle('person', !!d.control && d.control.holder === 'person');
  for (const e of card.querySelectorAll('.forkof')) e.hidden = !d.fork_of;
  card.querySelector('dd.forkof').textContent = d.fork_of ? (cards.get(d.fork_of)?.desktop.name || d.fork_of) : '';
  const reason = card.querySelector('.reason');
  reason.textContent = d.reason || '';
  reason.hidden = !d.reason;
  card.querySelector('.ops').replaceChildren(...buttons(d));
  thumbs.setState(d.id, d.state);
  document.getElementById('empty').hidden = cards.size > 0;
}

function removeCard(id) {
  const c = cards.get(id);
  if (!c) return;
  if (thumbs) thumbs.forget(id);
  c.card.remove();
  cards.delete(id);
  document.getElementById('empty').hidden = cards.size > 0;
}
