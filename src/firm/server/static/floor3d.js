// The office floor in 3D: a room per team laid out from the org chart (a manager's room holds
// the desks of their reports who lead no one; a report who leads a team gets a room of their
// own beside their manager's, one level down), a desk per agent with a status light, and the
// work flying between desks as arcs. It reads the same Company the 2D floor and replay read.
//
// Rendering is on demand: a frame is drawn when something changed or moves, never in an idle
// loop, so a quiet office costs nothing on a loaded machine.

import * as THREE from "./vendor/three/three.module.min.js";
import { OrbitControls } from "./vendor/three/addons/OrbitControls.js";
import { CSS2DObject, CSS2DRenderer } from "./vendor/three/addons/CSS2DRenderer.js";
import { askBadge, showAsks, waitingWords } from "./asks.js";
import { usageByDesk, usageText } from "./cost.js";
import { endsMany } from "./endings.js";
import { KIND } from "./kinds.js";
import { clip, el, hue, initials, reducedMotion } from "./util.js";

const tail = (text, n) => (text.length > n ? `…${text.slice(-n).replace(/^\S*\s/, "")}` : text);

const DX = 3.4; // desk pitch across a room
const DZ = 3.6; // desk pitch into a room
const PAD = 1.3; // a room's margin around its desks
const GAP = 2.4; // between neighbouring rooms
const MAX_FLIGHTS = 24;
const FLIGHT_MS = 1500;
const FADE_MS = 450;
const VIEW = new THREE.Vector3(0, 1.35, 1).normalize(); // from the target towards the camera
const MARGIN = 0.9;
const ASPECT = 1.9;
// A floor with more desks than this, seen whole ("far"), shows its desks' status lights only:
// a thousand name tags seen from afar are a blur of overlapping initials, and keeping them
// current was most of a big replay's frame (style, layout and raster of every changed tag).
// Zoomed in to a team, the tags come back, brought up to date.
const LOD_DESKS = 300; // the shape a team's block aims for: a landscape screen, seen at a slant // fitted points stay inside this share of the view (labels need room)

/** Whether WebGL here is drawn by the CPU (SwiftShader, llvmpipe): then frames are kept cheap. */
function softwareGl() {
  try {
    const gl = document.createElement("canvas").getContext("webgl");
    const info = gl?.getExtension("WEBGL_debug_renderer_info");
    const name = info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : "";
    gl?.getExtension("WEBGL_lose_context")?.loseContext();
    return /swiftshader|llvmpipe|software/i.test(String(name));
  } catch {
    return false;
  }
}

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

/** Rooms as a tree, from the org chart: a room per lead, its leaf reports as its desks. */
function roomTree(company) {
  const agents = company.agents;
  const leads = (a) => a.reports.some((r) => agents.has(r));
  const make = (lead, seen) => {
    seen.add(lead.id);
    const reports = lead.reports.map((r) => agents.get(r)).filter((r) => r && !seen.has(r.id));
    for (const r of reports) if (!leads(r)) seen.add(r.id);
    return {
      lead,
      members: reports.filter((r) => !leads(r)),
      children: reports.filter(leads).map((r) => make(r, seen)),
    };
  };
  const seen = new Set();
  const tops = company.org.agents.filter((a) => !a.reports_to || !agents.has(a.reports_to));
  const rooms = tops.map((a) => make(a, seen));
  // Anyone a cycle or a stray reference kept out still gets a room.
  for (const a of company.org.agents) if (!seen.has(a.id)) rooms.push(make(a, seen));
  return rooms;
}

/** Size every room and its subtree; children are laid out in rows so the company stays wide
 * rather than tall and narrow, which suits a screen. */
function measure(room) {
  const n = room.members.length;
  room.cols = Math.max(1, Math.min(6, Math.ceil(Math.sqrt(n * 1.6))));
  room.rows = Math.ceil(n / room.cols);
  room.w = Math.max(room.cols, 1) * DX + PAD * 2;
  room.d = (1 + room.rows) * DZ + PAD * 2 - 0.8;
  for (const c of room.children) measure(c);
  // Child rooms go in rows; how many per row is chosen so the whole block is about as wide
  // as a screen is, rather than one long strip.
  const k = room.children.length;
  let best = null;
  for (let perRow = 1; perRow <= Math.max(1, k); perRow++) {
    const rows = [];
    for (let i = 0; i < k; i += perRow) rows.push(room.children.slice(i, i + perRow));
    let w = room.w;
    let d = room.d;
    for (const row of rows) {
      w = Math.max(w, row.reduce((s, c) => s + c.bw, 0) + GAP * (row.length - 1));
      d += GAP * 1.6 + Math.max(...row.map((c) => c.bd));
    }
    const score = Math.abs(Math.log(w / d / ASPECT));
    if (!best || score < best.score - 1e-9) best = { rows, w, d, score };
  }
  room.childRows = best.rows;
  const w = best.w;
  const d = best.d;
  room.bw = w;
  room.bd = d;
}

