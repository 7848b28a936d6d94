// The timeline: one row per agent, a bar per session, what ran in parallel at a glance.
// It shows one run: a replay's, at the scrubber's position, or live the newest goal, read from
// the run's events and kept up by the live feed. Rows are placed by the org chart and only the
// rows in view are in the page, so a company of hundreds scrolls as lightly as one of seven.

import { api } from "./api.js";
import { criticalPath } from "./critical_path.js";
import { SessionLog } from "./sessions.js";
import { TimeWindow } from "./timeline_zoom.js";
import { clip, duration, el, hue, perFrame } from "./util.js";

const ROW = 30; // px per agent row
const OVERSCAN = 8; // rows drawn beyond the visible ones
const PAGE = 2000;
const MANY_LINKS = 120; // past this, only the critical path's links and the hovered bar's show
const SVG = "http://www.w3.org/2000/svg";
const STEPS = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];

const OUTCOME_LABEL = {
  done: "Done",
  failed: "Failed",
  cancelled: "Cancelled",
  running: "Still running",
  handed: "Handed work down, then waited",
  interrupted: "Interrupted (worker lost; run again)",
};

const LEGEND = { done: "Done", failed: "Failed", cancelled: "Cancelled", running: "Running", handed: "Handed work down" };

export class Timeline {
  /** live: the live Company; replay(): the Replay being watched, or null. */
  constructor(root, { live, replay, onOpenTask }) {
    this.root = root;
    this.live = live;
    this.replay = replay;
    this.onOpenTask = onOpenTask;
    this.everyone = false;
    // The live run: its id, its events so far, and events that came while its page loaded.
    this.liveRun = null;
    this.liveEvents = [];
    this.pending = null; // non-null while loading
    this.cache = { key: null, model: null, path: null };
    this.nodes = new Map(); // bar / name id -> element, reused across renders
    this.queue = perFrame(() => this.render());
    this.window = new TimeWindow(() => this.queue());
    this.build();
  }

