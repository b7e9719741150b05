// The page: login, the chats listed from the store, and a chat — the `ai` package's
// AbstractChat (the class behind useChat) with a ChatState that re-renders on every change,
// DefaultChatTransport on the gateway's /api/chat. A loaded chat whose run goes on or waits
// for approvals resumes its stream (the AI SDK's resume GET). Approval cards answer with
// addToolApprovalResponse; the steering box posts to the run while it streams. Rendered
// elements carry data attributes (role, tool name, state) for the browser tests.

import {
  AbstractChat,
  DefaultChatTransport,
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from 'ai';

const $ = id => document.getElementById(id);
const json = { 'content-type': 'application/json' };

class RenderingState {
  #status = 'ready';
  #error = undefined;
  #messages;

  constructor(onChange, messages = []) {
    this.onChange = onChange;
    this.#messages = messages;
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
  constructor(init, messages) {
    super({ ...init, state: new RenderingState(() => render(this), messages) });
  }
}

let chat = null;

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text != null) node.textContent = text;
  return node;
}

function approvalCard(part) {
  const card = el('div', { class: 'approval', 'data-approval-id': part.approval.id });
  card.append(el('div', {}, `Allow ${getToolName(part)}? ${part.approval.requestReason ?? ''}`));
  const answer = approved => () =>
    chat.addToolApprovalResponse({
      id: part.approval.id,
      approved,
      reason: approved ? undefined : 'denied in the page',
    });
  const approve = el('button', { class: 'approve', type: 'button' }, 'Approve');
  approve.onclick = answer(true);
  const deny = el('button', { class: 'deny', type: 'button' }, 'Deny');
  deny.onclick = answer(false);
  card.append(approve, deny);
  return card;
}

function usageLine(data) {
  const cached = data.cacheReadTokens ?? 0;
  return `step ${data.step}: ${data.inputTokens ?? '?'} in, ${cached} cached, ${data.outputTokens ?? '?'} out · ${data.cache}`;
}

function renderPart(part) {
  if (part.type === 'text') return el('p', { class: 'text' }, part.text);
  if (part.type === 'reasoning') return el('p', { class: 'text reasoning' }, `(thinking) ${part.text}`);
  if (part.type === 'steering-message') {
    return el('p', { class: 'steering' }, `↪ ${part.parts.map(p => p.text).join(' ')}`);
  }
  if (part.type === 'data-halo-history-rewritten') {
    return el('p', { class: 'note' }, `history rewritten: ${part.data.description}`);
  }
  if (part.type === 'data-halo-step-usage') return el('p', { class: 'usage' }, usageLine(part.data));
  if (isToolUIPart(part)) {
    const name = getToolName(part);
    const box = el('div', { class: 'tool', 'data-tool-name': name, 'data-state': part.state });
    box.append(el('div', { class: 'call' }, `${name}(${JSON.stringify(part.input ?? {})})`));
    if (part.state === 'output-available') box.append(el('div', { class: 'output' }, `→ ${part.output}`));
    if (part.state === 'output-error') box.append(el('div', { class: 'output' }, `✗ ${part.errorText}`));
    if (part.state === 'output-denied') box.append(el('div', { class: 'output' }, '✗ denied'));
    if (part.state === 'approval-requested') box.append(approvalCard(part));
    box.append(el('div', { class: 'state' }, part.state));
    return box;
  }
  return null;
}

let scheduled = false;
function render(current) {
  if (scheduled) return;
  scheduled = true;
  queueMicrotask(() => {
    scheduled = false;
    if (current !== chat) return;
    $('messages').replaceChildren(
      ...(chat?.messages ?? []).map(m => {
        const box = el('div', { class: 'message', 'data-role': m.role, 'data-id': m.id });
        for (const part of m.parts) {
          const node = renderPart(part);
          if (node) box.append(node);
        }
        return box;
      }),
    );
    const status = chat?.status ?? 'ready';
    $('error').textContent = chat?.error ? chat.error.message : '';
    document.body.dataset.status = status;
    // Every status the page went through, for the tests.
    const seen = document.body.dataset.statuses?.split(' ') ?? [];
    if (seen.at(-1) !== status) document.body.dataset.statuses = [...seen, status].join(' ');
    const busy = status === 'submitted' || status === 'streaming';
    $('send').disabled = busy;
    $('steer-form').hidden = !busy;
  });
}