function place(room, x0, z0, out) {
  room.x = x0 + room.bw / 2; // centre of the room
  room.z = z0 + room.d / 2;
  out.push(room);
  let z = z0 + room.d + GAP * 1.6;
  for (const row of room.childRows) {
    const width = row.reduce((s, c) => s + c.bw, 0) + GAP * (row.length - 1);
    let x = x0 + (room.bw - width) / 2;
    for (const c of row) {
      place(c, x, z, out);
      x += c.bw + GAP;
    }
    z += Math.max(...row.map((c) => c.bd)) + GAP * 1.6;
  }
}

/** A desk's light and words for its state. */
function deskState(d) {
  if (d.state === "working") return "working";
  if (d.state === "waiting") return d.person ? "person" : "waiting";
  if (d.task && (d.task.status === "failed") && !d.held) return "failed";
  return d.state === "queued" ? "queued" : "idle";
}

export class Floor3D {
  constructor(root, company, { onOpenTask, onUserMove }) {
    this.root = root;
    this.company = company;
    this.onOpenTask = onOpenTask;
    this.onUserMove = onUserMove ?? (() => {});
    this.desks = new Map(); // agent id -> {group, light, label, task, pos}
    this.flights = [];
    this.pulses = [];
    this.orgKey = null;
    this.mode = "fit"; // "fit" | "follow" | "free"
    this.counts = { delegations: 0, results: 0, cancels: 0 };
    this.frameQueued = false;
    this.tween = null;
    this.focusKey = "";
    this.cost = { frames: 0, ms: 0, max: 0 }; // what drawing frames costs the page's thread

    this.canvasBox = el("div", { class: "floor3d-canvas" });
    root.replaceChildren(this.canvasBox);
    this.software = softwareGl();
    this.lightsOnly = false; // a big floor seen whole: no desk tags (see LOD_DESKS)
    this.renderer = new THREE.WebGLRenderer({ antialias: !this.software, preserveDrawingBuffer: true });
    // Reading a shader's log waits for the GPU process; ours are three.js's own, known good.
    this.renderer.debug.checkShaderErrors = false;
    // Materials of arcs, packets and rings are reused rather than disposed: disposing the last
    // material of a kind drops its compiled program, and the next arc compiled it again, which
    // took most of a busy floor's frame on a CPU-drawn canvas.
    this.pool = { line: [], packet: [], ring: [] };
    this.renderer.setPixelRatio(Math.min(2, window.devicePixelRatio || 1));
    this.renderer.domElement.setAttribute("aria-hidden", "true");
    this.canvasBox.append(this.renderer.domElement);
    this.labels = new CSS2DRenderer();
    this.labels.domElement.className = "floor3d-labels";
    this.canvasBox.append(this.labels.domElement);
    // Labels of arcs in flight move every frame; they are placed by hand, so a frame of flying
    // arcs does not rewrite every desk's label.
    this.tagLayer = el("div", { class: "floor3d-labels floor3d-tags" });
    this.canvasBox.append(this.tagLayer);
    this.lastView = new THREE.Matrix4();
    this.labelsDirty = true;

    this.scene = new THREE.Scene();
    this.camera = new THREE.PerspectiveCamera(40, 1, 0.5, 4000);
    this.camera.position.copy(VIEW).multiplyScalar(40);
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x8a8070, 2.2));
    const sun = new THREE.DirectionalLight(0xffffff, 1.6);
    sun.position.set(-30, 60, 40);
    this.scene.add(sun);
    this.world = new THREE.Group();
    this.scene.add(this.world);

    this.controls = new OrbitControls(this.camera, this.renderer.domElement);
    this.controls.maxPolarAngle = Math.PI * 0.47; // never under the floor
    this.controls.minDistance = 4;
    this.controls.maxDistance = 2500;
    this.controls.screenSpacePanning = false; // panning slides over the floor
    this.controls.keyPanSpeed = 40;
    this.controls.listenToKeyEvents(this.canvasBox);
    this.controls.addEventListener("change", () => this.frame());
    this.controls.addEventListener("start", () => {
      this.tween = null;
      this.setMode("free");
    });
    this.canvasBox.tabIndex = 0;
    this.canvasBox.setAttribute("role", "application");
    this.canvasBox.setAttribute(
      "aria-label",
      "The office in 3D. Arrow keys pan, shift and arrows orbit, + and - zoom, f fits everyone in view. Tab reaches each desk.",
    );
    this.canvasBox.addEventListener("keydown", (e) => this.onKey(e));
    this.pick();

    this.resizer = new ResizeObserver(() => this.resize());
    this.resizer.observe(this.canvasBox);
    this.resize();
  }

  /** Show another company (the live one, or a replay's). */
  show(company) {
    this.company = company;
    // The same org chart keeps its scene: each desk's key tells render() what to redraw, and
    // a replay of a 1,000-desk company does not rebuild 2,000 labels to start.
    this.clearFlights();
    this.build();
    this.render();
  }

  setMode(mode) {
    if (this.mode === mode) return;
    this.mode = mode;
    this.root.dataset.camera = mode;
    this.onUserMove(mode);
    if (mode === "fit") this.fit();
    if (mode === "follow") this.follow(true);
  }

  /** Lay the rooms and desks out, once per org chart (and when the colour scheme changes). */
  build(force = false) {
    const org = this.company.org;
    if (!org) return;
    const key = org.agents.map((a) => `${a.id}<${a.reports_to ?? ""}`).join(",");
    if (key === this.orgKey && !force) return;
    this.orgKey = key;
    this.clearFlights();
    for (const child of [...this.world.children]) this.dispose(child);
    this.desks.clear();

    const palette = {
      floor: new THREE.Color(css("--floor") || "#ebe7df"),
      surface: new THREE.Color(css("--surface") || "#ffffff"),
      line: new THREE.Color(css("--line") || "#e1dcd2"),
      ink: new THREE.Color(css("--ink") || "#1c2330"),
    };
    this.palette = palette;
    this.lit = null; // the lights' colours follow the palette
    this.renderer.setClearColor(palette.floor);
    this.lightColours = {
      idle: new THREE.Color(css("--s-todo") || "#64748b"),
      queued: new THREE.Color(css("--s-todo") || "#64748b"),
      working: new THREE.Color(css("--s-in_progress") || "#c2410c"),
      waiting: new THREE.Color(css("--s-waiting") || "#0369a1"),
      person: new THREE.Color(css("--s-person") || "#b45309"),
      failed: new THREE.Color(css("--s-failed") || "#b91c1c"),
    };
    this.arcColours = {
      delegation: new THREE.Color(css("--accent") || "#4338ca"),
      done: new THREE.Color(css("--s-done") || "#15803d"),
      failed: new THREE.Color(css("--s-failed") || "#b91c1c"),
      cancelled: new THREE.Color(css("--s-cancelled") || "#7e22ce"),
    };

    const rooms = roomTree(this.company);
    const placed = [];
    let x = 0;
    for (const r of rooms) {
      measure(r);
      place(r, x, 0, placed);
      x += r.bw + GAP * 2;
    }
    const geo = this.geometry();
    // Every box of the floor (room floors, walls, desk tops, legs, screens), every chair and
    // every light is one instance of three instanced meshes: three draw calls whatever the
    // company's size, where a mesh per part made a 1,000-desk floor thousands of draw calls.
    this.parts = { box: [], chair: [], light: [] };
    this.corners = [];
    for (const room of placed) {
      for (const [sx, sz] of [[-1, -1], [1, -1], [-1, 1], [1, 1]]) {
        this.corners.push(new THREE.Vector3(room.x + (sx * room.w) / 2, sz < 0 ? 0.6 : 0, room.z + (sz * room.d) / 2));
      }
      const g = new THREE.Group();
      g.position.set(room.x, 0, room.z);
      this.part("box", null, palette.surface, [room.x, -0.04, room.z], [room.w, 0.08, room.d]);
      for (const [w, d, px, pz] of [
        [room.w, 0.15, 0, -room.d / 2],
        [0.15, room.d, -room.w / 2, 0],
        [0.15, room.d, room.w / 2, 0],
      ]) {
        this.part("box", null, palette.line, [room.x + px, 0.27, room.z + pz], [w, 0.55, d]);
      }
      const boss = room.lead.reports_to ? this.company.agent(room.lead.reports_to) : null;
      const name = room.lead.reports.length ? `${room.lead.name}'s team` : room.lead.name;
      const sign = new CSS2DObject(
        el("div", { class: "d3-room" }, el("b", {}, name), boss ? ` · reports to ${boss.name}` : " · top of the company"),
      );
      sign.position.set(0, 0.6, -room.d / 2 + 0.1);
      sign.center.set(0.5, 1);
      g.add(sign);
      this.world.add(g);
      // The lead's desk at the front, facing the room; the others in rows behind.
      const z0 = room.z - room.d / 2 + PAD + 0.9;
      this.desk(room.lead, true, room.x, z0, geo);
      room.members.forEach((m, i) => {
        const row = Math.floor(i / room.cols);
        const inRow = Math.min(room.cols, room.members.length - row * room.cols);
        const col = i % room.cols;
        this.desk(m, false, room.x + (col - (inRow - 1) / 2) * DX, z0 + (row + 1) * DZ, geo);
      });
    }
    this.instances(geo);
    this.warmFlights(geo);
    this.labelsDirty = true;
    this.fitNow();
  }

  geometry() {
    if (!this.geo) {
      this.geo = {
        box: new THREE.BoxGeometry(1, 1, 1),
        light: new THREE.SphereGeometry(0.32, 20, 14),
        chair: new THREE.CylinderGeometry(0.42, 0.42, 0.5, 16),
        ring: new THREE.RingGeometry(0.9, 1.2, 40),
        packet: new THREE.SphereGeometry(0.3, 16, 12),
      };
      this.colours = {
        desk: new THREE.Color(0xc8a97e),
        lead: new THREE.Color(0xa4825a),
        screen: new THREE.Color(0x2b3140),
      };
    }
    return this.geo;
  }

  /** Compile the arcs', packets' and rings' shaders now, off the page's thread where the
   * browser can, so the first delegation of a run does not wait for them: the first arc of a
   * replay blocked a frame for a second on a CPU-drawn canvas while its program linked. */
  warmFlights(geo) {
    if (this.warmed) return;
    this.warmed = true;
    const colour = this.arcColours.delegation;
    const line = new THREE.Line(
      new THREE.BufferGeometry().setFromPoints([new THREE.Vector3(), new THREE.Vector3(0, 1, 0)]),
      this.borrow("line", () => new THREE.LineBasicMaterial({ transparent: true }), colour, 0.9),
    );
    const packet = new THREE.Mesh(
      geo.packet,
      this.borrow("packet", () => new THREE.MeshBasicMaterial({ transparent: true }), colour, 1),
    );
    const ring = new THREE.Mesh(
      geo.ring,
      this.borrow(
        "ring",
        () => new THREE.MeshBasicMaterial({ transparent: true, side: THREE.DoubleSide, depthWrite: false }),
        colour,
        0.85,
      ),
    );
    const warm = new THREE.Group().add(line, packet, ring);
    const done = () => {
      line.geometry.dispose();
      this.pool.line.push(line.material);
      this.pool.packet.push(packet.material);
      this.pool.ring.push(ring.material);
    };
    Promise.resolve()
      .then(() => this.renderer.compileAsync(warm, this.camera, this.scene))
      .then(done, done);
  }

  /** A status light's colour: bright while busy or failed, dimmed when nothing happens. */
  lightColour(state) {
    this.lit ??= new Map();
    if (!this.lit.has(state)) {
      const colour = this.lightColours[state].clone();
      const bright = state === "working" || state === "waiting" || state === "failed";
      if (!bright) colour.lerp(this.palette.surface, 0.35);
      this.lit.set(state, colour);
    }
    return this.lit.get(state);
  }

  /** One instance of a part: which agent's desk it belongs to (for picking), colour, place, size. */
  part(kind, agentId, colour, [x, y, z], [sx, sy, sz] = [1, 1, 1]) {
    this.parts[kind].push({ agentId, colour, x, y, z, sx, sy, sz });
    return this.parts[kind].length - 1;
  }

  /** The collected parts become three instanced meshes (lit boxes and chairs, unlit lights). */
  instances(geo) {
    const Lit = this.software ? THREE.MeshLambertMaterial : THREE.MeshStandardMaterial;
    const lit = this.software ? {} : { roughness: 0.85 };
    const m = new THREE.Matrix4();
    const q = new THREE.Quaternion();
    const v = new THREE.Vector3();
    const s = new THREE.Vector3();
    this.instanced = {};
    for (const [kind, geometry, material] of [
      ["box", geo.box, new Lit({ color: 0xffffff, ...lit })],
      ["chair", geo.chair, new Lit({ color: 0xffffff, ...lit })],
      ["light", geo.light, new THREE.MeshBasicMaterial({ color: 0xffffff })],
    ]) {
      const list = this.parts[kind];
      const mesh = new THREE.InstancedMesh(geometry, material, Math.max(1, list.length));
      mesh.count = list.length;
      list.forEach((p, i) => {
        mesh.setMatrixAt(i, m.compose(v.set(p.x, p.y, p.z), q, s.set(p.sx, p.sy, p.sz)));
        mesh.setColorAt(i, p.colour);
      });
      mesh.instanceMatrix.needsUpdate = true;
      if (mesh.instanceColor) mesh.instanceColor.needsUpdate = true;
      mesh.computeBoundingSphere();
      mesh.userData.owners = list.map((p) => p.agentId);
      this.instanced[kind] = mesh;
      this.world.add(mesh);
    }
  }

  desk(agent, lead, x, z) {
    const g = new THREE.Group();
    g.position.set(x, 0, z);
    const wood = lead ? this.colours.lead : this.colours.desk;
    this.part("box", agent.id, wood, [x, 0.78, z], [2.3, 0.16, 1.2]);
    this.part("box", agent.id, wood, [x, 0.38, z - 0.45], [2.1, 0.7, 0.2]);
    this.part("box", agent.id, this.colours.screen, [x, 1.22, z - 0.35], [1.0, 0.62, 0.07]);
    this.part("chair", agent.id, new THREE.Color(`hsl(${hue(agent.id)}, 55%, 55%)`), [x, 0.25, z + 0.95]);
    const light = this.part("light", agent.id, this.lightColour("idle"), [x, 2.05, z - 0.35]);
    const state = el("span", { class: "d3-state" }, "Idle");
    const usage = el("span", { class: "d3-usage", hidden: true });
    const face = el("span", { class: "d3-face", "aria-hidden": "true" }, initials(agent.name ?? agent.id));
    face.style.setProperty("--hue", hue(agent.id));
    const button = el(
      "button",
      {
        type: "button",
        class: `d3-desk${lead ? " lead" : ""}`,
        dataset: { agent: agent.id, state: "idle" },
        "aria-label": `${agent.name}, ${agent.title}: idle`,
        onclick: () => this.open(agent.id),
      },
      face,
      el("span", { class: "d3-who" }, el("b", {}, agent.name), state, usage),
    );
    const tag = new CSS2DObject(button);
    tag.position.set(0, 0, 1.7);
    tag.center.set(0.5, 0);
    g.add(tag);
    // The task's title, and under it the last words the agent is writing while it streams.
    const taskName = el("span", { class: "d3-task-name" });
    const said = el("span", { class: "d3-said", hidden: true });
    const title = el("div", { class: "d3-task", hidden: true, dataset: { agent: agent.id } }, taskName, said);
    const bubble = new CSS2DObject(title);
    bubble.position.set(0, 2.5, -0.35);
    bubble.center.set(0.5, 1);
    g.add(bubble);
    const ask = askBadge((taskId) => this.onOpenTask(taskId), "ask-badge d3-ask");
    const askTag = new CSS2DObject(ask);
    askTag.position.set(0, 3.4, -0.35);
    askTag.center.set(0.5, 1);
    g.add(askTag);
    this.world.add(g);
    this.desks.set(agent.id, { group: g, light, button, state, usage, title, taskName, said, saying: "", face, ask, pos: new THREE.Vector3(x, 1.2, z), key: "" });
  }

  open(agentId) {
    this.picked = agentId;
    const d = this.company.desks().get(agentId);
    if (d?.task) this.onOpenTask(d.task.id);
  }

  /** Clicks on the canvas pick the desk under the pointer (a drag is a camera move). */
  pick() {
    const canvas = this.renderer.domElement;
    const ray = new THREE.Raycaster();
    let down = null;
    canvas.addEventListener("pointerdown", (e) => (down = { x: e.clientX, y: e.clientY }));
    canvas.addEventListener("pointerup", (e) => {
      if (!down || Math.hypot(e.clientX - down.x, e.clientY - down.y) > 6) return;
      const r = canvas.getBoundingClientRect();
      ray.setFromCamera(
        new THREE.Vector2(((e.clientX - r.left) / r.width) * 2 - 1, -((e.clientY - r.top) / r.height) * 2 + 1),
        this.camera,
      );
      const owner = (h) => h.object.userData.owners?.[h.instanceId] ?? h.object.userData.agent;
      const hit = ray.intersectObjects(this.world.children, true).find(owner);
      if (hit) this.open(owner(hit));
    });
  }

  /** Desks follow the company: light, words, the task above a busy desk. */
  render() {
    this.build();
    if (!this.desks.size) return;
    const desks = this.company.desks();
    const spent = this.lightsOnly ? null : usageByDesk(this.company);
    let changed = false;
    for (const [id, d] of desks) {
      const desk = this.desks.get(id);
      if (!desk) continue;
      const state = deskState(d);
      if (desk.lit !== state) {
        desk.lit = state;
        changed = true;
        this.instanced.light.setColorAt(desk.light, this.lightColour(state));
        this.instanced.light.instanceColor.needsUpdate = true;
      }
      // Tags that are not shown are brought up to date when they are (their key is stale);
      // a desk waiting for a person keeps its badge in any case.
      if (this.lightsOnly) {
        const asks = `${d.asks}|${d.questions}|${d.askTask?.id}|${d.person}`;
        if (desk.asks !== asks) {
          desk.asks = asks;
          desk.key = "";
          showAsks(desk.ask, desk.button, d, this.company.agent(id).name);
        }
        continue;
      }
      const busy = state === "working" || state === "waiting" || state === "person";
      const run = d.task ? spent.get(id)?.get(d.task.root_id) : null;
      const usage = run ? usageText(run.usage, run.cost, { short: true }) : "";
      // What it writes now, for the task it works on now: a label's words change, not its
      // place, so a stream redraws no frame.
      const live = state === "working" && d.task ? this.company.streams.get(id) : null;
      const saying = live && live.task === d.task.id ? tail(live.text, 90) : "";
      if (desk.saying !== saying) {
        desk.saying = saying;
        desk.said.textContent = saying;
        desk.said.hidden = !saying;
      }
      const key = `${state}|${d.open}|${d.task?.id}|${d.task?.title}|${d.held}|${usage}|${d.asks}|${d.askTask?.id}`;
      if (desk.key === key) continue;
      desk.key = key;
      changed = true;
      const words =
        state === "working"
          ? "Working"
          : state === "waiting" || state === "person"
            ? waitingWords(d)
            : state === "failed"
              ? "Failed"
              : state === "queued"
                ? `${d.queued} queued`
                : "Idle";
      const more = busy && d.held > 1 ? ` · +${d.held - 1} more` : "";
      desk.state.textContent = words + more;
      desk.button.dataset.state = state;
      showAsks(desk.ask, desk.button, d, this.company.agent(id).name);
      const agent = this.company.agent(id);
      desk.button.setAttribute(
        "aria-label",
        `${agent.name}, ${agent.title}: ${words.toLowerCase()}${d.task ? `. Open ${busy ? "" : "last "}task ${d.task.title}` : ""}`,
      );
      desk.usage.textContent = usage;
      desk.usage.hidden = !usage;
      desk.title.hidden = !busy || !d.task;
      desk.title.dataset.state = state;
      desk.taskName.textContent = busy && d.task ? clip(d.task.title, 46) : "";
    }
    if (changed && this.mode === "follow") this.follow();
    // Labels keep their places when their words change ([hidden] hides a title), so only the
    // canvas is drawn again; placing 2,000 labels per event was most of a big floor's frame.
    if (changed) this.frame();
  }

  // --- the camera ---------------------------------------------------------------------------

  resize() {
    const w = this.canvasBox.clientWidth;
    const h = this.canvasBox.clientHeight;
    if (!w || !h) return;
    this.size = { w, h }; // read here, not per frame: reading it then forces a layout
    this.renderer.setSize(w, h);
    this.labels.setSize(w, h);
    this.labelsDirty = true;
    this.camera.aspect = w / h;
    this.camera.updateProjectionMatrix();
    if (this.mode === "fit") this.fitNow();
    else if (this.mode === "follow") this.follow(true);
    this.frame();
  }

  /** Where the camera must be to see every point, looking along its present direction. */
  framing(points, home = false) {
    if (!points.length) return null;
    const box = new THREE.Box3().setFromPoints(points);
    const target = box.getCenter(new THREE.Vector3());
    target.y = 0;
    const dir = home ? VIEW.clone() : this.camera.position.clone().sub(this.controls.target);
    if (dir.lengthSq() < 1e-6) dir.copy(VIEW);
    dir.normalize();
    const probe = this.camera.clone();
    const v = new THREE.Vector3();
    const fits = (dist) => {
      probe.position.copy(target).addScaledVector(dir, dist);
      probe.lookAt(target);
      probe.updateMatrixWorld();
      for (const p of points) {
        v.copy(p).project(probe);
        if (v.z > 1 || Math.abs(v.x) > MARGIN || Math.abs(v.y) > MARGIN) return false;
      }
      return true;
    };
    let lo = 6;
    let hi = 12;
    while (!fits(hi) && hi < 4000) hi *= 1.6;
    for (let i = 0; i < 28; i++) {
      const mid = (lo + hi) / 2;
      if (fits(mid)) hi = mid;
      else lo = mid;
    }
    return { target, position: target.clone().addScaledVector(dir, hi) };
  }

  /** The points that must be seen for a desk: the desk, its light and its name tag. */
  deskPoints(ids) {
    const out = [];
    for (const id of ids) {
      const d = this.desks.get(id);
      if (!d) continue;
      out.push(d.pos.clone().add(new THREE.Vector3(-1.3, 1.6, -0.6)), d.pos.clone().add(new THREE.Vector3(1.3, -1.2, 1.9)));
    }
    return out;
  }

  moveTo(frame, animate) {
    if (!frame) return;
    if (!animate || reducedMotion.matches) {
      this.controls.target.copy(frame.target);
      this.camera.position.copy(frame.position);
      this.camera.lookAt(frame.target);
      this.controls.update();
      this.frame();
      return;
    }
    this.tween = {
      t0: performance.now(),
      fromT: this.controls.target.clone(),
      fromP: this.camera.position.clone(),
      ...frame,
    };
    this.frame();
  }

  /** Everyone in view, now (no animation: the page's first view is settled at once). */
  /** Every desk and every room's walls. */
  everyone() {
    return [...this.deskPoints(this.desks.keys()), ...(this.corners ?? [])];
  }

  /** "Fit all" is also the way home: the company seen whole from the usual angle. */
  fitNow() {
    this.moveTo(this.framing(this.everyone(), true), false);
  }

  fit() {
    this.moveTo(this.framing(this.everyone(), true), true);
  }

  /** The desks where work is happening, and their managers; everyone when nothing is. */
  follow(force = false) {
    const active = [];
    for (const [id, d] of this.company.desks()) {
      if (d.state === "working" || d.state === "waiting") active.push(id);
    }
    const key = active.sort().join(",");
    if (key === this.focusKey && !force) return;
    this.focusKey = key;
    this.moveTo(this.framing(active.length ? this.deskPoints(active) : this.everyone()), true);
  }

  onKey(e) {
    if (e.target !== this.canvasBox) return;
    const zoom = { "+": 0.8, "=": 0.8, "-": 1.25, _: 1.25 }[e.key];
    if (zoom) {
      e.preventDefault();
      this.setMode("free");
      const t = this.controls.target;
      this.camera.position.sub(t).multiplyScalar(zoom).add(t);
      this.controls.update();
    } else if (e.key === "f") {
      e.preventDefault();
      this.setMode("fit");
      this.fit();
    } else if (e.key.startsWith("Arrow")) {
      this.setMode("free");
    }
  }

  // --- drawing --------------------------------------------------------------------------------

  frame() {
    if (this.frameQueued) return;
    this.frameQueued = true;
    requestAnimationFrame((now) => {
      this.frameQueued = false;
      this.draw(now);
    });
  }

  draw(now) {
    const start = performance.now();
    try {
      this.drawFrame(now);
    } finally {
      const ms = performance.now() - start;
      this.cost.frames++;
      this.cost.ms += ms;
      this.cost.max = Math.max(this.cost.max, ms);
    }
  }

  drawFrame(now) {
    let moving = false;
    if (this.tween) {
      const k = Math.min(1, (now - this.tween.t0) / 650);
      const e = k < 0.5 ? 2 * k * k : 1 - (-2 * k + 2) ** 2 / 2;
      this.controls.target.lerpVectors(this.tween.fromT, this.tween.target, e);
      this.camera.position.lerpVectors(this.tween.fromP, this.tween.position, e);
      this.camera.lookAt(this.controls.target);
      if (k >= 1) this.tween = null;
      moving = true;
    }
    moving = this.stepFlights(now) || moving;
    moving = this.stepPulses(now) || moving;
    this.renderer.render(this.scene, this.camera);
    this.camera.updateMatrixWorld();
    if (this.labelsDirty || !this.lastView.equals(this.camera.matrixWorld)) {
      this.lastView.copy(this.camera.matrixWorld);
      this.labelsDirty = false;
      this.labels.render(this.scene, this.camera);
      const ppu = this.pixelsPerUnit();
      const zoom = ppu < 9 ? "far" : ppu < 16 ? "mid" : "near";
      this.root.dataset.zoom = zoom;
      const lightsOnly = zoom === "far" && this.desks.size > LOD_DESKS;
      if (lightsOnly !== this.lightsOnly) {
        this.lightsOnly = lightsOnly;
        this.root.dataset.lod = lightsOnly ? "lights" : "tags";
        if (!lightsOnly) this.render(); // the tags come back as they are now
      }
    }
    if (!moving) return;
    // A CPU-drawn canvas gets about 20 frames a second while things fly, not 60.
    if (this.software) setTimeout(() => this.frame(), 50);
    else this.frame();
  }

  pixelsPerUnit() {
    const dist = this.camera.position.distanceTo(this.controls.target);
    const h = this.size?.h || 1;
    return h / (2 * dist * Math.tan((this.camera.fov * Math.PI) / 360));
  }

  // --- flights: delegations down, results back, cancels sweeping -----------------------------

  /** Arcs for fresh delegations and results; a cancel pulses down the cancelled subtree. */
  animate(events) {
    const cancelled = [];
    for (const e of events) {
      if (e.kind === KIND.DELEGATED) {
        this.counts.delegations++;
        this.fly(e.agent, e.data?.to, "delegation", e.data?.title);
      } else if (e.kind === KIND.COMPLETED || e.kind === KIND.FAILED) {
        const task = this.company.tasks.get(e.task_id);
        if (!task?.parent_id) continue;
        this.counts.results++;
        const boss = this.company.tasks.get(task.parent_id)?.assignee ?? task.created_by;
        this.fly(task.assignee, boss, e.kind === KIND.COMPLETED ? "done" : "failed", task.title);
      } else if (e.kind === KIND.CANCELLED) {
        if (endsMany(e)) cancelled.push(...this.endedBy(e));
        else cancelled.push(e.task_id);
      }
    }
    if (cancelled.length) this.sweep(cancelled);
    this.root.dataset.delegations = String(this.counts.delegations);
    this.root.dataset.results = String(this.counts.results);
    this.root.dataset.cancels = String(this.counts.cancels);
  }

  fly(fromId, toId, kind, title) {
    const from = this.desks.get(fromId);
    const to = this.desks.get(toId);
    if (!from || !to || reducedMotion.matches || this.flights.length >= MAX_FLIGHTS) return;
    const a = from.pos.clone().setY(2.1);
    const b = to.pos.clone().setY(2.1);
    const lift = 2.5 + a.distanceTo(b) * 0.35;
    const mid = a.clone().add(b).multiplyScalar(0.5).setY(Math.max(a.y, b.y) + lift);
    const curve = new THREE.QuadraticBezierCurve3(a, mid, b);
    const colour = this.arcColours[kind];
    const line = new THREE.Line(
      new THREE.BufferGeometry().setFromPoints(curve.getPoints(40)),
      this.borrow("line", () => new THREE.LineBasicMaterial({ transparent: true }), colour, 0.9),
    );
    line.geometry.setDrawRange(0, 0);
    const packet = new THREE.Mesh(
      this.geo.packet,
      this.borrow("packet", () => new THREE.MeshBasicMaterial({ transparent: true }), colour, 1),
    );
    const icon = kind === "delegation" ? "✉" : kind === "done" ? "✓" : "✕";
    const tag = el("div", { class: `d3-flight f-${kind}`, hidden: true }, el("b", {}, icon), title ? ` ${clip(title, 30)}` : "");
    this.tagLayer.append(tag);
    this.scene.add(line, packet);
    // Arcs leaving one desk together go one after another, not as a single blot.
    const now = performance.now();
    const last = this.flights.filter((f) => f.from === fromId).reduce((m, f) => Math.max(m, f.t0), 0);
    this.flights.push({ line, packet, tag, curve, from: fromId, to: toId, t0: Math.max(now, last + 180) });
    this.frame();
  }

  stepFlights(now) {
    const keep = [];
    for (const f of this.flights) {
      const t = (now - f.t0) / FLIGHT_MS;
      if (t < 0) {
        f.packet.visible = false;
        keep.push(f);
        continue;
      }
      f.packet.visible = true;
      const k = Math.min(1, t);
      const eased = k < 0.5 ? 2 * k * k : 1 - (-2 * k + 2) ** 2 / 2;
      f.packet.position.copy(f.curve.getPoint(eased));
      f.tag.hidden = t >= 1;
      if (t < 1) {
        const p = f.packet.position.clone().project(this.camera);
        const x = ((p.x + 1) / 2) * (this.size?.w ?? 0);
        const y = ((1 - p.y) / 2) * (this.size?.h ?? 0);
        f.tag.style.transform = `translate(-50%, -130%) translate(${x.toFixed(1)}px, ${y.toFixed(1)}px)`;
      }
      f.line.geometry.setDrawRange(0, Math.ceil(eased * 41));
      if (t > 1) {
        const fade = 1 - (now - f.t0 - FLIGHT_MS) / FADE_MS;
        f.line.material.opacity = 0.9 * Math.max(0, fade);
        f.packet.material.opacity = Math.max(0, fade);
        if (fade <= 0) {
          this.pulse(f.to, f.line.material.color, 0);
          this.drop(f);
          continue;
        }
      }
      keep.push(f);
    }
    this.flights = keep;
    return keep.length > 0;
  }

  /** The tasks a subtree's cancel ended, as the model holds them now it is applied: those
   * under its top that it stamped cancelled at its time. */
  endedBy(e) {
    const out = [];
    const stack = [e.task_id];
    while (stack.length && out.length < 100000) {
      const id = stack.pop();
      const task = this.company.tasks.get(id);
      if (task?.status === "cancelled" && task.finished_at === e.ts) out.push(id);
      for (const child of this.company.children.get(id) ?? []) stack.push(child);
    }
    return out;
  }

  /** Cancelled tasks' desks ring one after another, top of the subtree first. */
  sweep(taskIds) {
    const inBatch = new Set(taskIds);
    const depth = (id) => {
      let n = 0;
      for (let t = this.company.tasks.get(id); t?.parent_id && inBatch.has(t.parent_id) && n < 64; t = this.company.tasks.get(t.parent_id)) n++;
      return n;
    };
    for (const id of taskIds) {
      const task = this.company.tasks.get(id);
      if (!task) continue;
      this.counts.cancels++;
      this.pulse(task.assignee, this.arcColours.cancelled, depth(id) * 260);
    }
  }

  pulse(agentId, colour, delay) {
    const desk = this.desks.get(agentId);
    if (!desk || reducedMotion.matches) return;
    const ring = new THREE.Mesh(
      this.geo.ring,
      this.borrow(
        "ring",
        () => new THREE.MeshBasicMaterial({ transparent: true, side: THREE.DoubleSide, depthWrite: false }),
        colour,
        0.85,
      ),
    );
    ring.rotation.x = -Math.PI / 2;
    ring.position.copy(desk.pos).setY(0.06);
    ring.visible = false;
    this.scene.add(ring);
    this.pulses.push({ ring, t0: performance.now() + delay });
    this.frame();
  }

  stepPulses(now) {
    const keep = [];
    for (const p of this.pulses) {
      const t = (now - p.t0) / 900;
      p.ring.visible = t >= 0;
      if (t >= 1) {
        this.scene.remove(p.ring);
        this.pool.ring.push(p.ring.material);
        continue;
      }
      if (t >= 0) {
        p.ring.scale.setScalar(1 + t * 1.8);
        p.ring.material.opacity = 0.85 * (1 - t);
      }
      keep.push(p);
    }
    this.pulses = keep;
    return keep.length > 0;
  }

  drop(f) {
    f.tag.remove();
    this.scene.remove(f.line, f.packet);
    f.line.geometry.dispose();
    this.pool.line.push(f.line.material);
    this.pool.packet.push(f.packet.material);
  }

  /** A material of this kind from the pool (or a new one), in this colour and opacity. */
  borrow(kind, make, colour, opacity) {
    const material = this.pool[kind].pop() ?? make();
    material.color.copy(colour);
    material.opacity = opacity;
    return material;
  }

  clearFlights() {
    for (const f of this.flights) this.drop(f);
    this.flights = [];
    for (const p of this.pulses) {
      this.scene.remove(p.ring);
      this.pool.ring.push(p.ring.material);
    }
    this.pulses = [];
  }

  dispose(object) {
    object.traverse((o) => {
      if (o.isCSS2DObject) o.element.remove();
      o.material?.dispose?.();
      if (o.isInstancedMesh) o.dispose();
    });
    this.world.remove(object);
  }

  // --- for tests and people debugging the page ----------------------------------------------

  /** Every desk's projected centre in page coordinates, and whether it is on screen. */
  summary() {
    const r = this.renderer.domElement.getBoundingClientRect();
    const v = new THREE.Vector3();
    this.camera.updateMatrixWorld();
    const desks = {};
    for (const [id, d] of this.desks) {
      v.copy(d.pos).project(this.camera);
      const x = r.left + ((v.x + 1) / 2) * r.width;
      const y = r.top + ((1 - v.y) / 2) * r.height;
      const inCanvas = v.z < 1 && x >= r.left && x <= r.right && y >= r.top && y <= r.bottom;
      const inWindow = x >= 0 && y >= 0 && x <= window.innerWidth && y <= window.innerHeight;
      desks[id] = { x, y, visible: inCanvas && inWindow, state: d.button.dataset.state };
    }
    return {
      canvas: { left: r.left, top: r.top, width: r.width, height: r.height },
      camera: this.mode,
      settled: !this.tween,
      picked: this.picked ?? null,
      flights: this.flights.length,
      counts: { ...this.counts },
      cost: { ...this.cost },
      desks,
    };
  }
}
