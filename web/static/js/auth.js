// Tokens for the pages. A token lives only in this tab's sessionStorage:
// never in a URL that reaches the server (no query strings, which land in
// logs), never in a Referer (a token link carries it in the fragment, which
// browsers do not send, and takeFragmentToken removes it at once).

const DAEMON_KEY = 'warmdesk.token';
const DESKTOP_KEY = 'warmdesk.token.';
const NAME_KEY = 'warmdesk.name';

// AuthError: the server did not accept the token (401).
export class AuthError extends Error {}

// ApiError: any other failed request, with the API's error body.
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error ? body.error.code : '';
  }
}

// desktopToken parses a per-desktop token ("wdt1.DESKTOP.ROLE.EXPIRY.MAC"),
// or returns null for anything else (the daemon's token). The server checks
// the signature; the page only reads who it is for, to offer the right
// buttons and to keep it apart from the daemon's token.
export function desktopToken(tok) {
  const p = (tok || '').split('.');
  if (p.length !== 5 || p[0] !== 'wdt1') return null;
  return { desktop: p[1], role: p[2], expires: new Date(Number(p[3]) * 1000) };
}

export function storeToken(tok) {
  const dt = desktopToken(tok);
  sessionStorage.setItem(dt ? DESKTOP_KEY + dt.desktop : DAEMON_KEY, tok);
}

// tokenFor returns the token for a desktop's page (its own token first),
// or for the dashboard when id is empty.
export function tokenFor(id) {
  return (id && sessionStorage.getItem(DESKTOP_KEY + id)) || sessionStorage.getItem(DAEMON_KEY) || '';
}

export function forgetToken(tok) {
  for (const k of Object.keys(sessionStorage)) {
    if (k.startsWith(DAEMON_KEY) && sessionStorage.getItem(k) === tok) sessionStorage.removeItem(k);
  }
}

export function forgetAll() {
  for (const k of Object.keys(sessionStorage)) {
    if (k.startsWith(DAEMON_KEY)) sessionStorage.removeItem(k);
  }
}

// takeFragmentToken moves "#token=..." from the address bar into session
// storage and rewrites the current history entry without it, before the
// page makes any request.
export function takeFragmentToken() {
  if (!location.hash) return;
  const h = new URLSearchParams(location.hash.slice(1));
  if (!h.has('token')) return;
  const tok = h.get('token');
  h.delete('token');
  const rest = h.toString();
  history.replaceState(history.state, '', location.pathname + location.search + (rest ? '#' + rest : ''));
  if (tok) storeToken(tok);
}

export function personName() {
  return localStorage.getItem(NAME_KEY) || 'a person';
}

// api calls the JSON API with the token as a header. raw returns the
// Response itself (for pictures).
export async function api(path, { method = 'GET', body, token, raw = false, signal, headers = {} } = {}) {
  const h = { Authorization: 'Bearer ' + token, ...headers };
  let payload = body;
  if (body !== undefined && typeof body !== 'string' && !(body instanceof Blob)) {
    h['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  const res = await fetch(path, { method, headers: h, body: payload, signal, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' });
  if (res.status === 401) throw new AuthError('the token was not accepted');
  if (!res.ok) {
    let b = null;
    try { b = await res.json(); } catch { /* not JSON */ }
    throw new ApiError(res.status, b);
  }
  if (raw) return res;
  if (res.status === 204) return null;
  return res.json();
}

// showLogin replaces the page with the login screen. check(token) resolves
// once the server accepts the token (and throws AuthError when it does not);
// then the token is stored and done(token) runs.
export function showLogin(message, check, done) {
  document.body.classList.add('locked');
  let root = document.getElementById('login');
  if (!root) {
    root = document.getElementById('login-template').content.firstElementChild.cloneNode(true);
    document.body.append(root);
  }
  const form = root.querySelector('#login-form');
  const input = root.querySelector('#login-token');
  const name = root.querySelector('#login-name');
  const err = root.querySelector('#login-error');
  name.value = localStorage.getItem(NAME_KEY) || '';
  const say = (m) => { err.textContent = m; err.hidden = !m; };
  say(message || '');
  input.value = '';
  input.focus();
  form.onsubmit = async (e) => {
    e.preventDefault();
    const tok = input.value.trim();
    if (name.value.trim()) localStorage.setItem(NAME_KEY, name.value.trim());
    say('');
    form.querySelector('button[type=submit]').disabled = true;
    try {
      await check(tok);
      input.value = '';
      storeToken(tok);
      root.remove();
      document.body.classList.remove('locked');
      done(tok);
    } catch (e) {
      say(e instanceof AuthError ? 'That token was not accepted: it is wrong or has expired.' : 'Could not check the token: ' + e.message);
    } finally {
      form.querySelector('button[type=submit]').disabled = false;
    }
  };
}
