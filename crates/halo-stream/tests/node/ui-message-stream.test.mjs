// Feeds halo-stream's UI Message Stream bytes to the `ai` package's own client code and
// asserts what it assembles. Nothing here parses the protocol itself:
// - `DefaultChatTransport` parses the SSE body with `parseJsonEventStream` and validates every
//   part against `uiMessageChunkSchema` (a part that fails the schema throws);
// - `readUIMessageStream` and `AbstractChat` (the class behind `useChat`) assemble the
//   assistant `UIMessage` from the parts.
//
// The transcripts are `<name>.sse` files in $HALO_TRANSCRIPTS (written fresh by
// `cargo xtask interop`), or else the pinned ones in ../data. Run: `npm ci && node --test`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { AbstractChat, DefaultChatTransport, readUIMessageStream } from 'ai';

const here = path.dirname(fileURLToPath(import.meta.url));
const transcriptDir = process.env.HALO_TRANSCRIPTS ?? path.join(here, '..', 'data');

async function transcript(name) {
  return readFile(path.join(transcriptDir, `${name}.sse`));
}

// The body as a stream cut into 7-byte pieces: frames, JSON strings and UTF-8 characters
// (°, 🌞) arrive split across reads, as they may over a network.
function pieces(bytes, size = 7) {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) {
        controller.close();
        return;
      }
      controller.enqueue(new Uint8Array(bytes.subarray(offset, offset + size)));
      offset += size;
    },
  });
}

// A transport whose fetch answers with `bytes`, and records the request bodies.
function transportServing(bytes, requests = []) {
  return new DefaultChatTransport({
    api: 'http://halo.test/api/chat',
    fetch: async (_url, init) => {
      requests.push(JSON.parse(init.body));
      return new Response(pieces(bytes), {
        status: 200,
        headers: {
          'content-type': 'text/event-stream',
          'x-vercel-ai-ui-message-stream': 'v1',
        },
      });
    },
  });
}

const userMessage = text => ({ id: 'user-1', role: 'user', parts: [{ type: 'text', text }] });

// The validated parts and the last assembled message, as `readUIMessageStream` gives them.
async function assemble(bytes, { terminateOnError = true } = {}) {
  const stream = await transportServing(bytes).sendMessages({
    chatId: 'chat-1',
    messages: [userMessage('hi')],
    abortSignal: undefined,
    trigger: 'submit-message',
    messageId: undefined,
  });
  const parts = [];
  const tap = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        parts.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  const errors = [];
  let message;
  for await (const m of readUIMessageStream({
    stream: tap,
    terminateOnError,
    onError: e => errors.push(e),
  })) {
    message = m;
  }
  // Drop `undefined` fields so the comparison is about what was sent.
  return { parts, errors, message: JSON.parse(JSON.stringify(message ?? null)) };
}

// A minimal ChatState, as the React/Vue/Svelte bindings implement it.
class ArrayState {
  status = 'ready';
  error = undefined;
  messages = [];
  pushMessage = m => (this.messages = [...this.messages, m]);
  popMessage = () => (this.messages = this.messages.slice(0, -1));
  replaceMessage = (i, m) => (this.messages = this.messages.map((x, j) => (j === i ? m : x)));
  snapshot = x => structuredClone(x);
}

class Chat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new ArrayState() });
  }
}

async function chatTurn(bytes, text, { onData } = {}) {
  const requests = [];
  let finished;
  const chat = new Chat({
    transport: transportServing(bytes, requests),
    onFinish: f => (finished = f),
    onError: () => {},
    onData,
  });
  await chat.sendMessage({ text });
  return { chat, requests, finished };
}

