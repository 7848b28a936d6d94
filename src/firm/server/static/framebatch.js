// Events gathered until the next frame, then handed over together: however many messages a
// busy company's feed delivers between two frames, the views do their work once.

export class FrameBatch {
  /** show(events, fresh) gets every event since the last call, and those after `since`. */
  constructor(show, { fallbackMs = 250 } = {}) {
    this.show = show;
    this.fallbackMs = fallbackMs;
    this.events = [];
    this.fresh = [];
    this.frame = null;
    this.timer = null;
  }

  add(events, since = 0) {
    for (const e of events) {
      this.events.push(e);
      if (e.seq > since) this.fresh.push(e);
    }
    if (this.frame !== null) return;
    this.frame = requestAnimationFrame(() => this.flush());
    // A hidden tab gets no frames: it still takes the events, a few times a second.
    this.timer = setTimeout(() => this.flush(), this.fallbackMs);
  }

  flush() {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.timer);
    this.frame = null;
    this.timer = null;
    const { events, fresh } = this;
    this.events = [];
    this.fresh = [];
    if (events.length) this.show(events, fresh);
  }
}