  build() {
    this.caption = el("p", { class: "tl-caption", id: "tl-caption" });
    this.pathNote = el("p", { class: "tl-path", id: "tl-path" });
    this.toggle = el("input", { type: "checkbox", id: "tl-everyone", onchange: () => {
      this.everyone = this.toggle.checked;
      this.render();
    } });
    const legend = el(
      "ul",
      { class: "tl-legend", "aria-label": "What the bars mean" },
      Object.entries(LEGEND).map(([o, text]) => el("li", {}, el("span", { class: "tl-swatch", dataset: { outcome: o } }), text)),
      el("li", {}, el("span", { class: "tl-swatch wait" }), "Waiting on reports"),
      el("li", {}, el("span", { class: "tl-swatch wait person" }), "Waiting on a person"),
      el("li", {}, el("span", { class: "tl-swatch critical" }), "Critical path"),
    );
    const zoomButton = (id, text, label, act) =>
      el("button", { type: "button", class: "tl-zoom-btn", id, "aria-label": label, title: label, onclick: act }, text);
    this.zoomOut = zoomButton("tl-zoom-out", "−", "Zoom out", () => this.window.zoom(1.6));
    this.zoomIn = zoomButton("tl-zoom-in", "+", "Zoom in", () => this.window.zoom(1 / 1.6));
    this.zoomAll = zoomButton("tl-zoom-all", "Whole run", "Show the whole run", () => this.window.reset());
    const zoom = el(
      "div",
      { class: "tl-zoom", role: "group", "aria-label": "Zoom the timeline (Ctrl + wheel zooms, drag or Shift + wheel pans)" },
      this.zoomOut,
      this.zoomIn,
      this.zoomAll,
    );
    // With several goals live, which one to draw (by default the newest, following new ones).
    this.chosen = null;
    this.goalPick = el("select", { id: "tl-goal", onchange: () => {
      this.chosen = this.goalPick.value || null;
      this.render();
    } });
    this.goalWrap = el("label", { class: "tl-toggle tl-goal", hidden: true }, "Goal ", this.goalPick);
    const head = el(
      "div",
      { class: "tl-head" },
      el("div", {}, el("h2", {}, "Timeline"), this.caption, this.pathNote),
      this.goalWrap,
      el("label", { class: "tl-toggle" }, this.toggle, " Everyone in the chart"),
      zoom,
      legend,
    );
    this.ticks = el("div", { class: "tl-ticks", "aria-hidden": "true" });
    this.axis = el("div", { class: "tl-axis" }, el("div", { class: "tl-corner" }, "Agent"), this.ticks);
    this.names = el("div", { class: "tl-names" });
    this.grid = el("div", { class: "tl-grid", "aria-hidden": "true" });
    this.svg = document.createElementNS(SVG, "svg");
    this.svg.setAttribute("class", "tl-links");
    this.svg.setAttribute("preserveAspectRatio", "none");
    this.svg.setAttribute("aria-hidden", "true");
    this.bars = el("div", { class: "tl-bars" });
    this.nowLine = el("div", { class: "tl-now", "aria-hidden": "true", hidden: true });
    this.lanes = el("div", { class: "tl-lanes" }, this.grid, this.svg, this.bars, this.nowLine);
    this.body = el("div", { class: "tl-body" }, this.names, this.lanes);
    this.empty = el("p", { class: "tl-empty", hidden: true });
    this.frame = el("div", { class: "tl-frame", tabindex: "-1" }, this.axis, this.body);
    this.tip = el("div", { class: "tl-tip", role: "tooltip", id: "tl-tip", hidden: true });
    this.root.replaceChildren(head, this.empty, this.frame, this.tip);

    this.frame.addEventListener("scroll", () => this.queue(), { passive: true });
    this.window.attach(this.lanes, this.frame);
    new ResizeObserver(() => this.queue()).observe(this.frame);
    this.bars.addEventListener("pointerover", (e) => this.hover(e.target.closest(".tl-bar"), e));
    this.bars.addEventListener("pointermove", (e) => this.placeTip(e.clientX, e.clientY));
    this.bars.addEventListener("pointerleave", () => this.hover(null));
    this.bars.addEventListener("focusin", (e) => {
      const bar = e.target.closest(".tl-bar");
      const r = bar?.getBoundingClientRect();
      this.hover(bar);
      if (r) this.placeTip(r.left + r.width / 2, r.bottom);
    });
    this.bars.addEventListener("focusout", () => this.hover(null));
    this.bars.addEventListener("click", (e) => {
      const bar = e.target.closest(".tl-bar");
      if (bar) this.onOpenTask(bar.dataset.task);
    });
  }

  // --- which events -------------------------------------------------------------------------

  /** Live events, in order: kept for the live run whatever view shows. */
  onEvents(events) {
    if (!this.liveRun) return;
    for (const e of events) {
      const task = this.live.tasks.get(e.task_id);
      if ((task?.root_id ?? e.task_id) !== this.liveRun) continue;
      if (this.pending) this.pending.push(e);
      else if (!this.liveEvents.length || e.seq > this.liveEvents[this.liveEvents.length - 1].seq) this.liveEvents.push(e);
    }
    if (!this.root.hidden) this.queue();
  }

  /** The chosen goal live, else the newest; load its events when it changed. */
  followLive() {
    const roots = this.live.roots();
    if (this.chosen && !roots.some((r) => r.id === this.chosen)) this.chosen = null;
    this.offerGoals(roots);
    const newest = this.chosen ?? roots[0]?.id ?? null;
    if (newest === this.liveRun) return;
    this.liveRun = newest;
    this.liveEvents = [];
    this.pending = null;
    if (newest) this.load(newest);
  }

  /** The goal picker: shown while more than one goal is live on the page. */
  offerGoals(roots) {
    this.goalWrap.hidden = roots.length < 2;
    const key = roots.map((r) => `${r.id}:${r.status}`).join(",");
    if (this.goalsKey !== key) {
      this.goalsKey = key;
      const option = (value, text) => el("option", { value }, text);
      this.goalPick.replaceChildren(
        option("", "The newest goal"),
        ...roots.map((r) => option(r.id, `${clip(r.title, 60)} · ${r.status.replace("_", " ")}`)),
      );
    }
    if (this.goalPick.value !== (this.chosen ?? "")) this.goalPick.value = this.chosen ?? "";
  }