test('tool_run: the parts pass the schema in order and assemble into text, reasoning, a tool call with input and output', async () => {
  const { parts, errors, message } = await assemble(await transcript('tool_run'));
  assert.deepEqual(errors, []);
  assert.deepEqual(
    parts.map(p => p.type),
    [
      'start', 'start-step',
      'reasoning-start', 'reasoning-delta', 'reasoning-delta', 'reasoning-end',
      'text-start', 'text-delta', 'text-end',
      'tool-input-start', 'tool-input-delta', 'tool-input-delta',
      'tool-input-available', 'tool-output-available', 'finish-step',
      'start-step', 'text-start', 'text-delta', 'text-delta', 'text-end', 'finish-step',
      'finish',
    ],
  );
  assert.deepEqual(parts.at(-1), { type: 'finish', finishReason: 'stop' });
  assert.deepEqual(message, {
    id: 'msg_1',
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      {
        type: 'reasoning',
        id: 'reasoning-1',
        text: 'The user asks about Paris. I should call get_weather.',
        state: 'done',
      },
      { type: 'text', text: 'Let me check.', state: 'done' },
      {
        type: 'tool-get_weather',
        toolCallId: 'call_1',
        state: 'output-available',
        input: { city: 'Paris' },
        output: 'sunny, 21 °C, "clear skies"',
      },
      { type: 'step-start' },
      { type: 'text', text: 'It is sunny in Paris: 21 °C.\nEnjoy! 🌞', state: 'done' },
    ],
  });
});

test('tool_run through the chat client: status ready, finish reason stop, two messages', async () => {
  const { chat, requests, finished } = await chatTurn(
    await transcript('tool_run'),
    'What is the weather in Paris?',
  );
  assert.equal(chat.status, 'ready');
  assert.equal(chat.error, undefined);
  assert.equal(finished.finishReason, 'stop');
  assert.equal(finished.isError, false);
  assert.deepEqual(
    chat.messages.map(m => m.role),
    ['user', 'assistant'],
  );
  const answer = chat.messages[1];
  assert.equal(answer.id, 'msg_1');
  const tool = answer.parts.find(p => p.type === 'tool-get_weather');
  assert.equal(tool.state, 'output-available');
  assert.deepEqual(tool.input, { city: 'Paris' });
  assert.equal(answer.parts.at(-1).text, 'It is sunny in Paris: 21 °C.\nEnjoy! 🌞');
  // What the client sent: the chat id and the user's message.
  assert.equal(requests.length, 1);
  assert.equal(requests[0].id, chat.id);
  assert.deepEqual(requests[0].messages[0].parts, [
    { type: 'text', text: 'What is the weather in Paris?' },
  ]);
});

test('tool_error: an error tool result becomes an output-error tool part, and the answer follows', async () => {
  const { errors, message } = await assemble(await transcript('tool_error'));
  assert.deepEqual(errors, []);
  const tool = message.parts.find(p => p.type === 'tool-get_weather');
  assert.deepEqual(tool, {
    type: 'tool-get_weather',
    toolCallId: 'call_1',
    state: 'output-error',
    input: { city: 'Atlantis' },
    errorText: 'unknown city `Atlantis`; try a real city such as Paris',
  });
  assert.deepEqual(message.parts.at(-1), {
    type: 'text',
    text: 'I could not find Atlantis.',
    state: 'done',
  });
});

test('bad_arguments: arguments that are not JSON give an output-error part with the raw input', async () => {
  const { parts, errors, message } = await assemble(await transcript('bad_arguments'));
  assert.deepEqual(errors, []);
  assert.ok(parts.some(p => p.type === 'tool-input-error'));
  const tool = message.parts.find(p => p.type === 'tool-get_weather');
  assert.equal(tool.state, 'output-error');
  assert.equal(tool.input, '{"city": Par');
  assert.match(tool.errorText, /not valid JSON/);
});

test('model_error: the chat client ends in the error state with the sent text, keeping the partial answer', async () => {
  const { chat, finished } = await chatTurn(await transcript('model_error'), 'What is the answer?');
  assert.equal(chat.status, 'error');
  assert.equal(chat.error.message, 'provider error (HTTP 503): overloaded');
  assert.equal(finished.isError, true);
  const answer = chat.messages[1];
  assert.deepEqual(
    answer.parts.filter(p => p.type === 'text').map(p => [p.text, p.state]),
    [['The answer is', 'done']],
  );
});

test('model_error: the reader reports the error part and still reaches the finish part', async () => {
  const { parts, errors } = await assemble(await transcript('model_error'), {
    terminateOnError: false,
  });
  assert.deepEqual(
    errors.map(e => e.message),
    ['provider error (HTTP 503): overloaded'],
  );
  assert.deepEqual(parts.at(-1), { type: 'finish', finishReason: 'error' });
});

