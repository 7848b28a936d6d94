// Zoom and pan for the timeline: which stretch of the run's span the lanes show.
// The window is kept in seconds from the run's start, so a live run that keeps growing does not
// slide the stretch someone is reading; a window that reaches the end stays pinned to it and
// follows the newest work, the way a terminal that is scrolled to the bottom keeps following.

const MIN_SPAN = 0.05; // seconds: closer than this, bars are wider than anything they say
const STEP = 1.6; // one press of + or −
const PAN = 0.2; // one arrow press moves a fifth of the window

export class TimeWindow {
  /** onChange(): called after every change, to redraw. */
  constructor(onChange) {
    this.onChange = onChange;
    this.reset(false);
  }

  /** The whole run again. */
  reset(notify = true) {
    this.zoomed = false;
    this.from = 0; // seconds from the span's start
    this.to = 0;
    this.pinned = false; // the window's right edge follows the span's end
    this.last = null;
    if (notify) this.onChange();
  }

  /** A stable text for caches: changes whenever the window does. */
  get key() {
    return this.zoomed ? `${this.from.toFixed(4)}-${this.to.toFixed(4)}-${this.pinned}` : "all";
  }

  /** [v0, v1]: the stretch of [t0, t1] to draw. */
  apply(t0, t1) {
    let v0 = t0;
    let v1 = t1;
    if (this.zoomed) {
      const width = this.to - this.from;
      if (this.pinned) {
        v1 = t1;
        v0 = Math.max(t0, t1 - width);
      } else {
        v0 = Math.min(t0 + this.from, t1);
        v1 = Math.min(t0 + this.to, t1);
        if (v1 - v0 < MIN_SPAN) v0 = Math.max(t0, v1 - MIN_SPAN);
      }
    }
    this.last = { t0, t1, v0, v1 };
    return [v0, v1];
  }

  /** Zoom by factor (< 1 closer, > 1 farther) keeping the moment at anchor (0..1 across). */
  zoom(factor, anchor = 0.5) {
    if (!this.last) return;
    const { t0, t1, v0, v1 } = this.last;
    const full = t1 - t0;
    if (full <= MIN_SPAN) return;
    const width = Math.min(Math.max((v1 - v0) * factor, MIN_SPAN), full);
    if (width >= full - 1e-9) {
      this.reset();
      return;
    }
    const at = v0 + (v1 - v0) * clamp(anchor, 0, 1);
    const start = clamp(at - width * clamp(anchor, 0, 1), t0, t1 - width);
    this.set(t0, t1, start, start + width);
  }

  /** Move the window by a fraction of its own width (negative: back in time). */
  pan(fraction) {
    if (!this.zoomed || !this.last) return;
    const { t0, t1, v0, v1 } = this.last;
    const width = v1 - v0;
    const start = clamp(v0 + fraction * width, t0, t1 - width);
    this.set(t0, t1, start, start + width);
  }

  set(t0, t1, v0, v1) {
    this.zoomed = true;
    this.from = v0 - t0;
    this.to = v1 - t0;
    this.pinned = v1 >= t1 - 1e-6;
    this.last = { t0, t1, v0, v1 };
    this.onChange();
  }

  /**
   * Mouse, touch and keys on the lanes: Ctrl/⌘ + wheel (or a trackpad's pinch) zooms where the
   * pointer is, Shift + wheel or a sideways swipe pans, dragging the lanes' background pans,
   * and the frame takes + − 0 ← →.
   */
  attach(lanes, frame) {
    const across = (clientX) => {
      const r = lanes.getBoundingClientRect();
      return r.width ? (clientX - r.left) / r.width : 0.5;
    };
    lanes.addEventListener(
      "wheel",
      (e) => {
        if (e.ctrlKey || e.metaKey) {
          e.preventDefault();
          this.zoom(Math.exp(clamp(e.deltaY, -200, 200) * 0.004), across(e.clientX));
        } else if (this.zoomed && (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY))) {
          e.preventDefault();
          const width = lanes.getBoundingClientRect().width || 1;
          this.pan((e.shiftKey && !e.deltaX ? e.deltaY : e.deltaX) / width);
        }
      },
      { passive: false },
    );
    let drag = null;
    lanes.addEventListener("pointerdown", (e) => {
      if (!this.zoomed || e.button !== 0 || e.target.closest(".tl-bar")) return;
      drag = { id: e.pointerId, x: e.clientX };
      lanes.setPointerCapture(e.pointerId);
      lanes.classList.add("panning");
    });
    lanes.addEventListener("pointermove", (e) => {
      if (!drag || e.pointerId !== drag.id) return;
      const width = lanes.getBoundingClientRect().width || 1;
      this.pan(-(e.clientX - drag.x) / width);
      drag.x = e.clientX;
    });
    const end = (e) => {
      if (!drag || e.pointerId !== drag.id) return;
      drag = null;
      lanes.classList.remove("panning");
    };
    lanes.addEventListener("pointerup", end);
    lanes.addEventListener("pointercancel", end);
    frame.addEventListener("keydown", (e) => {
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const keys = {
        "+": () => this.zoom(1 / STEP),
        "=": () => this.zoom(1 / STEP),
        "-": () => this.zoom(STEP),
        _: () => this.zoom(STEP),
        0: () => this.reset(),
        ArrowLeft: () => this.pan(-PAN),
        ArrowRight: () => this.pan(PAN),
      };
      const act = keys[e.key];
      if (!act || (e.key.startsWith("Arrow") && !this.zoomed)) return;
      e.preventDefault();
      act();
    });
  }
}

function clamp(v, lo, hi) {
  return Math.min(Math.max(v, lo), hi);
}
