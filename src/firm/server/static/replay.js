// Replay: one run rebuilt from its events alone, with the same reducer the live feed uses, at
// any moment of its history. The state at the end of a replay is the live state at the run's
// end, because both are the same events through the same Company.apply.

import { api } from "./api.js";
import { Company } from "./state.js";

export const SPEEDS = [1, 4, 16, 60];
// The most the API gives in one page: a 1,000-task run (7,400 events) in two requests, not four.
const PAGE = 5000;
// Quiet stretches longer than this play as if they were this long (seconds of run time), so a
// run that waited an hour on a slow model is not an hour of nothing.
const MAX_GAP = 8;
// The replay keeps to the wall clock: a slow frame (a big floor on a CPU-drawn canvas) skips
// states rather than slowing the run down. Only a stall longer than this is not made up.
const MAX_STEP = 5;

export class Replay {
  constructor(org, runId) {
    this.org = org;
    this.runId = runId;
    this.events = [];
    this.company = null;
    this.applied = 0; // events[0 .. applied) are in company
    this.t = 0; // position on the replay's own clock (seconds from the start)
    this.times = []; // each event's position on that clock
    this.playing = false;
    this.speed = 16;
    this.listeners = new Set();
    this.frame = null;
    this.lastTick = 0;
    // A hidden tab gets no frames; coming back, the replay goes on from where it was shown.
    document.addEventListener("visibilitychange", () => {
      this.lastTick = performance.now();
    });
  }

  /** Read every event of the run, a page at a time. */
  async load() {
    let after = 0;
    for (;;) {
      const page = await api.runEvents(this.runId, after, PAGE);
      this.events.push(...page.events);
      after = page.next_after;
      if (!page.more) break;
    }
    let pos = 0;
    this.times = this.events.map((e, i) => {
      if (i) pos += Math.min(MAX_GAP, Math.max(0, e.ts - this.events[i - 1].ts));
      return pos;
    });
    this.reset();
    return this;
  }

  get duration() {
    return this.times.length ? this.times[this.times.length - 1] : 0;
  }

  get seq() {
    return this.applied ? this.events[this.applied - 1].seq : 0;
  }

  /** The wall-clock time of the replay's position, for elapsed times on desks and cards. */
  wallTime() {
    if (!this.events.length) return Date.now() / 1000;
    const i = Math.max(0, this.applied - 1);
    return this.events[i].ts + Math.max(0, this.t - this.times[i]);
  }

  listen(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  reset() {
    this.company = new Company();
    this.company.now = () => this.wallTime();
    this.company.loadSnapshot({ org: this.org, tasks: [], agents: {} });
    this.applied = 0;
    this.t = 0;
  }

  /** Move to position t (seconds on the replay clock); tell listeners what was applied. */
  seek(t, { animate = false } = {}) {
    t = Math.max(0, Math.min(this.duration, t));
    let rebuilt = false;
    if (t < this.t) {
      this.reset();
      rebuilt = true;
    }
    this.t = t;
    const start = this.applied;
    let end = start;
    while (end < this.events.length && this.times[end] <= t) end++;
    const batch = this.events.slice(start, end);
    this.applied = end;
    if (batch.length) this.company.apply(batch);
    for (const fn of this.listeners) fn({ batch, rebuilt, animate });
  }

  toStart() {
    this.pause();
    this.seek(0);
  }

  toEnd() {
    this.pause();
    this.seek(this.duration);
  }

  play() {
    if (this.playing) return;
    if (this.t >= this.duration) this.seek(0);
    this.playing = true;
    this.lastTick = performance.now();
    const tick = (now) => {
      if (!this.playing) return;
      const dt = Math.min(MAX_STEP, Math.max(0, (now - this.lastTick) / 1000));
      this.lastTick = now;
      this.seek(this.t + dt * this.speed, { animate: true });
      if (this.t >= this.duration) {
        this.pause();
        return;
      }
      this.frame = requestAnimationFrame(tick);
    };
    this.frame = requestAnimationFrame(tick);
    this.notify();
  }

  pause() {
    this.playing = false;
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = null;
    this.notify();
  }

  notify() {
    for (const fn of this.listeners) fn({ batch: [], rebuilt: false, animate: false });
  }

  /** Everything the drawer shows for a task, as of the replay's position. */
  detail(taskId) {
    const task = this.company.tasks.get(taskId);
    if (!task) return null;
    const subtree = [];
    const walk = (id) => {
      for (const cid of this.company.children.get(id) ?? []) {
        const child = this.company.tasks.get(cid);
        if (child) subtree.push(child);
        walk(cid);
      }
    };
    walk(taskId);
    const tree = [task, ...subtree];
    const counts = {};
    for (const t of tree) counts[t.status] = (counts[t.status] ?? 0) + 1;
    const detail = {
      ...task,
      subtree,
      counts,
      tree_files: [...new Set(tree.flatMap((t) => t.files ?? []))],
    };
    const events = this.events.slice(0, this.applied).filter((e) => e.task_id === taskId);
    return { detail, events };
  }
}
