// The page's chat: the `ai` package's AbstractChat (the class behind useChat) with a small
// ChatState that re-renders on every change, and DefaultChatTransport posting to /api/chat.
// Rendered elements carry data attributes (role, tool name, state) for the browser test.

import { AbstractChat, DefaultChatTransport, getToolName, isToolUIPart } from 'ai';

class RenderingState {
  #status = 'ready';
  #error = undefined;
  #messages = [];

  constructor(onChange) {
    this.onChange = onChange;
  }
  get status() { return this.#status; }
  set status(s) { this.#status = s; this.onChange(); }
  get error() { return this.#error; }
  set error(e) { this.#error = e; this.onChange(); }
  get messages() { return this.#messages; }
  set messages(m) { this.#messages = m; this.onChange(); }
  pushMessage(m) { this.messages = [...this.#messages, m]; }
  popMessage() { this.messages = this.#messages.slice(0, -1); }
  replaceMessage(i, m) { this.messages = this.#messages.map((x, j) => (j === i ? m : x)); }
  snapshot(x) { return structuredClone(x); }
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new RenderingState(() => render(this)) });
  }
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

function renderPart(part) {
  if (part.type === 'text') return el('p', { class: 'text' }, part.text);
  if (part.type === 'reasoning') return el('p', { class: 'text reasoning' }, `(thinking) ${part.text}`);
  if (isToolUIPart(part)) {
    const name = getToolName(part);
    const box = el('div', { class: 'tool', 'data-tool-name': name, 'data-state': part.state });
    box.append(el('div', { class: 'call' }, `${name}(${JSON.stringify(part.input ?? {})})`));
    if (part.state === 'output-available') box.append(el('div', { class: 'output' }, `→ ${part.output}`));
    if (part.state === 'output-error') box.append(el('div', { class: 'output' }, `✗ ${part.errorText}`));
    box.append(el('div', { class: 'state' }, part.state));
    return box;
  }
  return null;
}

let scheduled = false;
function render(chat) {
  if (scheduled) return;
  scheduled = true;
  queueMicrotask(() => {
    scheduled = false;
    const list = document.getElementById('messages');
    list.replaceChildren(
      ...chat.messages.map(m => {
        const box = el('div', { class: 'message', 'data-role': m.role, 'data-id': m.id });
        for (const part of m.parts) {
          const node = renderPart(part);
          if (node) box.append(node);
        }
        return box;
      }),
    );
    document.getElementById('error').textContent = chat.error ? chat.error.message : '';
    document.body.dataset.status = chat.status;
    // Every status the page went through, for the test: `streaming` shows the answer was
    // rendered while it arrived.
    const seen = document.body.dataset.statuses?.split(' ') ?? [];
    if (seen.at(-1) !== chat.status) document.body.dataset.statuses = [...seen, chat.status].join(' ');
    document.getElementById('send').disabled = chat.status === 'submitted' || chat.status === 'streaming';
  });
}

const chat = new Chat({ transport: new DefaultChatTransport({ api: '/api/chat' }) });
document.getElementById('form').addEventListener('submit', event => {
  event.preventDefault();
  const input = document.getElementById('input');
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  chat.sendMessage({ text });
});
render(chat);
