// In a task's drawer: people talking with the company about this task — the notes people left
// on it (a note is in the task's next brief), and the questions its agent asked a person
// (ask_human), each waiting question with a box to answer it. Writing needs the token; a
// stale token keeps reading and asks for the token only to write.
//
// Like the approvals section, this is one node per task that the drawer keeps in place across
// its redraws (so text being typed survives them). It reads the task's notes and questions
// from the API when the drawer opens and again when a note or question event touches the task.

import { call } from "./api.js";
import { KIND } from "./kinds.js";
import { clock, el, visible } from "./util.js";

const TEXT_MAX = 4000; // the API's limit (firm.people.TEXT_MAX)
export const TALK_KINDS = new Set([KIND.NOTE, KIND.QUESTION_ASKED, KIND.QUESTION_ANSWERED, KIND.QUESTION_WITHDRAWN]);

const talkApi = {
  notes: (task) => call("GET", `/api/tasks/${encodeURIComponent(task)}/notes`).then((r) => r.data),
  note: (task, text) => call("POST", `/api/tasks/${encodeURIComponent(task)}/notes`, { text }).then((r) => r.data),
  questions: () => call("GET", "/api/questions?status=all").then((r) => r.data),
  answer: (id, answer) => call("POST", `/api/questions/${encodeURIComponent(id)}/answer`, { answer }).then((r) => r.data),
};

let serial = 0;

export class TaskTalk {
  constructor(company, { needToken, toast, announce }) {
    this.company = company;
    this.options = { needToken, toast, announce };
    this.taskId = null;
    this.node = null;
    this.version = 0; // bumped by events touching the shown task
    this.fetchedVersion = -1;
    this.notes = [];
    this.questions = [];
    this.answerBoxes = new Map(); // question id -> its form (kept while it waits)
  }

  /** Events from the live feed: a note or question on the shown task means reading again. */
  onEvents(events) {
    if (events.some((e) => TALK_KINDS.has(e.kind) && e.task_id === this.taskId)) {
      this.version += 1;
      if (this.node) this.fetch(this.taskId);
    }
  }

  section(task) {
    if (task.id !== this.taskId || !this.node) {
      this.taskId = task.id;
      this.notes = [];
      this.questions = [];
      this.answerBoxes.clear();
      this.build();
      this.fetchedVersion = -1;
    }
    if (this.fetchedVersion !== this.version) this.fetch(task.id);
    return this.node;
  }

  build() {
    const uid = `talk-${++serial}`;
    this.questionBox = el("div", { class: "talk-questions" });
    this.noteList = el("ol", { class: "talk-notes" });
    this.noteText = el("textarea", {
      id: `${uid}-note`,
      rows: "2",
      maxlength: String(TEXT_MAX),
      placeholder: "The agent reads it at the start of its next session",
    });
    this.noteError = el("p", { class: "form-error", role: "alert", hidden: true });
    this.noteButton = el("button", { type: "submit", class: "primary", "data-talk": "note" }, "Leave note");
    this.node = el(
      "section",
      { class: "drawer-section talk", "aria-label": "Notes and questions" },
      this.questionBox,
      el("h3", {}, "Notes from people"),
      this.noteList,
      el(
        "form",
        { class: "talk-form", novalidate: true, onsubmit: (e) => (e.preventDefault(), this.leaveNote()) },
        el("label", { for: `${uid}-note` }, "Leave a note on this task"),
        this.noteText,
        this.noteError,
        el("div", { class: "decision-buttons" }, this.noteButton),
      ),
    );
  }

  async fetch(taskId) {
    const version = this.version;
    try {
      const [notes, questions] = await Promise.all([talkApi.notes(taskId), talkApi.questions()]);
      if (taskId !== this.taskId) return;
      this.notes = notes;
      this.questions = questions.filter((q) => q.task_id === taskId);
      this.fetchedVersion = version;
    } catch {
      return; // the drawer still shows the task; the next event reads again
    }
    this.render();
  }

