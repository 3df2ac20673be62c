// Benchmark (not a test): time to first paint of the dashboard's workloads list with 1,000
// workloads, in Chromium, on loopback. Target: ≤ 200 ms. docs/benchmarks.md has the command
// and figures.
//
// Starts its own `einsora up` (EINSORA_BIN, default target/release/einsora) on a temp data dir,
// SQLite, the fake backend; makes the owner, seeds 1,000 notebooks through the API, signs in
// through the dashboard, then loads /workloads BENCH_RUNS times (default 15, after one
// unmeasured) and reports, from the navigation's start: first contentful paint, the first row
// painted, the last page of the list received, and all 1,000 rows painted (the first task after
// the rendering of the first frame whose table held them all).

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { assert, chromium, DESKTOP, setting, sleep, waitFor } from './lib.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const BIN = setting('EINSORA_BIN', path.resolve(here, '../../../target/release/einsora'));
const COUNT = Number(setting('BENCH_WORKLOADS', '1000'));
const RUNS = Number(setting('BENCH_RUNS', '15'));
const EMAIL = 'bench@example.test';
const PASSWORD = 'a benchmark owner password';

function freePort() {
  return new Promise((done, fail) => {
    const server = net.createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x) => (x === undefined ? '—' : `${x.toFixed(1)}`);

async function main() {
  assert(fs.existsSync(BIN), `no binary at ${BIN}: cargo build --release -p einsora (or set EINSORA_BIN)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'einsora-bench-'));
  const http = await freePort();
  const access = await freePort();
  const env = {
    PATH: process.env.PATH,
    EINSORA_DATA_DIR: dir,
    EINSORA_DATABASE_URL: `sqlite:${path.join(dir, 'einsora.db')}`,
    EINSORA_HTTP_ADDR: `127.0.0.1:${http}`,
    EINSORA_ACCESS_ADDR: `127.0.0.1:${access}`,
    EINSORA_CLUSTER_BACKEND: 'fake',
    EINSORA_LOG: 'warn',
  };
  const setup = spawnSync(BIN, ['setup', '--email', EMAIL, '--password-stdin'], { env, input: PASSWORD });
  assert(setup.status === 0, `setup: ${setup.stderr}`);
  const up = spawn(BIN, ['up'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  up.stdout.on('data', (d) => (output += d));
  up.stderr.on('data', (d) => (output += d));
  const browser = await chromium();
  try {
    await waitFor('einsora up to be ready', () => output.includes('Einsora is ready: ') || up.exitCode !== null, 60_000);
    assert(up.exitCode === null, `up exited: ${output}`);
    const api = `http://127.0.0.1:${http}`;
    const login = await fetch(`${api}/v1/sessions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: EMAIL, password: PASSWORD }),
    });
    assert(login.ok, `login: ${login.status}`);
    const cookie = login.headers.get('set-cookie').split(';')[0];
    const { csrf_token: csrf } = await login.json();
    const made = await fetch(`${api}/v1/tokens`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Cookie: cookie, 'X-CSRF-Token': csrf },
      body: JSON.stringify({ name: 'bench' }),
    });
    const { token } = await made.json();

    const seeding = Date.now();
    let next = 0;
    const create = async () => {
      while (next < COUNT) {
        const n = next++;
        for (;;) {
          const answer = await fetch(`${api}/v1/workloads`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
            body: JSON.stringify({ kind: 'notebook', name: `nb-${n}`, gpu_class: 'cpu-1c-2g', image: 'jupyterlab' }),
          });
          if (answer.status === 202) break;
          assert(answer.status === 429 || answer.status === 503, `create: ${answer.status} ${await answer.text()}`);
          await sleep(1000 * Number(answer.headers.get('retry-after') ?? 1));
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, create));
    console.error(`seeded ${COUNT} workloads in ${((Date.now() - seeding) / 1000).toFixed(1)} s`);
    await sleep(3000); // the controller's first passes over them

    const dashboard = `http://localhost:${http}`;
    const context = await browser.newContext({ viewport: DESKTOP });
    const page = await context.newPage();
    await page.goto(`${dashboard}/signin`);
    await page.getByLabel('Email', { exact: true }).fill(EMAIL);
    await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL((url) => !url.pathname.startsWith('/signin'));
    await page.close();

    await context.addInitScript((count) => {
      const marks = {};
      window.__bench = marks;
      const afterPaint = (name) => {
        const channel = new MessageChannel();
        channel.port1.onmessage = () => {
          marks[name] = performance.now();
        };
        channel.port2.postMessage(0);
      };
      const frame = () => {
        const rows = document.querySelectorAll('table tbody tr').length;
        marks.rows = rows;
        if (rows > 0 && marks.firstRowFrame === undefined) {
          marks.firstRowFrame = performance.now();
          afterPaint('firstRow');
        }
        if (rows >= count && marks.allRowsFrame === undefined) {
          marks.allRowsFrame = performance.now();
          afterPaint('allRows');
          return;
        }
        requestAnimationFrame(frame);
      };
      requestAnimationFrame(frame);
    }, COUNT);

    const runs = [];
    for (let run = 0; run <= RUNS; run++) {
      const p = await context.newPage();
      await p.goto(`${dashboard}/workloads`);
      const marks = await waitFor('the list', () => p.evaluate(() => {
        const m = window.__bench;
        return m.allRows !== undefined || (m.firstRow !== undefined && performance.now() > 10_000) ? m : null;
      }), 20_000, 20);
      const { fcp, api } = await p.evaluate(() => ({
        fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
        // When the last page of the list had arrived.
        api: Math.max(
          ...performance
            .getEntriesByType('resource')
            .filter((e) => new URL(e.name).pathname === '/v1/workloads')
            .map((e) => /** @type {PerformanceResourceTiming} */ (e).responseEnd),
        ),
      }));
      await p.close();
      if (run === 0) continue; // the first load fills caches
      runs.push({ fcp, api, firstRow: marks.firstRow, allRows: marks.allRows, rows: marks.rows });
    }
    const rows = runs.map((r, i) => [String(i + 1), fmt(r.fcp), fmt(r.firstRow), fmt(r.api), fmt(r.allRows), String(r.rows)]);
    const summary = (name, pick) => {
      const xs = runs.map(pick).filter(Number.isFinite);
      return xs.length ? `${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})` : '—';
    };
    rows.push([
      '**median (min–max)**',
      summary('fcp', (r) => r.fcp),
      summary('first row', (r) => r.firstRow),
      summary('list', (r) => r.api),
      summary('all rows', (r) => r.allRows),
      '',
    ]);
    const table = [
      '| run | first contentful paint | first row painted | list fetched | all rows painted | rows shown |',
      '|---|---:|---:|---:|---:|---:|',
      ...rows.map((r) => `| ${r.join(' | ')} |`),
    ].join('\n');
    const header = spawnSync(path.resolve(here, '../../../scripts/bench-header'), [
      'Dashboard workloads list',
      'node cli/tests/browser/bench-workloads.mjs',
    ]).stdout.toString().trimEnd();
    const report = `${header}\n\nChromium ${browser.version()}, ${COUNT} workloads, ${RUNS} loads of /workloads after one unmeasured (ms from navigation start):\n\n${table}\n`;
    process.stdout.write(report);
    const results = path.resolve(here, '../../../target/bench-results');
    fs.mkdirSync(results, { recursive: true });
    fs.writeFileSync(path.join(results, 'dashboard.md'), report);
    if (runs.some((r) => r.allRows === undefined)) {
      throw new Error(`the page did not show all ${COUNT} rows (it showed ${runs[0]?.rows}): the list is paged`);
    }
  } finally {
    await browser.close();
    up.kill('SIGTERM');
    await new Promise((done) => (up.exitCode !== null ? done() : up.once('exit', done)));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