async function listChats() {
  const r = await fetch('/api/chats');
  if (!r.ok) return;
  const { chats } = await r.json();
  $('chats').replaceChildren(
    ...chats.map(c => {
      const link = el('a', { href: `#chat=${c.id}`, 'data-chat': c.id }, `${c.id.slice(0, 12)} · ${c.steps} steps`);
      if (chat && c.id === chat.id) link.setAttribute('aria-current', 'true');
      return el('li', {}, null).appendChild(link).parentNode;
    }),
  );
}

const chatIdFromHash = () => location.hash.match(/^#chat=([A-Za-z0-9_-]+)$/)?.[1];

function newChat(id) {
  return new Chat(
    {
      id,
      transport: new DefaultChatTransport({ api: '/api/chat' }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onFinish: () => listChats(),
    },
    [],
  );
}

async function openChat(id, { fresh = false } = {}) {
  chat?.stop();
  $('notfound').hidden = true;
  delete document.body.dataset.statuses;
  if (fresh) {
    chat = newChat(id);
    history.replaceState(null, '', `#chat=${id}`);
    render(chat);
    return;
  }
  const r = await fetch(`/api/chats/${encodeURIComponent(id)}`);
  if (r.status === 404) {
    // Not this user's chat, or not started yet.
    chat = newChat(id);
    $('notfound').hidden = false;
    document.body.dataset.chat = 'missing';
    render(chat);
    return;
  }
  const { messages, resume } = await r.json();
  chat = new Chat(
    {
      id,
      transport: new DefaultChatTransport({ api: '/api/chat' }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onFinish: () => listChats(),
    },
    messages,
  );
  document.body.dataset.chat = 'loaded';
  render(chat);
  await listChats();
  if (resume) await chat.resumeStream();
}

async function showApp(user) {
  $('login').hidden = true;
  $('app').hidden = false;
  $('me').textContent = user;
  await listChats();
  const id = chatIdFromHash();
  if (id) await openChat(id);
  else await openChat(crypto.randomUUID(), { fresh: true });
}

function showLogin() {
  $('login').hidden = false;
  $('app').hidden = true;
  document.body.dataset.status = 'login';
}

$('login-form').addEventListener('submit', async event => {
  event.preventDefault();
  const r = await fetch('/api/login', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ user: $('user').value, password: $('password').value }),
  });
  if (!r.ok) {
    $('login-error').textContent = (await r.json()).error;
    document.body.dataset.status = 'login-failed';
    return;
  }
  $('login-error').textContent = '';
  $('password').value = '';
  await showApp((await r.json()).user);
});

$('logout').addEventListener('click', async () => {
  await fetch('/api/logout', { method: 'POST' });
  chat?.stop();
  chat = null;
  showLogin();
});

$('new-chat').addEventListener('click', () => openChat(crypto.randomUUID(), { fresh: true }));

window.addEventListener('hashchange', () => {
  const id = chatIdFromHash();
  if (id && id !== chat?.id) openChat(id);
});

$('form').addEventListener('submit', event => {
  event.preventDefault();
  const input = $('input');
  const text = input.value.trim();
  if (!text || !chat) return;
  input.value = '';
  $('notfound').hidden = true;
  chat.sendMessage({ text });
});

$('steer-form').addEventListener('submit', async event => {
  event.preventDefault();
  const input = $('steer-input');
  const text = input.value.trim();
  if (!text || !chat) return;
  input.value = '';
  const r = await fetch(`/api/chats/${encodeURIComponent(chat.id)}/steer`, {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ text }),
  });
  document.body.dataset.steered = r.ok ? 'accepted' : 'refused';
});

const me = await fetch('/api/me');
if (me.ok) await showApp((await me.json()).user);
else showLogin();
