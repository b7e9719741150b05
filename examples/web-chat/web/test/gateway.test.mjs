// The gateway in headless Chromium, through examples/web-chat: login, a refresh in the
// middle of an answer, the approval card across a refresh, a killed and restarted server,
// steering. Run by `cargo xtask interop` after `cargo build -p web-chat` and `npm run build`;
// alone: `WEB_CHAT_BIN=../../../target/debug/web-chat node --test test/gateway.test.mjs`.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import {
  assistant, kill, launch, loggedIn, login, newPage, send, startServer, tempDir, waitForAnswer, USERS,
} from './helpers.mjs';

let dir;
let server;
let browser;
const failures = [];

before(async () => {
  dir = await tempDir('gateway');
  const tools = path.join(dir, 'project');
  await mkdir(tools);
  server = await startServer(dir, { args: ['--coding-tools', tools] });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  if (server) await kill(server);
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('a wrong password is refused, the right one logs in, and another user cannot open the chat by its URL', async () => {
  const page = await newPage(browser, failures);
  await login(page, server.url, 'ann', 'not the password');
  await page.waitForSelector('body[data-status="login-failed"]');
  assert.equal(await page.textContent('#login-error'), 'wrong user name or password');
  assert.equal(await page.isHidden('#app'), true);
  await page.fill('#password', USERS.ann);
  await page.click('#login-button');
  await page.waitForSelector('#app:not([hidden])');
  assert.equal(await page.textContent('#me'), 'ann');
  await send(page, 'What is the weather in Oslo?');
  await waitForAnswer(page, /The weather in Oslo: snow, -3 °C\./);
  const chatUrl = page.url();
  assert.match(chatUrl, /#chat=[A-Za-z0-9_-]+$/);

  const bob = await newPage(browser, failures);
  await loggedIn(bob, server.url, 'bob');
  await bob.goto(chatUrl);
  await bob.reload();
  await bob.waitForSelector('body[data-chat="missing"]');
  assert.equal(await bob.isVisible('#notfound'), true);
  assert.deepEqual(await assistant(bob), []);
  assert.equal(await bob.textContent('#messages'), '');
  // ann still sees it.
  await page.reload();
  await waitForAnswer(page, /The weather in Oslo/);
  await bob.context().close();
  await page.context().close();
});

test('a refresh in the middle of a streamed answer resumes it, complete and without a word twice', async () => {
  const page = await newPage(browser, failures);
  await loggedIn(page, server.url, 'ann');
  await send(page, 'Count to 80');
  await page.waitForFunction(() => {
    const t = document.querySelector('.message[data-role="assistant"] .text')?.textContent ?? '';
    return t.split(' ').length >= 10;
  });
  await page.reload();
  await waitForAnswer(page, /\b80\.$/);
  const [answer] = await assistant(page);
  const expected = Array.from({ length: 80 }, (_, i) => String(i + 1)).join(' ') + '.';
  assert.deepEqual(answer.texts, [expected]);
  assert.equal((await page.$$('.message[data-role="user"]')).length, 1);
  assert.ok(answer.usage >= 1, 'the step shows its cache figures');
  await page.context().close();
});

test('an approval card survives a refresh: approve runs the command, deny is read by the model', async () => {
  const page = await newPage(browser, failures);
  await loggedIn(page, server.url, 'ann');
  await send(page, 'Please run `echo approved-run` now');
  await page.waitForSelector('.approval');
  await page.waitForSelector('body[data-status="ready"]');
  await page.reload();
  await page.waitForSelector('.approval');
  await page.click('.approval .approve');
  await waitForAnswer(page, /The command said:/);
  let [answer] = await assistant(page);
  assert.equal(answer.approvals, 0);
  assert.deepEqual(answer.tools.map(t => [t.name, t.state]), [['bash', 'output-available']]);
  assert.match(answer.texts.at(-1), /approved-run/);

  await page.click('#new-chat');
  await send(page, 'Please run `echo denied-run` now');
  await page.waitForSelector('.approval');
  await page.waitForSelector('body[data-status="ready"]');
  await page.reload();
  await page.waitForSelector('.approval');
  await page.click('.approval .deny');
  await waitForAnswer(page, /The command said:/);
  [answer] = await assistant(page);
  assert.deepEqual(answer.tools.map(t => [t.name, t.state]), [['bash', 'output-denied']]);
  assert.match(answer.texts.at(-1), /the user rejected this call/);
  assert.doesNotMatch(answer.texts.at(-1), /denied-run\n/);
  await page.context().close();
});

test('a steering message sent mid-run appears in the next step', async () => {
  const page = await newPage(browser, failures);
  await loggedIn(page, server.url, 'ann');
  // Long enough (200 words, 25 ms apart) that the steering message is sent while the
  // answer streams, even on a loaded machine.
  await send(page, 'Count to 200');
  await page.waitForSelector('#steer-form:not([hidden])');
  await page.fill('#steer-input', 'Say hi too');
  await page.press('#steer-input', 'Enter');
  await page.waitForSelector('body[data-steered="accepted"]');
  await waitForAnswer(page, /You said: Say hi too\./);
  const [answer] = await assistant(page);
  assert.deepEqual(answer.steering, ['↪ Say hi too']);
  assert.match(answer.texts[0], /^1 2 3 .* 200\.$/);
  await page.context().close();
});

test('the server is killed and restarted: the browser is still logged in and the chat is there', async () => {
  // Requests cut by the kill are expected here: this page's console errors are not counted.
  const page = await newPage(browser);
  await loggedIn(page, server.url, 'bob');
  await send(page, 'What is the weather in Lisbon?');
  await waitForAnswer(page, /The weather in Lisbon: clear, 24 °C\./);
  await kill(server);
  server = await startServer(dir, { port: server.port, args: ['--coding-tools', path.join(dir, 'project')] });
  await page.reload();
  await page.waitForSelector('#app:not([hidden])');
  assert.equal(await page.textContent('#me'), 'bob');
  await waitForAnswer(page, /The weather in Lisbon: clear, 24 °C\./);
  const [answer] = await assistant(page);
  assert.deepEqual(answer.tools.map(t => [t.name, t.state]), [['get_weather', 'output-available']]);
  assert.equal(await page.$$eval('#chats li', l => l.length), 1, 'the chat is listed from the store');
  await page.context().close();
});

test('nothing the pages loaded failed', () => {
  assert.deepEqual(failures, []);
});
