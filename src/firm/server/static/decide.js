// Deciding a call that waits for a person: the tool and its arguments in full, Approve (with
// an optional note) and Deny (with a reason the agent is told), and, once decided, who decided
// and when. The inbox and the drawer show the same card.
//
// The arguments come from a model: they are shown as text (never markup), as indented JSON,
// with invisible and direction-changing characters spelled out, in a box that scrolls rather
// than stretching the page.

import { call } from "./api.js";
import { clock, duration, el, INVISIBLE, visible } from "./util.js";

const NOTE_MAX = 4000; // the API's limit (firm.store.approvals.NOTE_MAX)

export const approvalsApi = {
  list: ({ task = null, status = "pending" } = {}) =>
    call("GET", `/api/approvals?status=${status}${task ? `&task=${encodeURIComponent(task)}` : ""}`).then((r) => r.data),
  approve: (id, note) =>
    call("POST", `/api/approvals/${encodeURIComponent(id)}/approve`, note ? { note } : {}).then((r) => r.data),
  deny: (id, reason) => call("POST", `/api/approvals/${encodeURIComponent(id)}/deny`, { reason }).then((r) => r.data),
};

/** The arguments as indented JSON, with hidden characters spelled out; how many there were. */
export function prettyArgs(args) {
  const json = JSON.stringify(args ?? {}, null, 2) ?? "null";
  return { text: visible(json), hidden: json.match(INVISIBLE)?.length ?? 0 };
}

const APPROVED_LIKE = new Set(["approved", "running", "ran", "interrupted"]);

/** Of two views of one call (from events, from the API), the one that knows it was decided. */
export function merged(a, b) {
  if (!a) return b;
  if (!b) return a;
  const decided = b.status !== "pending" ? b : a;
  return { ...a, ...b, ...pick(decided), args: b.args ?? a.args };
}

function pick(a) {
  return { status: a.status, decided_by: a.decided_by, decided_at: a.decided_at, note: a.note };
}

/** A decided call in words: "Approved by alice at 10:02:13 — invoice checked". */
export function decisionWords(a) {
  const at = a.decided_at ? ` at ${clock(a.decided_at)}` : "";
  const by = a.decided_by ?? "someone";
  const verdict = APPROVED_LIKE.has(a.status)
    ? `Approved by ${by}${at}`
    : a.status === "denied"
      ? `Denied by ${by}${at}`
      : a.status === "timed_out"
        ? `Denied${at}: no one decided before its timeout`
        : a.status === "withdrawn"
          ? `Withdrawn${at}`
          : `${a.status}${at}`;
  const after = { ran: "it ran", running: "it is running", interrupted: "it was cut off and may have run" }[a.status];
  return { verdict: after ? `${verdict} · ${after}` : verdict, tone: APPROVED_LIKE.has(a.status) ? "good" : "bad" };
}

/** When a waiting call is denied for want of a decision, in words. */
export function timeoutWords(a, now = Date.now() / 1000) {
  if (!a.timeout_at) return "No timeout: it waits until someone decides";
  const left = a.timeout_at - now;
  return left > 0
    ? `Denied at ${clock(a.timeout_at)} (in ${duration(left)}) unless someone decides`
    : `Its timeout passed at ${clock(a.timeout_at)}`;
}

let serial = 0;

/** A plan: a manager's turn of delegations waiting as one approval (args.delegations). */
export const isPlan = (a) => a.kind === "plan" || String(a.id).startsWith("P-");

/** A plan's delegations as a list: to whom, what, the brief in full, the tools granted. */
function planItems(a, nameOf) {
  const delegations = Array.isArray(a.args?.delegations) ? a.args.delegations : [];
  return delegations.map((d, i) =>
    el(
      "li",
      { class: "plan-item", dataset: { task: String(d?.task_id ?? "") } },
      el("p", { class: "plan-what" }, el("strong", {}, `${i + 1}. ${nameOf(String(d?.to ?? "?"))}`), " · ", visible(d?.title ?? "")),
      d?.brief ? el("p", { class: "plan-brief" }, visible(d.brief)) : null,
      Array.isArray(d?.tools) && d.tools.length ? el("p", { class: "plan-tools" }, `Tools: ${d.tools.map(visible).join(", ")}`) : null,
    ),
  );
}

/** One call: while it waits, its arguments and the decision; then the decision. */
export class DecisionCard {
  constructor(approval, { needToken, toast, onDecided = null, announce = null, nameOf = (id) => id }) {
    this.id = approval.id;
    this.nameOf = nameOf;
    this.needToken = needToken;
    this.toast = toast;
    this.onDecided = onDecided;
    this.announce = announce ?? ((text) => toast(text));
    this.approval = null;
    this.uid = `decide-${++serial}`;
    this.node = el("article", { class: "decision", dataset: { approval: approval.id } });
    this.update(approval);
  }

  /** Show what is known now; a card still waiting keeps what the person has typed. */
  update(approval) {
    const before = this.approval;
    this.approval = merged(before, approval);
    const a = this.approval;
    this.node.dataset.status = a.status;
    if (a.status === "pending") {
      if (!this.form) this.buildPending();
      this.fillArgs();
      this.due.textContent = timeoutWords(a);
    } else if (!before || before.status !== a.status || this.decidedAt !== a.decided_at) {
      this.buildDecided();
    } else {
      this.fillArgs();
    }
  }

  head() {
    const a = this.approval;
    this.toolLabel = isPlan(a) ? el("strong", { class: "decision-tool" }, "A plan") : el("code", { class: "decision-tool" }, a.tool);
    return el(
      "header",
      { class: "decision-head" },
      this.toolLabel,
      el("span", { class: "decision-when" }, `asked at ${clock(a.requested_at)}`),
    );
  }