  async load(runId) {
    const pending = (this.pending = []);
    const got = [];
    try {
      let after = 0;
      for (;;) {
        const page = await api.runEvents(runId, after, PAGE);
        got.push(...page.events);
        after = page.next_after;
        if (!page.more) break;
      }
    } catch {
      /* the feed's events alone still draw what happens from now on */
    }
    if (this.liveRun !== runId || this.pending !== pending) return; // another run took over
    const last = got.length ? got[got.length - 1].seq : 0;
    this.liveEvents = [...got, ...pending.filter((e) => e.seq > last)];
    this.pending = null;
    this.queue();
  }

  /** {runId, events, count, now, span, company, replay}: draw events[0 .. count). */
  source() {
    const replay = this.replay();
    if (replay) {
      this.goalWrap.hidden = true; // a replay draws the run it replays
      const events = replay.events;
      return {
        runId: replay.runId,
        events,
        count: replay.applied,
        now: replay.applied ? replay.wallTime() : events[0]?.ts ?? 0,
        // A replay keeps the whole run's span, so bars fill in along a fixed axis.
        span: events.length ? [events[0].ts, events[events.length - 1].ts] : null,
        company: replay.company,
        replay: true,
      };
    }
    this.followLive();
    const events = this.liveEvents;
    const lastTs = events.length ? events[events.length - 1].ts : 0;
    return { runId: this.liveRun, events, count: events.length, now: Math.max(lastTs, this.live.now()), span: null, company: this.live, replay: false };
  }

  /** The model of events[0 .. count), each event read once while the run moves forward. */
  model(src) {
    const key = `${src.runId}:${src.count}:${src.events[src.count - 1]?.seq ?? 0}:${src.now.toFixed(1)}`;
    if (this.cache.key !== key) {
      const log = this.log;
      if (!log || log.events !== src.events || log.runId !== src.runId || log.reader.count > src.count) {
        this.log = { events: src.events, runId: src.runId, reader: new SessionLog() }; // a new run, or back in time
      }
      const reader = this.log.reader;
      reader.add(src.events, reader.count, src.count);
      const model = reader.model(src.now);
      this.cache = { key, model, path: criticalPath(model, src.runId) };
    }
    return this.cache;
  }

  // --- drawing ------------------------------------------------------------------------------

