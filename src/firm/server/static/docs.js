// The API docs page (/docs): fetch the OpenAPI schema, with the access token when the office
// asks for one, and hand it to Swagger UI already authorised. The token is the office page's
// (one per browser), or #token=… in the address, or typed into the form this shows.

const TOKEN_KEY = "firm.office.token"; // shared with api.js, so the office page's token works here

const $ = (id) => document.getElementById(id);

function storedToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

function keep(token) {
  try {
    localStorage.setItem(TOKEN_KEY, token);
  } catch {
    /* private mode: the token lives as long as the page */
  }
}

function tokenFromAddress() {
  const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
  if (!match) return "";
  history.replaceState(null, "", location.pathname + location.search);
  return decodeURIComponent(match[1]);
}

function ask(reason) {
  $("token-reason").textContent = reason;
  $("token-form").hidden = false;
  $("token-input").focus();
}

async function open(token) {
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch("/openapi.json", { headers });
  } catch {
    ask("The office cannot be reached.");
    return;
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    const why = typeof body.detail === "string" ? body.detail : `the office answered ${response.status}`;
    ask(`The API needs the access token that firm serve printed (${why}).`);
    return;
  }
  const spec = await response.json();
  if (token) keep(token);
  $("token-form").hidden = true;
  document.title = `${spec.info.title} · API`;
  const ui = window.SwaggerUIBundle({
    spec,
    dom_id: "#swagger-ui",
    deepLinking: true,
    layout: "BaseLayout",
    presets: [window.SwaggerUIBundle.presets.apis],
  });
  if (token) ui.preauthorizeApiKey("HTTPBearer", token);
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  open($("token-input").value.trim());
});

// Pasting an address with #token=… into this tab does not reload the page: take it then too.
window.addEventListener("hashchange", () => {
  const token = tokenFromAddress();
  if (token) open(token);
});

open(tokenFromAddress() || storedToken());
