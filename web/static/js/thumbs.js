// Live thumbnails for the dashboard: each card's picture is fetched from
// the screenshot API only while the card is on screen and the tab is
// visible, at most every MIN_MS, one request at a time per card, backing
// off while the screen does not change (X-Change-Counter stays the same).

import { AuthError, api } from './auth.js';
import { live } from './ui.js';

const MIN_MS = 400; // a few pictures a second at most
const MAX_MS = 4000;
const QUERY = 'format=jpeg&quality=60&width=320';

export class Thumbnails {
  constructor(token, onAuth) {
    this.token = token;
    this.onAuth = onAuth;
    this.byId = new Map();
    this.io = new IntersectionObserver((entries) => {
      for (const e of entries) {
        const t = this.byId.get(e.target.dataset.thumb);
        if (!t) continue;
        t.visible = e.isIntersecting;
        t.delay = MIN_MS;
        this.schedule(t, 0);
      }
    });
    document.addEventListener('visibilitychange', () => {
      for (const t of this.byId.values()) this.schedule(t, 0);
    });
  }

  // watch starts showing desktop id's screen in img (inside box).
  watch(id, box, img, state) {
    let t = this.byId.get(id);
    if (t) { t.state = state; this.schedule(t, 0); return; }
    t = { id, box, img, state, visible: false, inflight: false, timer: 0, delay: MIN_MS, counter: null, url: null };
    box.dataset.thumb = id;
    this.byId.set(id, t);
    this.io.observe(box);
  }

  setState(id, state) {
    const t = this.byId.get(id);
    if (!t || t.state === state) return;
    t.state = state;
    t.counter = null;
    t.delay = MIN_MS;
    this.schedule(t, 0);
  }

  forget(id) {
    const t = this.byId.get(id);
    if (!t) return;
    clearTimeout(t.timer);
    this.io.unobserve(t.box);
    if (t.url) URL.revokeObjectURL(t.url);
    this.byId.delete(id);
  }

  wanted(t) {
    return this.byId.get(t.id) === t && t.visible && !document.hidden && live(t.state);
  }

  schedule(t, ms) {
    clearTimeout(t.timer);
    t.timer = 0;
    if (!this.wanted(t) || t.inflight) return;
    t.timer = setTimeout(() => this.fetch(t), ms);
  }

  async fetch(t) {
    if (!this.wanted(t)) return;
    t.inflight = true;
    try {
      const res = await api(`/v1/desktops/${encodeURIComponent(t.id)}/screenshot?${QUERY}`, { token: this.token, raw: true });
      const counter = res.headers.get('X-Change-Counter');
      if (counter !== null && counter === t.counter) {
        await res.body.cancel();
        t.delay = Math.min(t.delay * 2, MAX_MS);
      } else {
        const url = URL.createObjectURL(await res.blob());
        await new Promise((ok) => { t.img.onload = ok; t.img.onerror = ok; t.img.src = url; });
        if (t.url) URL.revokeObjectURL(t.url);
        t.url = url;
        t.counter = counter;
        t.delay = MIN_MS;
        t.box.classList.add('has-picture');
      }
    } catch (e) {
      if (e instanceof AuthError) { this.onAuth(e); return; }
      // Not live yet, or the first frame is late: try again later.
      t.delay = MAX_MS;
    } finally {
      t.inflight = false;
    }
    this.schedule(t, t.delay);
  }
}
