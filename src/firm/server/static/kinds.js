// The event kinds the page reacts to, in one place (the engine's catalogue of kinds is the
// authority; this file names the ones the page draws).

/** A task's ending: its outcome is final. */
export const ENDINGS = new Set(["completed", "failed", "cancelled"]);
/** Kinds that change the list of goals (a new one, or one ending). */
export const GOAL_KINDS = new Set(["created", ...ENDINGS]);
/** The audit trail's own entries: kept in the log and the drawer, out of the activity feed. */
export const AUDIT_KINDS = new Set(["checkpoint"]);
/** Tools whose calls show as their own events (delegated, completed, failed). */
export const LIFECYCLE_TOOLS = new Set(["delegate_task", "complete_task", "fail_task"]);
