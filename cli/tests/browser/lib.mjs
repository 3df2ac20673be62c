// What the dashboard's browser scripts share: settings from the environment, Playwright with
// Debian's Chromium, waiting, the API as a client outside the browser, screenshots.

import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export { sleep };

/** A setting from the environment; `fallback` when unset, else it is required. */
export function setting(name, fallback) {
  const value = process.env[name] ?? fallback;
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
}

/** playwright-core, from where scripts/test installed it (EINSORA_BROWSER_MODULES). */
export function playwright() {
  const here = path.dirname(new URL(import.meta.url).pathname);
  const modules = setting(
    'EINSORA_BROWSER_MODULES',
    path.resolve(here, '../../../target/browser-tests/node_modules'),
  );
  return createRequire(path.join(modules, 'resolve-from-here.js'))('playwright-core');
}

/** Debian's Chromium, headless, with nothing of its own on the network. */
export async function chromium() {
  return playwright().chromium.launch({
    executablePath: setting('EINSORA_CHROMIUM', '/usr/bin/chromium'),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--no-proxy-server',
    ],
  });
}

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** Resolves with what `check` returns once it is truthy; throws after `timeout` ms. */
export async function waitFor(what, check, timeout = 30_000, every = 100) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${last ? `: ${last.message}` : ''}`);
    }
    await sleep(every);
  }
}

export function assert(condition, message) {
  if (!condition) throw new Error(`assertion failed: ${message}`);
}

/** The JSON API as a client outside the browser, with an API token. */
export function apiClient(base, token) {
  return async function api(method, route, body) {
    const headers = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const answer = await fetch(base + route, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await answer.text();
    if (!answer.ok) throw new Error(`${method} ${route}: ${answer.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

/** Two animation frames: what the last change did is on screen. */
export async function painted(page) {
  await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

/**
 * Screenshots of `page` as it is, at desktop and phone sizes, into `dir` as
 * `<name>-desktop.png` and `<name>-phone.png`. Returns what doesn't fit: a page wider than the
 * screen at either size (the whole page scrolls sideways; a table may scroll in its own box).
 */
export async function shoot(page, dir, name) {
  fs.mkdirSync(dir, { recursive: true });
  const misfits = [];
  for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
    await page.setViewportSize(viewport);
    await painted(page);
    await page.screenshot({ path: path.join(dir, `${name}-${size}.png`), fullPage: true });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    if (wide > viewport.width + 1) {
      misfits.push(`${name} is ${wide} px wide on a ${viewport.width} px ${size} screen (${name}-${size}.png)`);
    }
  }
  await page.setViewportSize(DESKTOP);
  return misfits;
}
