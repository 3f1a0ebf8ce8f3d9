// The chunk view: an ocr document's retrieval chunks (GET /v1/documents/{id}/chunks), each
// with its heading path, pages and size. Chunk text is untrusted document content: it is
// set as text, never as HTML.

import { el } from "./dom.js";

// Fills `list` (an <ol>) with the chunks of `answer` (a Chunks body); returns how many.
export function showChunks(list, answer) {
  list.replaceChildren(
    ...answer.chunks.map((chunk) => {
      const pages = chunk.page_nos.length === 1 ? "page" : "pages";
      const meta = `${pages} ${chunk.page_nos.join(", ")} · ${chunk.tokens} of ${answer.max_tokens} words`;
      return el(
        "li",
        { "data-testid": "chunk", "data-index": chunk.index },
        el("p", { class: "chunk-headings", "data-testid": "chunk-headings" }, chunk.headings.join(" › ")),
        el("p", { class: "chunk-meta", "data-testid": "chunk-meta" }, meta),
        el("pre", { class: "chunk-text", "data-testid": "chunk-text" }, chunk.text),
      );
    }),
  );
  return answer.chunks.length;
}