test('cache_bust: the transient data part passes the schema and stays out of the assembled message', async () => {
  const { parts, errors, message } = await assemble(await transcript('cache_bust'));
  assert.deepEqual(errors, []);
  const busts = parts.filter(p => p.type === 'data-halo-cache-bust');
  assert.equal(busts.length, 1);
  assert.equal(busts[0].transient, true);
  assert.deepEqual(
    parts.slice(parts.indexOf(busts[0]) - 1, parts.indexOf(busts[0]) + 2).map(p => p.type),
    ['text-end', 'data-halo-cache-bust', 'finish-step'],
  );
  assert.deepEqual(
    message.parts.map(p => p.type),
    ['step-start', 'tool-get_weather', 'step-start', 'text'],
  );
});

test('cache_bust through the chat client: onData gets the bust with the ledger numbers, the message keeps no data part', async () => {
  const received = [];
  const { chat, finished } = await chatTurn(
    await transcript('cache_bust'),
    'What is the weather in Paris?',
    { onData: part => received.push(part) },
  );
  assert.equal(chat.status, 'ready');
  assert.equal(finished.finishReason, 'stop');
  assert.equal(received.length, 1);
  const { type, transient, data } = received[0];
  assert.equal(type, 'data-halo-cache-bust');
  assert.equal(transient, true);
  assert.match(data.cause, /^the provider read 0 of about 5000 cacheable tokens/);
  assert.deepEqual(
    { ...data, cause: undefined },
    {
      call: 2,
      expectedCachedTokens: 5000,
      observedCachedTokens: 0,
      inputTokens: 5100,
      cause: undefined,
    },
  );
  const answer = chat.messages[1];
  assert.ok(answer.parts.every(p => !p.type.startsWith('data-')), JSON.stringify(answer.parts));
  assert.equal(answer.parts.at(-1).text, 'It is sunny in Paris.');
});

test('cache_bust without the transient flag: the same part would be stored in the message', async () => {
  // Why halo sends it transient: a stored data part is persisted with the message and sent
  // back to the server with the next request.
  const good = (await transcript('cache_bust')).toString('utf8');
  const bad = good.replace(',"transient":true}', '}');
  assert.notEqual(bad, good);
  const { errors, message } = await assemble(Buffer.from(bad));
  assert.deepEqual(errors, []);
  assert.deepEqual(
    message.parts.map(p => p.type),
    ['step-start', 'tool-get_weather', 'step-start', 'text', 'data-halo-cache-bust'],
  );
});

// Every message snapshot `readUIMessageStream` yields, as the chat UI would render them.
async function snapshots(bytes) {
  const stream = await transportServing(bytes).sendMessages({
    chatId: 'chat-1',
    messages: [userMessage('hi')],
    abortSignal: undefined,
    trigger: 'submit-message',
    messageId: undefined,
  });
  const seen = [];
  for await (const m of readUIMessageStream({ stream })) {
    seen.push(JSON.parse(JSON.stringify(m)));
  }
  return seen;
}

