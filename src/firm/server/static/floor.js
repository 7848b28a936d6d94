// The office floor: a room per team (its manager's desk first), a desk per agent, and the
// paperwork flying between desks: delegations down, results back up.

import { askBadge, showAsks, waitingWords } from "./asks.js";
import { usageByDesk, usageText } from "./cost.js";
import { KIND } from "./kinds.js";
import { avatar, clip, el, reducedMotion } from "./util.js";

const MAX_FLIGHTS = 24;

const agent_name = (company, id) => company.agent(id).name;
// The end of a text being written: its newest words are the ones to see.
const tail = (text, n) => (text.length > n ? `…${text.slice(-n).replace(/^\S*\s/, "")}` : text);

export class Floor {
  constructor(root, company, { onOpenTask }) {
    this.root = root;
    this.company = company;
    this.onOpenTask = onOpenTask;
    this.desks = new Map(); // agent id -> {node, parts}
    this.flightLayer = document.getElementById("flights");
    this.flying = 0;
    this.orgKey = null;
    this.departures = new Map(); // desk id -> when its next mark may leave (ms)
  }

  /** Show another company (the live one, or a replay's). */
  show(company) {
    this.company = company;
    // The same org chart keeps its desks (build() compares the chart; render() each desk's key).
    this.flightLayer.replaceChildren();
    this.flying = 0;
    this.build();
    this.render();
  }

  /** Lay out the rooms, once per org chart. */
  build() {
    const org = this.company.org;
    if (!org) return;
    const key = org.agents.map((a) => `${a.id}<${a.reports_to ?? ""}`).join(",");
    if (key === this.orgKey) return;
    this.orgKey = key;
    this.desks.clear();
    const agents = this.company.agents;
    const depth = (id) => {
      let d = 0;
      for (let a = agents.get(id); a?.reports_to && d < 64; a = agents.get(a.reports_to)) d++;
      return d;
    };
    // A room for every manager and every lone top agent; leaves sit in their manager's room.
    const rooms = [];
    for (const a of org.agents) {
      const leads = a.reports.length > 0 || !a.reports_to;
      if (!leads) continue;
      const members = a.reports.map((r) => agents.get(r)).filter((r) => r && r.reports.length === 0);
      rooms.push({ lead: a, members, depth: depth(a.id) });
    }
    const rows = [];
    for (const room of rooms) (rows[room.depth] ??= []).push(room);
    const floor = el("div", { class: "floor-plan" });
    rows.forEach((row, i) => {
      if (!row) return;
      floor.append(
        el(
          "div",
          { class: "floor-row", role: "list", "aria-label": i === 0 ? "Leadership" : `Level ${i + 1}` },
          row.map((room) => this.room(room)),
        ),
      );
    });
    this.root.replaceChildren(floor);
  }

  room({ lead, members }) {
    const boss = lead.reports_to ? this.company.agent(lead.reports_to) : null;
    const team = lead.reports.length ? `${lead.name}'s team` : lead.name;
    return el(
      "section",
      { class: "room", role: "listitem", "aria-label": team, dataset: { lead: lead.id } },
      el(
        "header",
        { class: "room-head" },
        el("h3", {}, team),
        el("p", {}, boss ? `reports to ${boss.name}` : "top of the company"),
      ),
      el("div", { class: "desks" }, this.desk(lead, true), members.map((m) => this.desk(m, false))),
    );
  }