  render() {
    this.noteList.replaceChildren(
      ...(this.notes.length
        ? this.notes.map((n) =>
            el("li", { class: "talk-note" }, el("p", { class: "pre" }, visible(n.text)), el("p", { class: "muted" }, `${n.by} · ${clock(n.at)}`)),
          )
        : [el("li", { class: "muted" }, "No notes yet.")]),
    );
    const waiting = this.questions.filter((q) => q.status === "pending");
    const done = this.questions.filter((q) => q.status !== "pending");
    const nodes = [];
    if (waiting.length) nodes.push(el("h3", {}, waiting.length === 1 ? "A question for you" : `Questions for you (${waiting.length})`));
    for (const q of waiting) nodes.push(this.answerForm(q));
    for (const id of [...this.answerBoxes.keys()]) if (!waiting.some((q) => q.id === id)) this.answerBoxes.delete(id);
    if (done.length) nodes.push(el("h3", {}, "Questions answered"));
    for (const q of done) nodes.push(this.answered(q));
    this.questionBox.replaceChildren(...nodes);
  }

  answered(q) {
    const words = q.status === "answered" ? `Answered by ${q.answered_by} at ${clock(q.answered_at)}` : `${q.status} at ${clock(q.answered_at)}`;
    return el(
      "article",
      { class: "decision talk-question", dataset: { question: q.id } },
      el("p", { class: "pre" }, visible(q.question)),
      el("p", { class: "decision-verdict t-good" }, words),
      q.answer ? el("p", { class: "pre decision-note" }, visible(q.answer)) : null,
    );
  }

  answerForm(q) {
    let box = this.answerBoxes.get(q.id);
    if (box) return box.node;
    const id = `talk-${++serial}-answer`;
    const text = el("textarea", { id, rows: "3", maxlength: String(TEXT_MAX), placeholder: "Your answer is the agent's result for this question" });
    const error = el("p", { class: "form-error", role: "alert", hidden: true });
    const button = el("button", { type: "submit", class: "primary", "data-talk": "answer" }, "Answer");
    box = { text, error, button };
    box.node = el(
      "article",
      { class: "decision talk-question waiting", dataset: { question: q.id } },
      el("p", { class: "pre" }, el("strong", {}, `${this.company.agent(q.agent)?.name ?? q.agent} asks: `), visible(q.question)),
      el(
        "form",
        { class: "talk-form", novalidate: true, onsubmit: (e) => (e.preventDefault(), this.answer(q, box)) },
        el("label", { for: id }, "Your answer"),
        text,
        error,
        el("div", { class: "decision-buttons" }, button),
      ),
    );
    this.answerBoxes.set(q.id, box);
    return box.node;
  }

  async leaveNote() {
    const text = this.noteText.value.trim();
    if (!text) return this.fail(this.noteError, "Write the note first.", this.noteText);
    this.noteButton.disabled = true;
    try {
      await talkApi.note(this.taskId, text);
      this.noteText.value = "";
      this.fail(this.noteError, "");
      this.options.announce?.("Note left on the task");
      this.version += 1;
      await this.fetch(this.taskId);
    } catch (error) {
      if (error.status === 401) this.options.needToken(error.message, () => this.leaveNote());
      else this.fail(this.noteError, error.message || "The note could not be left.");
    } finally {
      this.noteButton.disabled = false;
    }
  }

  async answer(q, box) {
    const text = box.text.value.trim();
    if (!text) return this.fail(box.error, "Write your answer first.", box.text);
    box.button.disabled = true;
    try {
      await talkApi.answer(q.id, text);
      this.options.announce?.("Question answered");
    } catch (error) {
      if (error.status === 401) {
        this.options.needToken(error.message, () => this.answer(q, box));
        return;
      }
      if (error.status !== 409) {
        this.fail(box.error, error.message || "The answer could not be sent.");
        return;
      }
      // Answered elsewhere first: the answer that stands is shown below.
    } finally {
      box.button.disabled = false;
    }
    this.version += 1;
    await this.fetch(this.taskId);
  }

  fail(node, message, focus = null) {
    node.textContent = message;
    node.hidden = !message;
    focus?.focus();
  }
}
