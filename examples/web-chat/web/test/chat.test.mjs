// Drives examples/web-chat in headless Chromium: starts the server (scripted model), logs
// in, types a question into the page, and reads the streamed answer and the tool call back
// from the DOM. Saves a screenshot. Run by `cargo xtask interop` after `cargo build -p
// web-chat` and `npm run build`; alone: `WEB_CHAT_BIN=../../../target/debug/web-chat node
// --test test/chat.test.mjs`.
//
// Env: WEB_CHAT_BIN (server binary), CHROMIUM (default /usr/bin/chromium), SCREENSHOT (PNG path).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { kill, launch, loggedIn, newPage, repo, startServer, tempDir } from './helpers.mjs';

const screenshot = process.env.SCREENSHOT ?? path.join(repo, 'target', 'web-chat.png');

let dir;
let server;
let url;
let browser;
let page;
const chatResponses = [];
// Every answer of 400 or more and every console error the page had.
const failures = [];

before(async () => {
  dir = await tempDir('chat');
  server = await startServer(dir);
  url = server.url;
  browser = await launch();
  page = await newPage(browser, failures);
  page.on('response', r => {
    if (r.url().endsWith('/api/chat')) chatResponses.push(r);
    // The login page asks who is logged in before anyone is (401).
    if (r.status() >= 400 && !r.url().endsWith('/api/me')) failures.push(`${r.status()} ${r.url()}`);
  });
  await loggedIn(page, url, 'ann');
});

after(async () => {
  await browser?.close();
  if (server) await kill(server);
  if (dir) await rm(dir, { recursive: true, force: true });
});

// Sends `text` and waits until the chat is ready again with `turns` assistant messages.
async function ask(text, turns) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
  await page.waitForFunction(
    n =>
      document.body.dataset.status === 'ready' &&
      document.querySelectorAll('.message[data-role="assistant"]').length === n,
    turns,
    { timeout: 30_000 },
  );
  return page.$$eval('.message[data-role="assistant"]', (messages, i) => {
    const m = messages[i];
    return {
      texts: [...m.querySelectorAll('.text')].map(p => p.textContent),
      tools: [...m.querySelectorAll('.tool')].map(t => ({
        name: t.dataset.toolName,
        state: t.dataset.state,
        call: t.querySelector('.call')?.textContent,
        output: t.querySelector('.output')?.textContent,
      })),
    };
  }, turns - 1);
}

test('a question typed into the page is answered through one tool call', async () => {
  const answer = await ask('What is the weather in Oslo?', 1);
  assert.deepEqual(answer, {
    texts: ['Let me check the weather in Oslo.', 'The weather in Oslo: snow, -3 °C.'],
    tools: [
      {
        name: 'get_weather',
        state: 'output-available',
        call: 'get_weather({"city":"Oslo"})',
        output: '→ snow, -3 °C',
      },
    ],
  });
  assert.deepEqual(
    await page.$$eval('.message[data-role="user"]', ms => ms.map(m => m.textContent)),
    ['What is the weather in Oslo?'],
  );
  assert.equal(await page.textContent('#error'), '');
  // The page rendered the answer while it streamed, not only at the end.
  assert.deepEqual(
    (await page.getAttribute('body', 'data-statuses')).split(' '),
    ['ready', 'submitted', 'streaming', 'ready'],
  );
  const response = chatResponses[0];
  assert.equal(response.status(), 200);
  const headers = await response.allHeaders();
  assert.equal(headers['content-type'], 'text/event-stream');
  assert.equal(headers['x-vercel-ai-ui-message-stream'], 'v1');
  await page.screenshot({ path: screenshot, fullPage: true });
});

test('a second turn in the same chat gets its own tool call and answer', async () => {
  const answer = await ask('And in Lisbon?', 2);
  assert.deepEqual(answer.texts, [
    'Let me check the weather in Lisbon.',
    'The weather in Lisbon: clear, 24 °C.',
  ]);
  assert.deepEqual(
    answer.tools.map(t => [t.name, t.state, t.output]),
    [['get_weather', 'output-available', '→ clear, 24 °C']],
  );
  await page.screenshot({ path: screenshot, fullPage: true });
});

test('the icon is served and nothing the page loaded failed', async () => {
  for (const icon of ['favicon.ico', 'favicon.svg']) {
    const r = await fetch(new URL(icon, url));
    assert.equal(r.status, 200, icon);
    assert.equal(r.headers.get('content-type'), 'image/svg+xml', icon);
    assert.match(await r.text(), /^<svg /, icon);
  }
  assert.deepEqual(failures, []);
});