  desk(agent, lead) {
    const state = el("span", { class: "desk-state" }, "Idle");
    const doing = el("div", { class: "desk-doing" });
    const thoughtText = el("span");
    // Every part of a desk keeps its place whether it has something to say or not, so a desk
    // never changes size and the floor never jumps while a run streams.
    const thought = el("p", { class: "desk-thought empty" }, thoughtText);
    const action = el("p", { class: "desk-action empty" });
    const more = el("span", { class: "desk-more empty" });
    // Model calls, tokens and cost in the run of the desk's task: on the status line, so the
    // desk keeps its size whether or not it has any.
    const usage = el("span", { class: "desk-usage empty" });
    const face = avatar(agent, "lg");
    const ask = askBadge((taskId) => this.onOpenTask(taskId));
    const node = el(
      "article",
      {
        class: `desk${lead ? " lead" : ""}`,
        dataset: { agent: agent.id, state: "idle" },
        "aria-label": `${agent.name}, ${agent.title}`,
      },
      el(
        "div",
        { class: "desk-top" },
        el("span", { class: "desk-face" }, face, el("span", { class: "dot", "aria-hidden": "true" })),
        el("div", { class: "who" }, el("h4", {}, agent.name), el("p", {}, agent.title)),
        ask,
      ),
      el("div", { class: "desk-status" }, el("div", { class: "desk-line" }, state, more, usage), doing),
      thought,
      action,
    );
    this.desks.set(agent.id, { node, face, state, more, usage, doing, thought, thoughtText, action, ask, shown: {} });
    return node;
  }

  render() {
    this.build();
    const desks = this.company.desks();
    const spent = usageByDesk(this.company);
    for (const [id, d] of desks) {
      const desk = this.desks.get(id);
      if (!desk) continue;
      const note = this.company.notes.get(id) || {};
      const run = d.task ? spent.get(id)?.get(d.task.root_id) : null;
      const usage = run ? usageText(run.usage, run.cost, { short: true }) : "";
      const label =
        d.state === "working"
          ? "Working"
          : d.state === "waiting"
            ? waitingWords(d)
            : d.state === "queued"
              ? `${d.queued} queued`
              : "Idle";
      const task = d.task;
      const busy = d.state === "working" || d.state === "waiting";
      // What the agent is writing now, while it is about the task this desk shows.
      const live = this.company.streams.get(id);
      const streaming = live && task && live.task === task.id && d.state === "working" ? live.text : "";
      const key = `${d.state}|${label}|${task?.id}|${task?.status}|${task?.title}|${note.thought_at}|${note.action_at}|${d.held}|${usage}|${streaming}|${d.asks}|${d.askTask?.id}`;
      if (desk.shown.key === key) continue;
      desk.shown.key = key;
      desk.node.dataset.state = d.state;
      showAsks(desk.ask, desk.node, d, agent_name(this.company, id));
      desk.state.textContent = label;
      desk.state.className = `desk-state st-${d.state}`;
      // A stream's words change the thought alone: the task's button stays the same node.
      const doing = `${busy}|${d.state}|${d.person}|${task?.id}|${task?.title}`;
      if (desk.shown.doing === doing) {
        /* unchanged */
      } else if (task) {
        desk.shown.doing = doing;
        const verb = busy ? (d.state === "waiting" ? (d.person ? "Waiting for a person on" : "Waiting on") : "Working on") : "Last task";
        desk.doing.replaceChildren(
          ...(busy ? [] : [el("span", { class: "desk-verb" }, "Last task")]),
          el(
            "button",
            {
              type: "button",
              class: "desk-task",
              title: task.title,
              onclick: () => this.onOpenTask(task.id),
              "aria-label": `${verb}: ${task.title}. Open task ${task.id}`,
            },
            clip(task.title, 90),
          ),
        );
      } else {
        desk.shown.doing = doing;
        desk.doing.replaceChildren(el("span", { class: "desk-verb" }, "No work yet"));
      }
      // A thought or action belongs to the task it was about: never shown under another one.
      const about = (taskId, ts) =>
        task && (taskId ? taskId === task.id : ts && ts >= (task.started_at ?? task.created_at) - 1);
      const thought = streaming
        ? tail(streaming, 220)
        : note.thought && about(note.thought_task, note.thought_at) ? clip(note.thought, 220) : "";
      desk.thoughtText.textContent = thought;
      desk.thought.classList.toggle("empty", !thought);
      desk.thought.classList.toggle("streaming", Boolean(streaming));
      const action = note.action && d.state === "working" && about(note.action_task, note.action_at);
      desk.action.textContent = action ? clip(note.action, 80) : "";
      desk.action.classList.toggle("empty", !action);
      const others = busy ? d.held - 1 : 0;
      desk.more.textContent = others > 0 ? `+${others} more` : "";
      desk.more.title = others > 0 ? `${agent_name(this.company, id)} holds ${others + 1} tasks` : "";
      desk.more.classList.toggle("empty", others <= 0);
      desk.usage.textContent = usage;
      desk.usage.title = usage ? `Model use by ${agent_name(this.company, id)} in this goal` : "";
      desk.usage.classList.toggle("empty", !usage);
    }
  }