  render() {
    if (this.root.hidden) return;
    // Read the geometry first, before any write, so a frame lays the page out once.
    const scrollTop = this.frame.scrollTop;
    const viewHeight = this.frame.clientHeight || window.innerHeight;
    const axisHeight = this.axis.offsetHeight;
    const tickWidth = this.ticks.clientWidth;
    const src = this.source();
    const { model, path } = this.model(src);
    const company = src.company;
    const root = company.tasks.get(src.runId);

    if (!src.runId || !src.count) {
      this.empty.hidden = false;
      this.empty.textContent = !src.runId
        ? "No goal yet: give the company one, and its sessions appear here."
        : src.replay
          ? "Nothing has happened yet at this point of the run."
          : "Loading the run…";
      this.frame.hidden = true;
      this.caption.textContent = "";
      this.pathNote.textContent = "";
      return;
    }
    this.empty.hidden = true;
    this.frame.hidden = false;

    if (this.windowRun !== src.runId) {
      this.windowRun = src.runId; // another run: start from the whole of it
      this.window.reset(false);
    }
    const [full0, full1] = src.span ?? [model.start, model.end];
    const [t0, t1] = this.window.apply(full0, full1);
    const span = Math.max(t1 - t0, 0.001);
    const shown = (a, b) => b >= t0 && a <= t1; // a stretch of time overlaps the window
    this.zoomAll.disabled = !this.window.zoomed;
    this.zoomOut.disabled = !this.window.zoomed;
    this.root.dataset.zoomed = String(this.window.zoomed);
    const x = (t) => ((Math.min(Math.max(t, t0), t1) - t0) / span) * 100; // percent of the lane

    const status = root?.status ?? model.tasks.get(src.runId)?.status ?? "todo";
    const showing = this.window.zoomed
      ? ` · showing ${label(t0 - model.start, 0.1)}–${label(t1 - model.start, 0.1)}`
      : "";
    setText(this.caption, `${src.replay ? "Replay" : "Live"} · “${clip(root?.title ?? model.tasks.get(src.runId)?.title ?? src.runId, 80)}” · ${status.replace("_", " ")} · ${duration(model.end - model.start)}${showing}`);
    if (this.caption.dataset.run !== src.runId) this.caption.dataset.run = src.runId;
    const chain = path.chain.filter((c) => c.person === undefined);
    setText(this.pathNote, chain.length ? `Critical path: ${compact(chain.map((s) => company.agent(s.agent).name)).join(" → ")}` : "");

    // Rows: the org chart's order, depth first; by default only who took part in this run.
    const rowsKey = `${src.runId}:${model.tasks.size}:${company.agents.size}:${this.everyone}:${company === this.live}`;
    if (this.rowsKey !== rowsKey) {
      this.rowsKey = rowsKey;
      this.rowList = this.rows(company, model);
      this.rowIndex = new Map(this.rowList.map((r, i) => [r.id, i]));
      this.body.style.height = `${this.rowList.length * ROW}px`;
      this.root.dataset.agents = String(this.rowList.length);
    }
    const rows = this.rowList;
    const index = this.rowIndex;

    const top = Math.max(0, scrollTop - axisHeight);
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(rows.length - 1, Math.ceil((top + viewHeight) / ROW) + OVERSCAN);
    const visible = (i) => i >= first && i <= last;

    const keep = new Set();
    for (let i = first; i <= last; i++) {
      const r = rows[i];
      const key = `name:${r.id}`;
      keep.add(key);
      let node = this.nodes.get(key);
      if (!node) {
        const agent = company.agent(r.id);
        node = el(
          "div",
          { class: "tl-name", dataset: { agent: r.id }, title: `${agent.name} · ${agent.title}` },
          el("span", { class: "tl-dot", "aria-hidden": "true" }),
          el("span", { class: "tl-who" }, agent.name),
          el("span", { class: "tl-title" }, agent.title),
        );
        node.style.setProperty("--hue", hue(r.id));
        node.style.setProperty("--depth", r.depth);
        this.names.append(node);
        this.nodes.set(key, node);
      }
      const sig = `${i}:${r.teamStart}`;
      if (node.tlSig !== sig) {
        node.tlSig = sig;
        node.style.top = `${i * ROW}px`;
        node.classList.toggle("team-start", r.teamStart && i > 0);
      }
    }

    const place = (item, kind) => {
      const i = index.get(item.agent);
      if (i === undefined || !visible(i) || !shown(item.start, item.end)) return;
      keep.add(item.id);
      let node = this.nodes.get(item.id);
      if (!node) {
        node = el("button", { type: "button", class: `tl-bar ${kind}`, dataset: { kind, id: item.id, task: item.task, agent: item.agent } });
        this.bars.append(node);
        this.nodes.set(item.id, node);
      }
      const left = x(item.start);
      const width = Math.max(0, x(item.end) - left);
      const outcome = item.open ? (kind === "wait" ? "waiting" : "running") : item.outcome;
      const critical = path.ids.has(item.id);
      // Only what changed is written: a frame of a 60× replay touches few bars.
      const sig = `${left.toFixed(3)}:${width.toFixed(3)}:${i}:${outcome}:${critical}:${item.start}:${item.end}`;
      if (node.tlSig === sig) return;
      node.tlSig = sig;
      node.style.left = `${left}%`;
      node.style.width = `${width}%`;
      node.style.top = `${i * ROW}px`;
      node.dataset.outcome = outcome;
      node.dataset.start = (item.start - model.start).toFixed(3);
      node.dataset.end = (item.end - model.start).toFixed(3);
      node.classList.toggle("person", kind === "wait" && item.person);
      node.classList.toggle("critical", critical);
      const task = company.tasks.get(item.task) ?? model.tasks.get(item.task);
      node.setAttribute("aria-label", describe(item, kind, company.agent(item.agent).name, task?.title ?? "").join(". "));
    };
    for (const w of model.waits) place(w, "wait");
    for (const s of model.sessions) place(s, "session");

    for (const [key, node] of this.nodes) {
      if (!keep.has(key)) {
        node.remove();
        this.nodes.delete(key);
      }
    }

    this.drawLinks(model, path, index, x, first, last, rows.length, shown);
    this.drawAxis(t0, span, x, model.start, tickWidth);
    const nowIn = (!src.span || src.now < full1) && src.now >= t0 && src.now <= t1;
    this.nowLine.hidden = !nowIn || (!src.replay && model.sessions.every((s) => !s.open) && model.waits.every((w) => !w.open));
    this.nowLine.style.left = `${x(src.now)}%`;
    if (this.hot) this.hover(this.nodes.get(this.hot) ?? null);
  }

