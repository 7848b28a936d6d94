// The event kinds the page reacts to, in one place. They come from the engine's catalogue
// (catalogue.js, generated from firm/events.py): no module spells a kind as a string.

import { CATALOGUE, KIND } from "./catalogue.js";

export { CATALOGUE, KIND };

const kindsWhere = (test) => Object.keys(CATALOGUE.kinds).filter((k) => test(CATALOGUE.kinds[k]));

/** A task's ending: its outcome is final. */
export const ENDINGS = new Set(kindsWhere((spec) => CATALOGUE.statuses[spec.status]?.terminal === true));
/** Kinds that change the list of goals (a new one, or one ending). */
export const GOAL_KINDS = new Set([KIND.CREATED, ...ENDINGS]);
/** The audit trail's own entries: kept in the log and the drawer, out of the activity feed. */
export const AUDIT_KINDS = new Set([KIND.CHECKPOINT]);
/** Tools whose calls show as their own events (delegated, completed, failed). */
export const LIFECYCLE_TOOLS = new Set(["delegate_task", "complete_task", "fail_task"]);
/** A call waiting for a person: asked, decided, run. */
export const APPROVAL_KINDS = new Set([KIND.APPROVAL_REQUESTED, KIND.APPROVAL_DECIDED, KIND.APPROVAL_CLAIMED]);