  /** Paper flies for fresh delegations and results. */
  animate(events) {
    for (const e of events) {
      if (e.kind === KIND.DELEGATED) this.fly(e.agent, e.data?.to, "delegation", e.data?.title);
      else if (e.kind === KIND.COMPLETED || e.kind === KIND.FAILED) {
        const task = this.company.tasks.get(e.task_id);
        if (task?.parent_id) {
          const boss = this.company.tasks.get(task.parent_id)?.assignee ?? task.created_by;
          this.fly(task.assignee, boss, e.kind === KIND.COMPLETED ? "result done" : "result failed", task.title);
        }
      }
    }
  }

  fly(fromId, toId, kind, title) {
    const from = this.desks.get(fromId);
    const to = this.desks.get(toId);
    if (!from || !to || this.root.hidden) return;
    const layer = this.flightLayer;
    const counter = kind === "delegation" ? "delegations" : "results";
    layer.dataset[counter] = String(Number(layer.dataset[counter] || 0) + 1);
    const land = () => {
      // Restart the highlight on the next frame rather than forcing a layout now: with many
      // results landing at once, a forced layout per landing stalls a large floor for seconds.
      to.node.classList.remove("received");
      requestAnimationFrame(() => {
        to.node.classList.add("received");
        setTimeout(() => to.node.classList.remove("received"), 1200);
      });
    };
    if (reducedMotion.matches) {
      land();
      return;
    }
    if (this.flying >= MAX_FLIGHTS) return; // the sky is full: the desks' states tell the rest
    const a = from.face.getBoundingClientRect();
    const b = to.face.getBoundingClientRect();
    if (!a.width || !b.width) return;
    const x0 = a.left + a.width / 2;
    const y0 = a.top + a.height / 2;
    const x1 = b.left + b.width / 2;
    const y1 = b.top + b.height / 2;
    const mx = (x0 + x1) / 2;
    const my = Math.min(y0, y1) - Math.max(30, Math.abs(x1 - x0) * 0.15);
    const icon = kind === "delegation" ? "✉" : kind.includes("failed") ? "✕" : "✓";
    const mark = el(
      "div",
      { class: `flight ${kind}` },
      el("span", { class: "flight-icon" }, icon),
      kind === "delegation" && title ? el("span", { class: "flight-label" }, clip(title, 28)) : null,
    );
    layer.append(mark);
    this.flying++;
    // Marks leaving one desk together go one after another, not as a single blot.
    const now = performance.now();
    const leave = Math.max(now, this.departures.get(fromId) ?? 0);
    this.departures.set(fromId, leave + 160);
    const at = (x, y, s) => `translate(${x}px, ${y}px) scale(${s})`;
    const flight = mark.animate(
      [
        { transform: at(x0, y0, 0.5), opacity: 0 },
        { transform: at(x0, y0, 1), opacity: 1, offset: 0.12 },
        { transform: at(mx, my, 1), opacity: 1, offset: 0.55 },
        { transform: at(x1, y1, 0.9), opacity: 1, offset: 0.9 },
        { transform: at(x1, y1, 0.4), opacity: 0 },
      ],
      { duration: 1100, delay: leave - now, fill: "backwards", easing: "cubic-bezier(.45,.05,.35,1)" },
    );
    flight.finished
      .catch(() => {})
      .then(() => {
        mark.remove();
        this.flying--;
        land();
      });
  }
}