  rows(company, model) {
    const busy = new Set([...model.tasks.values()].map((t) => t.agent).filter(Boolean));
    const rows = [];
    const placed = new Set();
    const walk = (id, depth, teamStart) => {
      if (placed.has(id)) return;
      placed.add(id);
      const agent = company.agents.get(id);
      if (this.everyone || busy.has(id)) rows.push({ id, depth, teamStart });
      for (const r of agent?.reports ?? []) walk(r, depth + 1, depth === 0);
    };
    for (const id of company.org?.top ?? []) walk(id, 0, true);
    for (const id of busy) if (!placed.has(id)) rows.push({ id, depth: 0, teamStart: true });
    return rows;
  }

  drawLinks(model, path, index, x, first, last, count, shown) {
    this.model_ = { model, path, index, x };
    const key = `${this.cache.key}:${this.rowsKey}:${first}:${last}:${this.window.key}`;
    if (this.linksKey === key) return;
    this.linksKey = key;
    const height = Math.max(1, count * ROW);
    this.svg.setAttribute("viewBox", `0 0 1000 ${height}`);
    this.svg.style.height = `${height}px`;
    const many = model.links.length > MANY_LINKS;
    this.root.dataset.dense = String(many);
    const paths = [];
    model.links.forEach((link, i) => {
      const from = model.byId.get(link.from);
      const to = model.byId.get(link.to);
      if (!from || !to) return;
      const a = index.get(from.agent);
      const b = index.get(to.agent);
      if (a === undefined || b === undefined) return;
      if (Math.max(a, b) < first || Math.min(a, b) > last) return;
      if (!shown(Math.min(link.t0, link.t1), Math.max(link.t0, link.t1))) return;
      const critical = path.links.has(i);
      if (many && !critical) return; // drawn on hover instead
      paths.push(linkPath(link, a, b, x, critical));
    });
    this.svg.replaceChildren(...paths);
  }

  drawAxis(t0, span, x, runStart, tickWidth) {
    const width = tickWidth || 600;
    const step = STEPS.find((s) => (width * s) / span >= 72) ?? STEPS[STEPS.length - 1];
    const offset = t0 - runStart;
    const marks = [];
    for (let k = Math.ceil(offset / step) * step; k <= offset + span + 1e-9; k += step) marks.push(k);
    const key = `${step}:${offset}:${span}:${marks.length}`;
    if (this.axisKey === key) return;
    this.axisKey = key;
    this.ticks.replaceChildren(
      ...marks.map((k) => {
        const tick = el("span", { class: "tl-tick" }, label(k, step));
        tick.style.left = `${x(runStart + k)}%`;
        return tick;
      }),
    );
    this.grid.replaceChildren(
      ...marks.map((k) => {
        const line = el("span", { class: "tl-gridline" });
        line.style.left = `${x(runStart + k)}%`;
        return line;
      }),
    );
  }

  // --- hover --------------------------------------------------------------------------------

