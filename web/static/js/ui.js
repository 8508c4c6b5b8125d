// Small DOM helpers shared by the pages.

// el builds an element: el('a', {href: '/', class: 'x'}, 'text', child).
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
}

// age says how long ago a time was, briefly: "12s", "5m", "3h", "2d".
export function age(iso, now = Date.now()) {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h';
  return Math.floor(s / 86400) + 'd';
}

// controlText says who is in control of a desktop.
export function controlText(c) {
  if (!c || c.holder !== 'person') return 'agent';
  return 'person' + (c.by ? ': ' + c.by : '');
}

// notice shows a message in the page's notice line (empty hides it).
export function notice(msg) {
  const n = document.getElementById('notice');
  n.textContent = msg || '';
  n.hidden = !msg;
}

// live reports whether a desktop in this state has a screen to show.
export function live(state) {
  return state === 'running' || state === 'paused';
}

// clock formats a time as HH:MM:SS in the browser's zone.
export function clock(d) {
  return new Date(d).toLocaleTimeString([], { hour12: false });
}
