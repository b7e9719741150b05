// What the browser tests share: a web-chat server (a process of its own, on a store in a
// temporary folder), headless Chromium, logging in and asking through the page.
//
// Env: WEB_CHAT_BIN (server binary), CHROMIUM (default /usr/bin/chromium).

import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const repo = path.resolve(web, '..', '..', '..');
export const serverBin = process.env.WEB_CHAT_BIN ?? path.join(repo, 'target', 'debug', 'web-chat');
export const USERS = { ann: 'ann-password-1', bob: 'bob-password-2' };

export async function tempDir(name) {
  return mkdtemp(path.join(tmpdir(), `web-chat-${name}-`));
}

// Starts web-chat with `args` on a store in `dir`; resolves to { url, process }.
export function startServer(dir, { port = 0, args = [] } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(
      serverBin,
      [
        '--port', String(port),
        '--model', 'scripted',
        '--assets', web,
        '--store', path.join(dir, 'chats.jsonl'),
        '--token-file', path.join(dir, 'run', 'token'),
        ...args,
      ],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, WEB_CHAT_USERS: Object.entries(USERS).map(([u, p]) => `${u}:${p}`).join(',') },
      },
    );
    child.on('error', reject);
    const early = code => reject(new Error(`web-chat exited early (${code})`));
    child.on('exit', early);
    let out = '';
    child.stdout.on('data', data => {
      out += data;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:(\d+)\/)/);
      if (m) {
        child.off('exit', early);
        resolve({ url: m[1], port: Number(m[2]), process: child });
      }
    });
  });
}

// Stops a server at once (SIGKILL), as a crash would.
export function kill(server) {
  return new Promise(resolve => {
    if (server.process.exitCode != null) return resolve();
    server.process.once('exit', resolve);
    server.process.kill('SIGKILL');
  });
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}

// A page in a browser context of its own (its own cookies), collecting failures.
export async function newPage(browser, failures = []) {
  const context = await browser.newContext({ viewport: { width: 1000, height: 760 } });
  const page = await context.newPage();
  page.on('console', m => {
    if (m.type() === 'error' && !/status of (401|404|409)/.test(m.text())) failures.push(`console: ${m.text()}`);
  });
  return page;
}

export async function login(page, url, user, password = USERS[user]) {
  await page.goto(url);
  await page.waitForSelector('body[data-status="login"]');
  await page.fill('#user', user);
  await page.fill('#password', password);
  await page.click('#login-button');
}

// Logs in and waits for the chat page.
export async function loggedIn(page, url, user) {
  await login(page, url, user);
  await page.waitForSelector('#app:not([hidden])');
  await page.waitForSelector('body[data-status="ready"]');
}

export async function send(page, text) {
  await page.fill('#input', text);
  await page.press('#input', 'Enter');
}

// The assistant messages' texts, tool parts, steering notes and approval cards.
export async function assistant(page) {
  return page.$$eval('.message[data-role="assistant"]', ms =>
    ms.map(m => ({
      texts: [...m.querySelectorAll('.text')].map(p => p.textContent),
      tools: [...m.querySelectorAll('.tool')].map(t => ({
        name: t.dataset.toolName,
        state: t.dataset.state,
        output: t.querySelector('.output')?.textContent,
      })),
      steering: [...m.querySelectorAll('.steering')].map(p => p.textContent),
      approvals: m.querySelectorAll('.approval').length,
      usage: m.querySelectorAll('.usage').length,
    })),
  );
}

// Waits until the chat is ready and `check(lastAssistantText)` holds.
export async function waitForAnswer(page, pattern, timeout = 30_000) {
  await page.waitForFunction(
    source => {
      if (document.body.dataset.status !== 'ready') return false;
      const ms = document.querySelectorAll('.message[data-role="assistant"]');
      const last = ms[ms.length - 1];
      if (!last) return false;
      const text = [...last.querySelectorAll('.text')].map(p => p.textContent).join('\n');
      return new RegExp(source).test(text);
    },
    pattern.source,
    { timeout },
  );
}
