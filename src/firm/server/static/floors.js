// The floor in 3D or as a plan: one of the two shows the company, with the same interface
// (build, render, show, animate), so the page and replay drive whichever is on screen.
//
// 3D is the default where WebGL works and the system does not ask for reduced motion; the
// plan stays for everyone else, and either is a choice the browser remembers. three.js is
// loaded only when the 3D floor is first shown, so the plan costs nothing extra.

import { Floor } from "./floor.js";
import { reducedMotion, webglAvailable } from "./util.js";

const KEY = "firm.floor";

function saved() {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;
  }
}

function remember(choice) {
  try {
    localStorage.setItem(KEY, choice);
  } catch {
    /* a browser without storage asks again next time */
  }
}

export class Floors {
  constructor(company, { onOpenTask }) {
    this.company = company;
    this.onOpenTask = onOpenTask;
    this.$ = (id) => document.getElementById(id);
    this.plan = new Floor(this.$("floor-2d"), company, { onOpenTask });
    this.three = null; // the 3D floor, once loaded
    this.loading = null;
    this.webgl = webglAvailable();
    this.active = this.plan;
    this.$("floor-pick-3d").addEventListener("click", () => this.choose("3d"));
    this.$("floor-pick-2d").addEventListener("click", () => this.choose("2d"));
    this.$("cam-fit").addEventListener("click", () => this.three?.setMode("fit"));
    this.$("cam-follow").addEventListener("click", () =>
      this.three?.setMode(this.three.mode === "follow" ? "fit" : "follow"),
    );
    reducedMotion.addEventListener("change", () => this.apply());
    this.apply();
  }

  /** Which floor to show: the person's choice, else 3D where it can run and motion is welcome. */
  wants3d() {
    if (!this.webgl) return false;
    const choice = saved();
    if (choice) return choice === "3d";
    return !reducedMotion.matches;
  }

  choose(choice) {
    remember(choice);
    this.apply();
  }

  async apply() {
    const three = this.wants3d();
    this.$("floor-pick-3d").setAttribute("aria-pressed", String(three));
    this.$("floor-pick-2d").setAttribute("aria-pressed", String(!three));
    this.$("floor-pick-3d").disabled = !this.webgl;
    this.$("floor-note").textContent = this.webgl ? "" : "3D needs WebGL, which this browser does not offer.";
    if (three && !this.three) {
      try {
        await this.load();
      } catch (error) {
        this.webgl = false;
        this.$("floor-note").textContent = `3D could not start (${error.message}); showing the plan.`;
        return this.apply();
      }
    }
    const next = three && this.three ? this.three : this.plan;
    this.$("floor-3d").hidden = next !== this.three;
    this.$("floor-2d").hidden = next !== this.plan;
    this.$("floor-cam").hidden = next !== this.three;
    document.getElementById("view-floor").dataset.floor = next === this.three ? "3d" : "2d";
    if (next !== this.plan) document.getElementById("flights").replaceChildren();
    this.active = next;
    next.show(this.company);
    if (next === this.three) this.three.resize();
  }

  load() {
    this.loading ??= import("./floor3d.js").then(({ Floor3D }) => {
      this.three = new Floor3D(this.$("floor-3d"), this.company, {
        onOpenTask: this.onOpenTask,
        onUserMove: (mode) => this.cameraButtons(mode),
      });
      this.cameraButtons(this.three.mode);
    });
    return this.loading;
  }

  cameraButtons(mode) {
    this.$("cam-fit").setAttribute("aria-pressed", String(mode === "fit"));
    this.$("cam-follow").setAttribute("aria-pressed", String(mode === "follow"));
  }

  get mode() {
    return this.active === this.three ? "3d" : "2d";
  }

  show(company) {
    this.company = company;
    this.active.show(company);
    // The hidden floor catches up when it is shown (show() rebuilds it).
  }

  build() {
    this.active.build();
  }

  render() {
    this.active.render();
  }

  animate(events) {
    this.active.animate(events);
  }
}