  argsBox() {
    this.args = el("pre", {
      class: "decision-args",
      tabindex: "0",
      role: "region",
      "aria-label": `Arguments of ${this.approval.tool}`,
    });
    this.hiddenNote = el("p", { class: "decision-hidden", hidden: true });
    if (!isPlan(this.approval)) return [this.args, this.hiddenNote];
    // A plan reads as its delegations; the exact JSON is a click away.
    this.planBox = el("ol", { class: "plan-list" });
    return [this.planBox, this.hiddenNote, el("details", { class: "decision-more" }, el("summary", {}, "As JSON"), this.args)];
  }

  fillArgs() {
    const a = this.approval;
    if (!this.args) return;
    if (a.args === undefined) {
      this.args.textContent = "Loading the arguments…";
      this.args.dataset.loading = "true";
    } else {
      const { text, hidden } = prettyArgs(a.args);
      if (this.args.textContent !== text) {
        this.args.textContent = text;
        if (this.planBox) {
          this.planBox.replaceChildren(...planItems(a, this.nameOf));
          const n = this.planBox.children.length;
          this.toolLabel.textContent = `A plan of ${n} delegation${n === 1 ? "" : "s"}`;
        }
      }
      delete this.args.dataset.loading;
      this.hiddenNote.hidden = hidden === 0;
      this.hiddenNote.textContent = hidden
        ? `The arguments hold ${hidden} invisible or direction-changing character${hidden === 1 ? "" : "s"}, shown as \\u escapes.`
        : "";
    }
    // Nobody approves arguments they have not seen.
    if (this.approve) this.approve.disabled = this.busy || a.args === undefined;
  }

  buildPending() {
    const noteId = `${this.uid}-note`;
    const errorId = `${this.uid}-error`;
    this.due = el("p", { class: "decision-due" });
    this.note = el("textarea", {
      id: noteId,
      rows: "2",
      maxlength: String(NOTE_MAX),
      "aria-describedby": errorId,
      placeholder: "Optional when approving; the agent is told it when denying",
    });
    this.error = el("p", { id: errorId, class: "form-error", role: "alert", hidden: true });
    this.approve = el("button", { type: "submit", class: "primary", "data-decide": "approve" }, "Approve");
    this.deny = el("button", { type: "button", class: "danger", "data-decide": "deny", onclick: () => this.decide("deny") }, "Deny");
    this.form = el(
      "form",
      { class: "decision-form", novalidate: true, onsubmit: (e) => (e.preventDefault(), this.decide("approve")) },
      el("label", { for: noteId }, "Note, or the reason for a denial"),
      this.note,
      this.error,
      el("div", { class: "decision-buttons" }, this.approve, this.deny),
    );
    this.node.replaceChildren(
      this.head(),
      this.due,
      el("h4", { class: "decision-label" }, isPlan(this.approval) ? "Its delegations, exactly as they will be handed out" : "Arguments, exactly as they will run"),
      ...this.argsBox(),
      this.form,
    );
  }

  buildDecided() {
    const a = this.approval;
    const hadFocus = this.node.contains(document.activeElement);
    const { verdict, tone } = decisionWords(a);
    this.decidedAt = a.decided_at;
    this.form = null;
    this.approve = null;
    const status = el("p", { class: `decision-verdict t-${tone}`, tabindex: "-1" }, verdict);
    const details = el("details", { class: "decision-more" }, el("summary", {}, isPlan(a) ? "The plan" : "Arguments"), ...this.argsBox());
    this.node.replaceChildren(
      this.head(),
      status,
      a.note ? el("p", { class: "decision-note" }, el("span", { class: "muted" }, a.status === "denied" ? "Reason: " : "Note: "), a.note) : null,
      details,
    );
    this.fillArgs();
    if (hadFocus) status.focus();
  }

  setBusy(busy, which = null) {
    this.busy = busy;
    if (!this.form) return;
    this.approve.disabled = busy || this.approval.args === undefined;
    this.deny.disabled = busy;
    if (which === "approve") this.approve.textContent = busy ? "Approving…" : "Approve";
    if (which === "deny") this.deny.textContent = busy ? "Denying…" : "Deny";
  }

  showError(message) {
    if (!this.error) return;
    this.error.textContent = message;
    this.error.hidden = !message;
  }

  async decide(kind) {
    if (!this.form || this.busy) return;
    const text = this.note.value.trim();
    if (kind === "deny" && !text) {
      this.showError("Say why you deny it: the agent is told your reason.");
      this.note.focus();
      return;
    }
    this.showError("");
    this.setBusy(true, kind);
    try {
      const decided = kind === "approve" ? await approvalsApi.approve(this.id, text || null) : await approvalsApi.deny(this.id, text);
      this.setBusy(false, kind);
      this.update(decided);
      this.announce(`${decisionWords(decided).verdict}: ${decided.tool}`);
      this.onDecided?.(decided);
    } catch (error) {
      this.setBusy(false, kind);
      if (error.status === 401) {
        this.showError("Deciding needs the access token.");
        this.needToken(error.message, () => this.decide(kind));
      } else if (error.status === 409) {
        await this.standing();
      } else {
        this.showError(error.message);
      }
    }
  }

  /** Someone else decided first: show their decision, which stands. */
  async standing() {
    try {
      const all = await approvalsApi.list({ task: this.approval.task_id, status: "all" });
      const found = all.find((x) => x.id === this.id);
      if (found) {
        this.update(found);
        this.announce(`Already decided — ${decisionWords(found).verdict}. The first decision stands.`);
        return;
      }
    } catch {
      /* fall through: say what is known */
    }
    this.showError("Someone decided this call first; their decision stands.");
  }
}
