// The office page: wires the live feed to the model and the model to the views.

import { api, call, getToken, Live, setToken, takeTokenFromAddress } from "./api.js";
import { Board } from "./board.js";
import { GoalBanner, progressChips } from "./banner.js";
import { Drawer } from "./drawer.js";
import { Feed } from "./feed.js";
import { Floors } from "./floors.js";
import { Inbox } from "./inbox.js";
import { APPROVAL_KINDS, ENDINGS, GOAL_KINDS, KIND } from "./kinds.js";
import { renderOrgChart } from "./orgchart.js";
import { TaskApprovals } from "./pending.js";
import { TaskTalk } from "./talk.js";
import { Replay, SPEEDS } from "./replay.js";
import { Company } from "./state.js";
import { FrameBatch } from "./framebatch.js";
import { Timeline } from "./timeline.js";
import { formatCost, runUsage, usageText } from "./cost.js";
import { clip, debounce, duration, el, perFrame, STATUS_ICON, STATUS_LABEL } from "./util.js";

takeTokenFromAddress();

const company = new Company();
const $ = (id) => document.getElementById(id);
const openTask = (id) => drawer.open(id);

const drawer = new Drawer(company, { toast, needToken: askForToken });
const floor = new Floors(company, { onOpenTask: openTask });
const board = new Board($("view-board"), company, { onOpenTask: openTask });
const feed = new Feed($("feed-list"), company, { onOpenTask: openTask });
const timeline = new Timeline($("view-timeline"), { live: company, replay: () => replay, onOpenTask: openTask });
const banner = new GoalBanner($("goal-banner"), { onOpenTask: openTask });
// People in the chain of command: the approvals inbox, and a task's waiting calls in its drawer.
const say = (text) => ($("announcer").textContent = text);
const inbox = new Inbox(company, { onOpenTask: openTask, needToken: askForToken, toast, announce: say });
drawer.use(new TaskApprovals(company, { needToken: askForToken, toast, announce: say, onDecided: () => inbox.onEvents() }));
const talk = new TaskTalk(company, { needToken: askForToken, toast, announce: say });
drawer.use(talk);

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

// What the views show: the live company, or a replay's company at the scrubber's position.
let replay = null;
const shown = () => replay?.company ?? company;

const redraw = perFrame(() => {
  const view = document.body.dataset.view;
  if (view === "floor") floor.render();
  if (view === "board") board.render();
  if (view === "timeline") timeline.render();
  renderStats();
  renderProgress();
});

const redrawDesks = perFrame(() => {
  if (document.body.dataset.view === "floor") floor.render();
});

function renderProgress() {
  const chips = progressChips(shown()).slice(0, 4);
  for (const c of chips) c.spent = runUsage(shown(), c.root.id);
  const key = chips.map((c) => `${c.root.id}:${c.finished}/${c.total}:${usageText(c.spent.usage, c.spent.cost)}`).join(",");
  const list = $("progress");
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  list.replaceChildren(
    ...chips.map(({ root, finished, total, spent }) =>
      el(
        "li",
        { dataset: { run: root.id } },
        el("button", { type: "button", class: "chip", title: [root.title, usageText(spent.usage, spent.cost)].filter(Boolean).join("\n"), onclick: () => openTask(root.id) },
          el("span", { class: "chip-title" }, clip(root.title, 28)),
          el("b", {}, `${finished}/${total}`),
          spent.cost !== null && spent.usage.calls ? el("span", { class: "chip-cost" }, formatCost(spent.cost)) : null,
        ),
      ),
    ),
  );
}

// Keep elapsed times moving on the board and desks while work is running.
setInterval(() => {
  if (shown().counts().in_progress) redraw();
}, 1000);

