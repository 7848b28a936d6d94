// A desk whose task waits for a person: its words, and a badge that opens the task to decide.
// Both floors (the plan and 3D) use these, so a call waiting for a person reads the same on
// each, and never like a manager waiting on reports.

import { KIND } from "./kinds.js";
import { clip, el, visible } from "./util.js";

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** What a waiting desk says: a person's decision first, then its reports. */
export function waitingWords(d) {
  if (d.person) return d.open ? `Waiting for a person · ${plural(d.open, "report")}` : "Waiting for a person";
  return `Waiting on ${plural(d.open, "report")}`;
}

/** The badge: hidden until the desk's agent has a call waiting for a person. */
export function askBadge(onOpenTask, className = "ask-badge") {
  const badge = el(
    "button",
    {
      type: "button",
      class: className,
      hidden: true,
      onclick: (event) => {
        event.stopPropagation();
        if (badge.dataset.task) onOpenTask(badge.dataset.task);
      },
    },
    el("span", { class: "ask-icon", "aria-hidden": "true" }, "!"),
    el("span", { class: "ask-words" }, "Approve?"),
    el("span", { class: "ask-count" }),
  );
  return badge;
}

/** Bring a badge up to date, and its desk's data-asks (calls waiting for a person) and
 * data-person (the task it shows waits for one), which colour the desk. */
export function showAsks(badge, desk, d, name) {
  const n = d.asks ?? 0;
  badge.hidden = n === 0;
  if (d.person) desk.dataset.person = "true";
  else delete desk.dataset.person;
  if (n === 0) {
    delete desk.dataset.asks;
    delete badge.dataset.task;
    return;
  }
  desk.dataset.asks = String(n);
  badge.dataset.task = d.askTask.id;
  badge.querySelector(".ask-count").textContent = n > 1 ? `×${n}` : "";
  const questions = d.questions ?? 0;
  badge.querySelector(".ask-words").textContent = questions === n ? "Answer?" : "Approve?";
  const parts = [];
  if (n > questions) parts.push(`${plural(n - questions, "call")} to approve or deny`);
  if (questions) parts.push(`${plural(questions, "question")} to answer`);
  const what = `${name} waits for a person: ${parts.join(" and ")}`;
  badge.title = what;
  badge.setAttribute("aria-label", `${what}. Open task ${d.askTask.title}`);
}

/** An approval event as a line of the activity feed. */
export function describeApproval(e, who) {
  const d = e.data || {};
  if (e.kind === KIND.APPROVAL_REQUESTED) {
    return { tone: "ask", text: `${who} asks a person to approve ${d.tool} ${clip(visible(d.summary), 80)}` };
  }
  const note = d.note ? `: ${clip(visible(d.note), 100)}` : "";
  const text = {
    approved: `${d.by} approved ${who}'s ${d.tool}${note}`,
    denied: `${d.by} denied ${who}'s ${d.tool}${note}`,
    timed_out: `No one decided ${who}'s ${d.tool} in time: denied`,
    withdrawn: `${who}'s ${d.tool} was withdrawn${note}`,
  }[d.decision] ?? `${who}'s ${d.tool}: ${d.decision}`;
  return { tone: d.decision === "approved" ? "done" : "bad", text };
}