test('sub_agent: the inner agent\'s steps, tool call and text arrive as preliminary outputs of the call, tagged, then its answer', async () => {
  const { parts, errors, message } = await assemble(await transcript('sub_agent'));
  assert.deepEqual(errors, []);
  const preliminary = parts.filter(p => p.type === 'tool-output-available' && p.preliminary);
  assert.ok(preliminary.length >= 3, JSON.stringify(parts));
  for (const p of preliminary) {
    assert.equal(p.toolCallId, 'call_1');
    assert.equal(p.output.role, 'assistant');
    assert.deepEqual(p.output.metadata, { agent: 'forecaster', depth: 1 });
  }
  // The last preliminary output: the forecaster's whole message.
  assert.deepEqual(preliminary.at(-1).output.parts, [
    { type: 'step-start' },
    {
      type: 'tool-get_weather',
      toolCallId: 'call_2',
      state: 'output-available',
      input: { city: 'Paris' },
      output: 'sunny, 21 °C, "clear skies"',
    },
    { type: 'step-start' },
    { type: 'text', text: 'Sunny in Paris, 21 °C.', state: 'done' },
  ]);
  // While the forecaster worked, the writer's tool part showed its message, marked
  // preliminary; the call's result replaced it.
  const shown = (await snapshots(await transcript('sub_agent')))
    .map(m => m.parts.find(p => p.type === 'tool-forecaster'))
    .filter(p => p && p.preliminary);
  assert.ok(
    shown.some(p => p.output.parts.some(q => q.type === 'tool-get_weather' && q.state === 'input-available')),
    JSON.stringify(shown),
  );
  assert.ok(shown.some(p => p.output.parts.some(q => q.type === 'text' && q.text === 'Sunny in Paris, 21 °C.')));
  const tool = message.parts.find(p => p.type === 'tool-forecaster');
  assert.equal(tool.state, 'output-available');
  assert.equal(tool.output, 'Sunny in Paris, 21 °C.');
  assert.equal(tool.preliminary, undefined);
  assert.equal(message.parts.at(-1).text, 'The forecaster says: sunny in Paris.');
});

test('handoff: onData gets the transient handoff part, the message has the transfer call and the other agent\'s answer', async () => {
  const received = [];
  const { chat, finished } = await chatTurn(await transcript('handoff'), 'Weather in Paris?', {
    onData: part => received.push(part),
  });
  assert.equal(chat.status, 'ready');
  assert.equal(finished.finishReason, 'stop');
  assert.deepEqual(received, [
    { type: 'data-halo-handoff', data: { from: 'triage', to: 'weather' }, transient: true },
  ]);
  const answer = chat.messages[1];
  assert.deepEqual(
    answer.parts.map(p => p.type),
    ['step-start', 'tool-transfer_to_weather', 'step-start', 'text'],
  );
  assert.equal(answer.parts.at(-1).text, 'Sunny in Paris.');
});

// The checks above can fail: the same client rejects parts that break the protocol.

async function rejectionOf(bytes) {
  try {
    await assemble(bytes);
  } catch (e) {
    return e;
  }
  assert.fail('the malformed stream was accepted');
}

test('approval: the request assembles into a tool part waiting for approval, the finish reason is tool-calls', async () => {
  const { parts, errors, message } = await assemble(await transcript('approval'));
  assert.deepEqual(errors, []);
  assert.deepEqual(parts.find(p => p.type === 'tool-approval-request'), {
    type: 'tool-approval-request',
    approvalId: 'call_1',
    toolCallId: 'call_1',
    reason: '`deploy` runs only once approved',
  });
  assert.equal(parts.at(-1).type, 'finish');
  assert.equal(parts.at(-1).finishReason, 'tool-calls');
  const tool = message.parts.find(p => p.type === 'tool-deploy');
  assert.equal(tool.state, 'approval-requested');
  assert.deepEqual(tool.approval, { id: 'call_1', requestReason: '`deploy` runs only once approved' });
  assert.deepEqual(tool.input, { city: 'Paris' });
});

test('a part missing a required field fails the schema validation', async () => {
  const good = (await transcript('tool_run')).toString('utf8');
  const bad = good.replace('"type":"tool-output-available","toolCallId":"call_1",', '"type":"tool-output-available",');
  assert.notEqual(bad, good);
  const error = await rejectionOf(Buffer.from(bad));
  assert.equal(error.name, 'AI_TypeValidationError');
});

test('an unknown part type fails the schema validation', async () => {
  const good = (await transcript('tool_error')).toString('utf8');
  const bad = good.replace('"type":"finish-step"', '"type":"step-finish"');
  assert.notEqual(bad, good);
  const error = await rejectionOf(Buffer.from(bad));
  assert.equal(error.name, 'AI_TypeValidationError');
});

test('a text delta without its text-start is rejected by the assembler', async () => {
  const good = (await transcript('tool_error')).toString('utf8');
  const bad = good.replace('data: {"type":"text-start","id":"text-1"}\n\n', '');
  assert.notEqual(bad, good);
  const error = await rejectionOf(Buffer.from(bad));
  assert.equal(error.name, 'AI_UIMessageStreamError');
});
