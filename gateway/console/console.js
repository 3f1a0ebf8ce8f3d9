// The pagestream console: upload a document and follow it, browse the tenant's documents,
// and (admin keys) watch lag and replay dead letters. Talks to the gateway's /v1 API with
// the key the user typed (kept in sessionStorage only). Document content is shown in the
// page and nowhere else: nothing here logs.
import { marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.mjs";
import { showChunks } from "./chunks.js";
import { $, el } from "./dom.js";

const KEY_STORAGE = "pagestream.apiKey";
const OPERATOR_REFRESH_MS = 10_000;

let following = null; // AbortController of the document being followed
let operatorTimer = null;
let operatorLoads = 0; // only the latest load draws the operator view
let operatorRefresh = null; // the refresh in flight, if any
const selectedLetters = new Set();

// --- API ---------------------------------------------------------------------------------

class ApiError extends Error {}

async function api(path, options = {}) {
  const key = sessionStorage.getItem(KEY_STORAGE);
  if (!key) throw new ApiError("Enter an API key first.");
  const headers = new Headers(options.headers || {});
  headers.set("Authorization", `Bearer ${key}`);
  const response = await fetch(path, { ...options, headers });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const problem = await response.json();
      if (problem && problem.detail) detail = problem.detail;
    } catch {
      // not a JSON problem: keep the status text
    }
    throw new ApiError(`${response.status}: ${detail}`);
  }
  return response;
}

const apiJson = async (path, options) => (await api(path, options)).json();

function showMessage(text, kind = "error") {
  const box = $("message");
  box.textContent = text;
  box.className = kind;
  box.setAttribute("role", kind === "error" ? "alert" : "status");
  box.hidden = false;
}

function clearMessage() {
  $("message").hidden = true;
  $("message").textContent = "";
}

// Runs an async action, turning its failure into the visible message.
async function guarded(action) {
  try {
    await action();
  } catch (error) {
    if (error.name === "AbortError") return;
    showMessage(error instanceof ApiError ? error.message : `Request failed: ${error.message}`);
  }
}

const when = (epochS) => new Date(epochS * 1000).toLocaleString();
const docPath = (docId) => `/v1/documents/${encodeURIComponent(docId)}`;

// --- the key -----------------------------------------------------------------------------

async function useKey() {
  stopOperator();
  const key = sessionStorage.getItem(KEY_STORAGE);
  $("app").hidden = !key;
  $("operator-view").hidden = true;
  if (!key) {
    $("whoami").textContent = "No key yet.";
    return;
  }
  let me;
  try {
    me = await apiJson("/v1/me");
  } catch (error) {
    $("app").hidden = true;
    $("whoami").textContent = "The key was not accepted.";
    throw error;
  }
  $("whoami").textContent = `Tenant ${me.tenant} (${me.role} key ${me.key_id})`;
  await loadDocuments();
  if (me.role === "admin" || me.role === "operator") {
    $("operator-view").hidden = false;
    await loadOperator();
    operatorTimer = setInterval(() => guarded(refreshOperator), OPERATOR_REFRESH_MS);
  }
}

function stopOperator() {
  if (operatorTimer !== null) clearInterval(operatorTimer);
  operatorTimer = null;
}

// --- upload and follow -------------------------------------------------------------------

async function upload() {
  const file = $("upload-file").files[0];
  if (!file) throw new ApiError("Choose a file to upload.");
  const form = new FormData();
  form.append("operation", $("upload-operation").value);
  form.append("file", file, file.name);
  const accepted = await apiJson("/v1/documents", { method: "POST", body: form });
  showMessage(`Submitted ${accepted.doc_id}.`, "info");
  await loadDocuments();
  await follow(accepted.doc_id);
}

// Follows a document over its Server-Sent Events. EventSource cannot send the
// Authorization header, so the stream is read from fetch() and parsed here.
async function follow(docId) {
  if (following) following.abort();
  const controller = new AbortController();
  following = controller;
  resetDocument(docId);
  for (let attempt = 0; attempt < 5 && !controller.signal.aborted; attempt++) {
    const response = await api(`${docPath(docId)}/events`, {
      signal: controller.signal,
      headers: { Accept: "text/event-stream" },
    });
    for await (const [event, data] of serverEvents(response.body)) {
      if (controller.signal.aborted) return;
      const status = JSON.parse(data);
      showProgress(status);
      if (event === "result") {
        await showResult(status.result, controller.signal);
        await loadDocuments();
        return;
      }
    }
    // The stream closed before the result (a restarted replica): reconnect.
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

async function* serverEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer = (buffer + value).replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let event = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line === "" || line.startsWith(":")) continue; // comments: keep-alives
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") event = value;
          else if (field === "data") data.push(value);
        }
        if (data.length) yield [event, data.join("\n")];
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function resetDocument(docId) {
  $("doc").hidden = false;
  $("doc-id").textContent = docId;
  for (const id of ["doc-state", "doc-pages", "doc-status"]) $(id).textContent = "";
  $("doc-stages").replaceChildren();
  $("doc-summary").hidden = true;
  $("doc-summary").tBodies[0].replaceChildren();
  $("doc-markdown-section").hidden = true;
  $("doc-markdown").replaceChildren();
  $("doc-chunks-section").hidden = true;
  $("doc-chunks").replaceChildren();
  $("doc-images-section").hidden = true;
  $("doc-images").replaceChildren();
}