function renderStats() {
  const counts = shown().counts();
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

// The model takes each message as it comes; the views take what arrived once per frame, so a
// big company's burst of messages is drawn once rather than once per message.
const shownLater = new FrameBatch((events, fresh) => {
  if (replay) return;
  feed.add(events);
  drawer.onEvents(events);
  if (fresh.length && document.body.dataset.view === "floor") {
    floor.render(); // desks first, so marks land on up-to-date desks
    floor.animate(fresh);
  }
  announce(fresh);
  banner.consider(company, fresh);
  redraw();
});

const live = new Live({
  onSnapshot(snap) {
    company.loadSnapshot(snap);
    replayUntil = snap.seq;
    $("company").textContent = snap.org.company;
    document.title = `${snap.org.company} · firm office`;
    fillRecipients(snap.org);
    renderOrgChart($("view-org"), company, { onGiveGoal: giveGoalTo });
    floor.build();
    inbox.onEvents();
    if (firstSnapshot) {
      firstSnapshot = false;
      loadRecentActivity(snap.seq);
      refreshRuns();
    }
    redraw();
  },
  onEvents(events) {
    company.apply(events);
    timeline.onEvents(events);
    talk.onEvents(events);
    if (events.some((e) => GOAL_KINDS.has(e.kind) && !company.tasks.get(e.task_id)?.parent_id)) refreshRuns();
    if (events.some((e) => APPROVAL_KINDS.has(e.kind) || e.data?.approval)) inbox.onEvents(events);
    if (replay) return; // the live company keeps up; the views show the replay
    shownLater.add(events, replayUntil);
  },
  onStream(desks) {
    company.stream(desks);
    if (!replay) redrawDesks(); // only the desks show streams: nothing else need redraw
  },
  onState(state, reason) {
    const label = { connecting: "connecting…", reconnecting: "reconnecting…", live: "live", locked: "needs the access token" }[state];
    const conn = $("conn");
    conn.textContent = label;
    conn.dataset.state = state;
    if (state === "locked") askForToken(reason);
  },
});

// --- replay ------------------------------------------------------------------------------

const runPick = $("run-pick");
const scrub = $("replay-scrub");
const playButton = $("replay-play");
const speed = $("replay-speed");

const refreshRuns = debounce(async () => {
  try {
    const { runs } = await api.runs(100);
    const options = [el("option", { value: "" }, "Live: everything, as it happens")];
    for (const r of runs) {
      const spent = usageText({ calls: r.calls, prompt_tokens: r.prompt_tokens, completion_tokens: r.completion_tokens }, r.cost);
      options.push(el("option", { value: r.id }, `${STATUS_ICON[r.status]} Replay “${clip(r.title, 60)}” · ${r.id}${spent ? ` · ${spent}` : ""}`));
    }
    runPick.replaceChildren(...options);
    runPick.value = replay?.runId ?? "";
  } catch {
    /* the list fills at the next goal */
  }
}, 300);

runPick.addEventListener("change", () => (runPick.value ? startReplay(runPick.value) : goLive()));

async function startReplay(runId) {
  const next = new Replay(company.org, runId);
  $("replay-time").textContent = "Loading the run…";
  try {
    await next.load();
  } catch (error) {
    if (error.status === 401) askForToken(error.message);
    $("replay-time").textContent = error.message;
    return;
  }
  replay?.pause();
  banner.hide();
  replay = next;
  replay.speed = Number(speed.value);
  replay.listen(onReplay);
  floor.show(replay.company);
  board.show(replay.company);
  feed.show(replay.company);
  drawer.showReplay(replay);
  $("replay-bar").dataset.mode = "replay";
  $("replay-controls").hidden = false;
  document.body.dataset.mode = "replay";
  replay.seek(0);
  replay.play(); // a chosen run plays at once, from its start
}

function goLive() {
  if (!replay) return;
  replay.pause();
  banner.hide();
  replay = null;
  runPick.value = "";
  floor.show(company);
  board.show(company);
  feed.show(company);
  drawer.showReplay(null);
  $("replay-bar").dataset.mode = "live";
  $("replay-controls").hidden = true;
  $("replay-time").textContent = "";
  document.body.dataset.mode = "live";
  loadRecentActivity(live.seq ?? 0);
  redraw();
}

function onReplay({ batch, rebuilt, animate }) {
  if (rebuilt) {
    banner.hide();
    floor.show(replay.company);
    board.show(replay.company);
    feed.show(replay.company);
    feed.add(replay.events.slice(Math.max(0, replay.applied - 250), replay.applied));
  } else if (batch.length) {
    feed.add(batch);
  }
  if (batch.length) {
    drawer.onEvents(batch);
    banner.consider(replay.company, batch);
    // At 60× a frame can carry hundreds of events: flights then are noise, and costly.
    if (animate && batch.length <= 24 && document.body.dataset.view === "floor") {
      floor.render();
      floor.animate(batch);
    }
  }
  playButton.dataset.playing = String(replay.playing);
  playButton.setAttribute("aria-label", replay.playing ? "Pause" : "Play");
  scrub.max = String(Math.max(1, Math.round(replay.duration * 1000)));
  scrub.value = String(Math.round(replay.t * 1000));
  const at = `${duration(replay.t)} of ${duration(replay.duration)}`;
  scrub.setAttribute("aria-valuetext", at);
  $("replay-time").textContent = `Replay · ${at} · event ${replay.applied}/${replay.events.length}`;
  document.body.dataset.replayAt = replay.applied === replay.events.length ? "end" : String(replay.applied);
  redraw();
}

$("replay-start").addEventListener("click", () => replay?.toStart());
$("replay-end").addEventListener("click", () => replay?.toEnd());
$("replay-live").addEventListener("click", goLive);
playButton.addEventListener("click", () => (replay?.playing ? replay.pause() : replay?.play()));
speed.addEventListener("change", () => {
  if (replay) replay.speed = Number(speed.value);
});
scrub.addEventListener("input", () => replay?.seek(Number(scrub.value) / 1000));
console.assert(SPEEDS.every((s) => speed.querySelector(`option[value="${s}"]`)));

/** The shown company in a comparable form, for tests and for people debugging the page. */
function summary(rootId = null) {
  const c = shown();
  const tasks = [...c.tasks.values()]
    .filter((t) => !rootId || t.root_id === rootId)
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map((t) => ({ id: t.id, status: t.status, assignee: t.assignee, parent_id: t.parent_id, title: t.title, result: t.result, files: t.files, error: t.error }));
  const desks = {};
  for (const [id, d] of c.desks()) desks[id] = { state: d.state, task: d.task?.id ?? null, note: c.notes.get(id) ?? null };
  return { tasks, desks };
}
window.__office = {
  summary,
  get mode() { return replay ? "replay" : "live"; },
  get replay() { return replay; },
  /** The live company: every task the page holds, its counts and desks. */
  get company() { return company; },
  /** Which floor shows ("3d" or "2d"); floor3d() is where the 3D floor puts each desk on screen. */
  get floor() { return floor.mode; },
  floor3d: () => floor.three?.summary() ?? null,
};

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
    if (ENDINGS.has(e.kind)) {
      $("announcer").textContent = `Goal “${task.title}” ${e.kind === KIND.COMPLETED ? "is done" : `was ${e.kind}`}.`;
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
  if (event.key === " " && replay && !event.target.closest("input, textarea, select, button, [contenteditable]") && !document.querySelector("dialog[open]")) {
    event.preventDefault();
    replay.playing ? replay.pause() : replay.play();
    return;
  }
  // "g" jumps to the goal box, as long as the person is not typing somewhere.
  if (event.key === "g" && !event.target.closest("input, textarea, select, [contenteditable]") && !document.querySelector("dialog[open]")) {
    event.preventDefault();
    input.focus();
  }
});

select($("tab-floor"));
live.connect();