  hover(bar, event = null) {
    this.hot = bar?.dataset.id ?? null;
    for (const old of this.svg.querySelectorAll(".hot-link")) old.remove();
    for (const b of this.bars.querySelectorAll(".tl-bar.linked")) b.classList.remove("linked");
    if (!bar || !this.model_) {
      this.tip.hidden = true;
      return;
    }
    const { model, path, index, x } = this.model_;
    const id = bar.dataset.id;
    model.links.forEach((link, i) => {
      if (link.from !== id && link.to !== id) return;
      const other = link.from === id ? link.to : link.from;
      this.nodes.get(other)?.classList.add("linked");
      const from = model.byId.get(link.from);
      const to = model.byId.get(link.to);
      const a = index.get(from?.agent);
      const b = index.get(to?.agent);
      if (a === undefined || b === undefined) return;
      const p = linkPath(link, a, b, x, path.links.has(i));
      p.classList.add("hot-link");
      this.svg.append(p);
    });
    const text = bar.getAttribute("aria-label").split(". ");
    this.tip.replaceChildren(el("strong", {}, text[0]), ...text.slice(1).map((line) => el("span", {}, line)));
    this.tip.hidden = false;
    if (event) this.placeTip(event.clientX, event.clientY);
  }

  placeTip(cx, cy) {
    if (this.tip.hidden) return;
    const w = this.tip.offsetWidth;
    const h = this.tip.offsetHeight;
    const left = Math.min(Math.max(8, cx + 12), window.innerWidth - w - 8);
    const top = cy + 16 + h > window.innerHeight ? cy - h - 12 : cy + 16;
    this.tip.style.transform = `translate(${Math.round(left)}px, ${Math.round(Math.max(8, top))}px)`;
  }
}

function linkPath(link, a, b, x, critical) {
  const p = document.createElementNS(SVG, "path");
  const x0 = x(link.t0) * 10;
  const x1 = x(link.t1) * 10;
  const y0 = a * ROW + ROW / 2;
  const y1 = b * ROW + ROW / 2;
  // Down (or up) from the moment of the hand-off, then along to where the other bar begins.
  p.setAttribute("d", `M${x0.toFixed(2)} ${y0}V${y1}H${x1.toFixed(2)}`);
  p.setAttribute("class", `tl-link ${link.kind}${critical ? " critical" : ""}`);
  p.setAttribute("vector-effect", "non-scaling-stroke");
  p.dataset.outcome = link.outcome;
  return p;
}

function describe(item, kind, agentName, title) {
  const lines = [`${agentName}: ${clip(title, 90)}`];
  if (kind === "wait") {
    lines.push(item.person ? "Waiting on a person (an approval)" : `Waiting on reports${item.reports ? ` (${item.reports} open)` : ""}`);
  } else {
    lines.push(`Session ${item.n} · ${OUTCOME_LABEL[item.open ? "running" : item.outcome] ?? item.outcome}`);
  }
  lines.push(`${clock(item.start)} to ${item.open ? "now" : clock(item.end)} · ${duration(item.end - item.start)}`);
  return lines;
}

// One formatter for every bar: toLocaleTimeString builds a new one per call, which at a few
// hundred bars a frame was most of the frame.
const CLOCK = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
const clocks = new Map(); // whole second -> its text; a replay asks for the same ones often
function clock(ts) {
  const second = Math.floor(ts);
  let text = clocks.get(second);
  if (text === undefined) {
    if (clocks.size > 5000) clocks.clear();
    text = CLOCK.format(new Date(second * 1000));
    clocks.set(second, text);
  }
  return text;
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

function label(seconds, step) {
  if (seconds === 0) return "0";
  if (step < 1) return `${seconds.toFixed(1)}s`;
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) {
    const m = Math.floor(seconds / 60);
    const s = Math.round(seconds % 60);
    return s ? `${m}m${String(s).padStart(2, "0")}` : `${m}m`;
  }
  const h = Math.floor(seconds / 3600);
  const m = Math.round((seconds % 3600) / 60);
  return m ? `${h}h${String(m).padStart(2, "0")}` : `${h}h`;
}

/** Names in a chain with repeats in a row folded: Ava, Ava, Ben -> Ava, Ben. */
function compact(names) {
  return names.filter((n, i) => i === 0 || names[i - 1] !== n);
}
