// Drives examples/web-chat in headless Chromium: starts the server (scripted model), types a
// question into the page, and reads the streamed answer and the tool call back from the DOM.
// Saves a screenshot. Run by `cargo xtask interop` after `cargo build -p web-chat` and
// `npm run build`; alone: `WEB_CHAT_BIN=../../../target/debug/web-chat node --test test/`.
//
// Env: WEB_CHAT_BIN (server binary), CHROMIUM (default /usr/bin/chromium), SCREENSHOT (PNG path).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(web, '..', '..', '..');
const serverBin = process.env.WEB_CHAT_BIN ?? path.join(repo, 'target', 'debug', 'web-chat');
const screenshot = process.env.SCREENSHOT ?? path.join(repo, 'target', 'web-chat.png');

let server;
let url;
let profile;
let context;
let page;
const chatResponses = [];
// Every answer of 400 or more and every console error the page had.
const failures = [];

function startServer() {
  return new Promise((resolve, reject) => {
    server = spawn(serverBin, ['--port', '0', '--model', 'scripted', '--assets', web], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    server.on('error', reject);
    server.on('exit', code => reject(new Error(`web-chat exited early (${code})`)));
    let out = '';
    server.stdout.on('data', data => {
      out += data;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/)/);
      if (m) resolve(m[1]);
    });
  });
}

before(async () => {
  url = await startServer();
  profile = await mkdtemp(path.join(tmpdir(), 'web-chat-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 900, height: 700 },
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('response', r => {
    if (r.url().endsWith('/api/chat')) chatResponses.push(r);
    if (r.status() >= 400) failures.push(`${r.status()} ${r.url()}`);
  });
  page.on('console', m => {
    if (m.type() === 'error') failures.push(`console: ${m.text()}`);
  });
  await page.goto(url);
  await page.waitForSelector('body[data-status="ready"]');
});

after(async () => {
  await context?.close();
  server?.removeAllListeners('exit');
  server?.kill();
  if (profile) await rm(profile, { recursive: true, force: true });
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