function showProgress(status) {
  $("doc-state").textContent = status.state;
  $("doc-pages").textContent = status.pages_total
    ? `${status.pages_done} / ${status.pages_total}`
    : "not split yet";
  $("doc-stages").replaceChildren(
    ...status.stages.map((s) =>
      el("li", {}, `${s.stage}: ${s.pages} page(s), waiting ${s.waiting_s.toFixed(1)} s`),
    ),
  );
}

async function showResult(result, signal) {
  $("doc-status").textContent = result.status;
  const rows = [
    ["Operation", result.operation],
    ["Pages", result.page_count],
    ["Document type", result.document_type],
    ["Confidence", result.confidence == null ? null : result.confidence.toFixed(2)],
    ["Image correction", result.image_correction],
    ...fieldRows(result.fields),
    ...result.errors.map((e) => ["Error", e]),
  ].filter(([, value]) => value !== null && value !== undefined && value !== "");
  $("doc-summary").tBodies[0].replaceChildren(
    ...rows.map(([name, value]) => el("tr", {}, el("th", { scope: "row" }, name), el("td", {}, value))),
  );
  $("doc-summary").hidden = false;

  let markdown = result.markdown;
  if (result.operation === "ocr") {
    markdown = await (await api(`${docPath(result.doc_id)}/markdown`, { signal })).text();
  }
  if (markdown) {
    // Untrusted: parsed by marked, then sanitized by DOMPurify before it reaches the page.
    $("doc-markdown").innerHTML = DOMPurify.sanitize(marked.parse(markdown));
    $("doc-markdown-section").hidden = false;
  }
  if (result.operation === "ocr") {
    const answer = await apiJson(`${docPath(result.doc_id)}/chunks`, { signal });
    $("doc-chunks-section").hidden = showChunks($("doc-chunks"), answer) === 0;
  }
  const imaged = result.pages.filter((p) => p.image && p.image.media_type.startsWith("image/"));
  if (imaged.length) $("doc-images-section").hidden = false;
  for (const page of imaged) await drawPage(result.doc_id, page, signal);
}

// Extracted fields: a type's named fields, or the generic list of labelled values.
function fieldRows(fields) {
  if (!fields) return [];
  return Object.entries(fields).flatMap(([name, value]) =>
    Array.isArray(value)
      ? value.map((kv) => [kv.key ?? name, kv.value ?? JSON.stringify(kv)])
      : [[name, typeof value === "object" && value !== null ? JSON.stringify(value) : value]],
  );
}

// The page image turned by its orientation correction (clockwise), with its OCR line
// boxes (in the corrected page's pixels) drawn over it.
async function drawPage(docId, page, signal) {
  const response = await api(`${docPath(docId)}/pages/${page.page_no}/image`, { signal });
  const url = URL.createObjectURL(await response.blob());
  let image;
  try {
    image = new Image();
    image.src = url;
    await image.decode();
  } finally {
    URL.revokeObjectURL(url);
  }
  const rotation = (page.orientation?.rotation_degrees ?? 0) % 360;
  const sideways = rotation === 90 || rotation === 270;
  const boxes = page.ocr?.boxes ?? [];
  const canvas = el("canvas", {
    "data-testid": "page-canvas",
    "data-page": page.page_no,
    role: "img",
    "aria-label": `Page ${page.page_no}, turned ${rotation}° clockwise, with ${boxes.length} OCR lines`,
  });
  canvas.width = sideways ? image.naturalHeight : image.naturalWidth;
  canvas.height = sideways ? image.naturalWidth : image.naturalHeight;
  const ctx = canvas.getContext("2d");
  ctx.translate(canvas.width / 2, canvas.height / 2);
  ctx.rotate((rotation * Math.PI) / 180); // positive is clockwise on a canvas
  ctx.drawImage(image, -image.naturalWidth / 2, -image.naturalHeight / 2);
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.strokeStyle = "rgba(220, 30, 30, 0.85)";
  ctx.lineWidth = Math.max(1, Math.round(canvas.width / 600));
  for (const line of boxes) {
    ctx.beginPath();
    line.box.forEach(([x, y], i) => (i ? ctx.lineTo(x, y) : ctx.moveTo(x, y)));
    ctx.closePath();
    ctx.stroke();
  }
  $("doc-images").append(el("figure", {}, canvas, el("figcaption", {}, `Page ${page.page_no}`)));
}

