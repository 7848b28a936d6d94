// The office page: wires the live feed to the model and the model to the views.

import { api, call, getToken, Live, setToken, takeTokenFromAddress } from "./api.js";
import { Board } from "./board.js";
import { Drawer } from "./drawer.js";
import { Feed } from "./feed.js";
import { Floor } from "./floor.js";
import { renderOrgChart } from "./orgchart.js";
import { Company } from "./state.js";
import { el, perFrame, STATUS_LABEL } from "./util.js";

takeTokenFromAddress();

const company = new Company();
const $ = (id) => document.getElementById(id);
const openTask = (id) => drawer.open(id);

const drawer = new Drawer(company, { toast, needToken: askForToken });
const floor = new Floor($("view-floor"), company, { onOpenTask: openTask });
const board = new Board($("view-board"), company, { onOpenTask: openTask });
const feed = new Feed($("feed-list"), company, { onOpenTask: openTask });

// --- views -------------------------------------------------------------------------------

const tabs = [...document.querySelectorAll('[role="tab"]')];
const wide = window.matchMedia("(min-width: 1100px)");

function select(tab, { focus = false } = {}) {
  if (wide.matches && tab.id === "tab-feed") tab = $("tab-floor");
  for (const t of tabs) {
    const chosen = t === tab;
    t.setAttribute("aria-selected", String(chosen));
    t.tabIndex = chosen ? 0 : -1;
    const panel = $(t.getAttribute("aria-controls"));
    // On a wide screen the activity feed is always beside the main view.
    panel.hidden = !chosen && !(wide.matches && panel.id === "view-feed");
  }
  if (focus) tab.focus();
  if (tab.id !== "tab-floor") $("flights").replaceChildren(); // marks belong to the floor
  document.body.dataset.view = tab.id.replace("tab-", "");
  redraw();
}

for (const tab of tabs) {
  tab.addEventListener("click", () => select(tab));
  tab.addEventListener("keydown", (event) => {
    const visible = tabs.filter((t) => t.offsetParent !== null);
    const i = visible.indexOf(tab);
    const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: visible.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    select(visible[(next + visible.length) % visible.length], { focus: true });
  });
}
wide.addEventListener("change", () => select(tabs.find((t) => t.getAttribute("aria-selected") === "true")));

const redraw = perFrame(() => {
  const view = document.body.dataset.view;
  if (view === "floor") floor.render();
  if (view === "board") board.render();
  renderStats();
});

// Keep elapsed times moving on the board and desks while work is running.
setInterval(() => {
  if (company.counts().in_progress) redraw();
}, 1000);

function renderStats() {
  const counts = company.counts();
  const order = ["in_progress", "waiting", "todo", "done", "failed", "cancelled"];
  $("stats").replaceChildren(
    ...order.map((s) =>
      el("span", { class: `stat s-${s}`, title: STATUS_LABEL[s] }, el("b", {}, String(counts[s])), ` ${STATUS_LABEL[s].toLowerCase()}`),
    ),
  );
}

// --- the company, live ---------------------------------------------------------------------

let replayUntil = 0;
let firstSnapshot = true;

const live = new Live({
  onSnapshot(snap) {
    company.loadSnapshot(snap);
    replayUntil = snap.seq;
    $("company").textContent = snap.org.company;
    document.title = `${snap.org.company} · firm office`;
    fillRecipients(snap.org);
    renderOrgChart($("view-org"), company, { onGiveGoal: giveGoalTo });
    floor.build();
    if (firstSnapshot) {
      firstSnapshot = false;
      loadRecentActivity(snap.seq);
    }
    redraw();
  },
  onEvents(events) {
    company.apply(events);
    feed.add(events);
    drawer.onEvents(events);
    const fresh = events.filter((e) => e.seq > replayUntil);
    if (fresh.length && document.body.dataset.view === "floor") {
      floor.render(); // desks first, so marks land on up-to-date desks
      floor.animate(fresh);
    }
    announce(fresh);
    redraw();
  },
  onState(state, reason) {
    const label = { connecting: "connecting…", reconnecting: "reconnecting…", live: "live", locked: "needs the access token" }[state];
    const conn = $("conn");
    conn.textContent = label;
    conn.dataset.state = state;
    if (state === "locked") askForToken(reason);
  },
});

async function loadRecentActivity(seq) {
  try {
    const { data } = await call("GET", `/api/events?after=${Math.max(0, seq - 80)}&limit=80`);
    feed.add(data.events.filter((e) => e.seq <= seq));
  } catch {
    /* the feed fills as events arrive */
  }
}

function announce(events) {
  for (const e of events) {
    const task = company.tasks.get(e.task_id);
    if (!task || task.parent_id) continue;
    if (["completed", "failed", "cancelled"].includes(e.kind)) {
      $("announcer").textContent = `Goal “${task.title}” ${e.kind === "completed" ? "is done" : `was ${e.kind}`}.`;
    }
  }
}

// --- giving a goal ----------------------------------------------------------------------

const form = $("goal-form");
const input = $("goal-input");
const recipient = $("goal-to");

function fillRecipients(org) {
  if (recipient.dataset.filled === org.company) return;
  recipient.dataset.filled = org.company;
  const top = new Set(org.top);
  const sorted = [...org.agents].sort((a, b) => Number(top.has(b.id)) - Number(top.has(a.id)));
  recipient.replaceChildren(...sorted.map((a) => el("option", { value: a.id }, `to ${a.name} · ${a.title}`)));
}

function giveGoalTo(agentId) {
  recipient.value = agentId;
  input.focus();
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const goal = input.value.trim();
  if (!goal) {
    showFormError("Write a goal first.");
    input.focus();
    return;
  }
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  showFormError("");
  try {
    const top = company.org?.top ?? [];
    const to = top.length === 1 && recipient.value === top[0] ? null : recipient.value;
    const task = await api.submit(goal, to);
    input.value = "";
    toast(`Goal ${task.id} given to ${company.agent(task.assignee).name}`, "good", () => openTask(task.id));
  } catch (error) {
    if (error.status === 401) askForToken(error.message, () => form.requestSubmit());
    else showFormError(error.message);
  } finally {
    button.disabled = false;
  }
});

function showFormError(message) {
  const box = $("goal-error");
  box.textContent = message;
  box.hidden = !message;
}

// --- the access token -------------------------------------------------------------------

let afterToken = null;

function askForToken(reason, then = null) {
  const dialog = $("token-dialog");
  afterToken = then;
  $("token-reason").textContent = reason || "This needs the access token that `firm serve` printed.";
  $("token-input").value = getToken();
  if (!dialog.open) dialog.showModal();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  setToken($("token-input").value.trim());
  $("token-dialog").close();
  live.reconnect();
  const then = afterToken;
  afterToken = null;
  if (then) then();
});
$("token-dialog").querySelector("[data-close]").addEventListener("click", () => $("token-dialog").close());

// --- toasts -----------------------------------------------------------------------------

function toast(message, tone = "info", action = null) {
  const item = el(
    "div",
    { class: `toast t-${tone}` },
    el("span", {}, message),
    action ? el("button", { type: "button", class: "link", onclick: action }, "Open") : null,
  );
  $("toasts").append(item);
  setTimeout(() => item.remove(), 6000);
}

// --- go ---------------------------------------------------------------------------------

document.addEventListener("keydown", (event) => {
  // "g" jumps to the goal box, as long as the person is not typing somewhere.
  if (event.key === "g" && !event.target.closest("input, textarea, select, [contenteditable]") && !document.querySelector("dialog[open]")) {
    event.preventDefault();
    input.focus();
  }
});

select($("tab-floor"));
live.connect();
