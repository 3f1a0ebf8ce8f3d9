// Small DOM helpers the console's modules share. Text is always set as text (a Node or
// a string child), never parsed as HTML: document content is untrusted.

export const $ = (id) => document.getElementById(id);

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  node.append(...children.map((c) => (c instanceof Node ? c : String(c ?? ""))));
  return node;
}