// --- the tenant's documents --------------------------------------------------------------

async function loadDocuments() {
  const documents = await apiJson("/v1/documents?limit=50");
  $("documents").replaceChildren(
    ...documents.map((d) => {
      const pages = d.pages_total ? `${d.pages_done ?? 0} / ${d.pages_total} pages` : "not split yet";
      const button = el(
        "button",
        { type: "button", "data-doc-id": d.doc_id, "data-testid": "document" },
        `${d.doc_id} — ${d.status ?? d.state} — ${pages} — ${when(d.updated_at)}`,
      );
      button.addEventListener("click", () => guarded(() => follow(d.doc_id)));
      return el("li", {}, button);
    }),
  );
  if (!documents.length) $("documents").append(el("li", {}, "No documents yet."));
}

// --- operator view (admin keys) ----------------------------------------------------------

// The timer's and the button's refresh: at most one at a time.
function refreshOperator() {
  operatorRefresh ??= loadOperator().finally(() => (operatorRefresh = null));
  return operatorRefresh;
}

async function loadOperator() {
  const load = ++operatorLoads;
  const [lag, letters] = await Promise.all([
    apiJson("/v1/admin/lag"),
    apiJson("/v1/admin/dead-letters"),
  ]);
  if (load !== operatorLoads || $("operator-view").hidden) return; // superseded
  $("lag").tBodies[0].replaceChildren(
    ...lag.flatMap((g) => [
      el("tr", { class: "group" }, el("th", { scope: "row" }, g.group), el("td", {}, g.state),
        el("td", {}, g.members), el("td", {}, "all"), el("td", {}, ""), el("td", {}, g.lag_records)),
      ...g.topics.map((t) =>
        el("tr", {}, el("td", {}, ""), el("td", {}, ""), el("td", {}, ""), el("td", {}, t.topic),
          el("td", {}, t.partitions), el("td", {}, t.lag_records))),
    ]),
  );
  const present = new Set(letters.map((d) => d.id));
  for (const id of [...selectedLetters]) if (!present.has(id)) selectedLetters.delete(id);
  $("dead-letters").tBodies[0].replaceChildren(...letters.map(letterRow));
  if (!letters.length) {
    $("dead-letters").tBodies[0].append(el("tr", {}, el("td", { colspan: 8 }, "No dead letters.")));
  }
  $("replay-selected").disabled = selectedLetters.size === 0;
  $("operator-updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
}

function letterRow(d) {
  const box = el("input", {
    type: "checkbox",
    "aria-label": `Select dead letter ${d.id} of document ${d.doc_id ?? "unknown"}`,
  });
  box.checked = selectedLetters.has(d.id);
  box.addEventListener("change", () => {
    if (box.checked) selectedLetters.add(d.id);
    else selectedLetters.delete(d.id);
    $("replay-selected").disabled = selectedLetters.size === 0;
  });
  return el(
    "tr",
    { "data-testid": "dead-letter", "data-id": d.id, "data-doc-id": d.doc_id ?? "" },
    el("td", {}, box), el("td", {}, d.doc_id ?? ""), el("td", {}, d.stage ?? ""),
    el("td", {}, d.topic ?? ""), el("td", {}, d.exception ?? ""), el("td", {}, d.message ?? ""),
    el("td", {}, d.failed_at ? new Date(d.failed_at).toLocaleString() : ""), el("td", {}, d.replays),
  );
}

async function replaySelected() {
  const ids = [...selectedLetters];
  if (!ids.length) return;
  const answer = await apiJson("/v1/admin/dead-letters/replay", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ids }),
  });
  selectedLetters.clear();
  showMessage(
    `Replayed ${answer.replayed}; refused ${answer.refused}; deferred ${answer.deferred}; ` +
      `not pending ${answer.not_pending}.`,
    answer.refused || answer.deferred || answer.not_pending ? "error" : "info",
  );
  await loadOperator();
}

// --- wiring ------------------------------------------------------------------------------

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  clearMessage();
  sessionStorage.setItem(KEY_STORAGE, $("api-key").value.trim());
  $("api-key").value = "";
  guarded(useKey);
});
$("key-forget").addEventListener("click", () => {
  if (following) following.abort();
  sessionStorage.removeItem(KEY_STORAGE);
  clearMessage();
  $("doc").hidden = true;
  guarded(useKey);
});
$("upload-form").addEventListener("submit", (event) => {
  event.preventDefault();
  clearMessage();
  guarded(upload);
});
$("documents-refresh").addEventListener("click", () => guarded(loadDocuments));
$("operator-refresh").addEventListener("click", () => guarded(refreshOperator));
$("replay-selected").addEventListener("click", () => guarded(replaySelected));
document.body.dataset.ready = "true";
guarded(useKey);
