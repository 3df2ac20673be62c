// The dashboard in Chromium against a running `einsora up` (local auth mode, workloads on this
// machine's Docker engine). Run by the e2e test `browser` (cli/tests/e2e/browser.rs), which
// starts the stack and passes its addresses:
//   EINSORA_DASHBOARD_URL   the dashboard as the browser opens it (http://localhost:<port>)
//   EINSORA_API_URL         the same gateway for this script's own API checks (127.0.0.1)
//   EINSORA_ACCESS_PORT     the access proxy's port (notebooks at w-<id>.localhost:<port>)
//   EINSORA_OWNER_EMAIL, EINSORA_OWNER_PASSWORD   the account to sign in with
//   EINSORA_API_TOKEN       an API token of that account, for checks outside the browser
//   EINSORA_MODEL           a model file the endpoint can serve
//   EINSORA_SCREENSHOTS     where <page>-desktop.png and <page>-phone.png go
// Prints each step as it goes, and `RESULT {json}` at the end; exits 1 on the first failure,
// leaving failure.png and failure.html beside the screenshots.

import fs from 'node:fs';
import path from 'node:path';

import { attack, elsewhere } from './cross-site.mjs';
import { apiClient, assert, chromium, DESKTOP, painted, setting, shoot, sleep, waitFor } from './lib.mjs';

const DASHBOARD = setting('EINSORA_DASHBOARD_URL').replace(/\/$/, '');
const DASHBOARD_HOST = new URL(DASHBOARD).host;
const API_URL = setting('EINSORA_API_URL', DASHBOARD).replace(/\/$/, '');
const ACCESS_PORT = setting('EINSORA_ACCESS_PORT');
const EMAIL = setting('EINSORA_OWNER_EMAIL');
const PASSWORD = setting('EINSORA_OWNER_PASSWORD');
const MODEL = setting('EINSORA_MODEL', 'tiny.gguf');
/** A `.gguf` file in the models directory that isn't a model. */
const NOT_A_MODEL = 'not-a-model.gguf';
const SHOTS = setting('EINSORA_SCREENSHOTS', path.resolve('target/test-output/screenshots'));
const TOKEN = setting('EINSORA_API_TOKEN');
const api = apiClient(API_URL, TOKEN);

/** How long a workload may take to reach running on a busy 2-core machine. */
const RUNNING_WITHIN = 180_000;
const SESSION_COOKIE = 'einsora_session';
const ACCESS_COOKIE = 'einsora_access';
const NOTEBOOK_HOST = /^w-[0-9a-f-]+\.localhost$/;

const started = Date.now();
const log = (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);

// ---- what the browser does that the test watches all along ----

/** Console errors, uncaught exceptions and CSP violations on the dashboard's pages. */
const problems = [];
/** Requests to a notebook's host that carried the dashboard's session cookie. */
const leaks = [];
/** Requests to a notebook's host, by URL. */
const notebookRequests = [];
/** Requests to the dashboard's /v1 from pages of other sites: [origin label, method, url, had session]. */
const attackRequests = [];
/** Pages whose requests count as attacks, by the origin label they attack from. */
const attackers = new Map();
const pending = [];
let signedIn = false;
/** A mocked failure the test is causing on purpose: its console line is expected. */
let expectedFailure = null;
/**
 * Loads Chromium aborted because this host's network changed under it (the other tests make
 * network namespaces, bridges and containers as they run): the machine's doing, not the
 * dashboard's. A reload they spoil is tried again (`reloadTo`).
 */
const networkChanged = [];

function isDashboard(url) {
  try {
    return new URL(url).host === DASHBOARD_HOST;
  } catch {
    return false;
  }
}

function watch(context) {
  context.on('request', (request) => {
    const url = new URL(request.url());
    let page = null;
    try {
      page = request.frame().page();
    } catch {
      // a service worker's request: no page
    }
    const attacker = page && attackers.get(page);
    if (NOTEBOOK_HOST.test(url.hostname)) notebookRequests.push(request.url());
    if (!NOTEBOOK_HOST.test(url.hostname) && !(attacker && url.host === DASHBOARD_HOST)) return;
    pending.push(
      request.allHeaders().then((headers) => {
        const cookie = headers.cookie ?? '';
        const session = cookie.split(/;\s*/).some((c) => c.startsWith(`${SESSION_COOKIE}=`));
        if (NOTEBOOK_HOST.test(url.hostname) && session) leaks.push(request.url());
        if (attacker && url.host === DASHBOARD_HOST) {
          attackRequests.push([attacker, request.method(), request.url(), session]);
        }
      }, () => {}),
    );
  });
  context.on('page', (page) => listen(page));
}

function listen(page) {
  page.on('console', (message) => {
    if (message.type() !== 'error' || !isDashboard(page.url())) return;
    const text = message.text();
    const where = message.location().url;
    if (text.includes('net::ERR_NETWORK_CHANGED')) return void networkChanged.push(`${text} (${where})`);
    const refused = /Failed to load resource: the server responded with a status of (\d+)/.exec(text);
    if (refused && refused[1] === '401' && !signedIn) return; // not signed in: the API says so
    if (refused && expectedFailure && where.includes(expectedFailure)) return;
    // A request the test cut off on purpose (a gateway that can't be reached).
    if (/Failed to load resource: net::ERR_/.test(text) && expectedFailure && where.includes(expectedFailure)) return;
    problems.push(`console error on ${page.url()}: ${text} (${where})`);
  });
  page.on('pageerror', (error) => {
    if (isDashboard(page.url())) problems.push(`uncaught on ${page.url()}: ${error.stack ?? error}`);
  });
}

/** Pages that don't fit the screen: the whole page scrolls sideways. */
const misfits = [];

// ---- the dashboard, as its contract names things ----

/** The value beside `term` in the page's description list. */
function field(page, term) {
  return page.locator(`xpath=//dl//dt[normalize-space()="${term}"]/following-sibling::dd[1]`).first();
}

async function fieldText(page, term) {
  return ((await field(page, term).textContent({ timeout: 2000 })) ?? '').trim();
}

/** Waits until the workload page's State reads `state`, without a reload; the states seen. */
async function watchState(page, state, timeout = RUNNING_WITHIN) {
  await page.evaluate(() => {
    window.__einsoraNoReload = true;
  });
  const seen = [];
  await waitFor(`State to read "${state}"`, async () => {
    const now = (await fieldText(page, 'State')).toLowerCase();
    if (seen.at(-1) !== now) seen.push(now);
    return now === state;
  }, timeout, 100);
  assert(await page.evaluate(() => window.__einsoraNoReload === true), 'the page was reloaded');
  return seen;
}

async function nav(page, name) {
  await page.getByRole('navigation').getByRole('link', { name, exact: true }).first().click();
}

function heading(page, name) {
  return page.getByRole('heading', { name, exact: true });
}

/** Reloads until `name`'s heading shows, again when the host's network changed under the load. */
async function reloadTo(page, name) {
  for (let tries = 1; ; tries++) {
    const spoiled = networkChanged.length;
    await page.reload();
    try {
      await heading(page, name).waitFor({ timeout: 15_000 });
      return;
    } catch (error) {
      if (networkChanged.length === spoiled || tries === 3) throw error;
      log(`the host's network changed during the reload (${networkChanged.length - spoiled} loads aborted); again`);
    }
  }
}

/** Confirms in the page's open <dialog> with the button `name`. */
async function inDialog(page, name) {
  const dialog = page.getByRole('dialog');
  await dialog.waitFor({ state: 'visible' });
  await dialog.getByRole('button', { name, exact: true }).click();
  await dialog.waitFor({ state: 'hidden' });
}

/** The API's view of what an attack could change. */
async function snapshot(workload) {
  const { tokens } = await api('GET', '/v1/tokens');
  // The test's own API token at least: an empty list would compare equal to anything empty.
  assert(Array.isArray(tokens) && tokens.length > 0, `a list of tokens: ${JSON.stringify(tokens)}`);
  const w = await api('GET', `/v1/workloads/${workload}`);
  assert(w.state, `the workload: ${JSON.stringify(w)}`);
  return {
    tokens: tokens.map((t) => `${t.id} ${t.name} ${t.revoked_at ?? 'live'}`).sort(),
    workload: w.state,
  };
}

/** The file a click on `button` downloads, as text, and its name. */
async function downloaded(page, button) {
  const [download] = await Promise.all([page.waitForEvent('download'), button.click()]);
  const file = await download.path();
  assert(file, `the download was saved: ${await download.failure()}`);
  return { name: download.suggestedFilename(), text: fs.readFileSync(file, 'utf8') };
}

/**
 * The workload page's Logs tab, `lab` the running notebook's JupyterLab: what it printed shows,
 * a line printed after the tab opened is followed, scrolling up stops following (a new line
 * doesn't move the view) until "Jump to newest", and Download saves the lines.
 */
async function logsTab(page, lab, screenshot) {
  // JupyterLab logs each request it answers 404 (`[W … ServerApp] 404 GET /api/<word> …`):
  // a line the notebook prints when the test asks, with a word of the test's own.
  const print = async (word) => {
    const status = await lab.evaluate(async (at) => (await fetch(at, { cache: 'no-store' })).status, `/api/${word}`);
    assert(status === 404, `the notebook answers /api/${word} with 404: ${status}`);
  };
  const tag = `einsora-browser-${Date.now()}`;
  await page.getByRole('tab', { name: 'Logs', exact: true }).click();
  await page.waitForURL(/\?tab=logs$/);
  const output = page.getByRole('log', { name: 'Output' });
  // What JupyterLab printed as it started, before the tab opened.
  await output.getByText(/Jupyter Server .* is running at/).first().waitFor({ timeout: 60_000 });
  await page.getByText('Following: new lines appear', { exact: false }).waitFor();
  await print(`${tag}-first`);
  await output.getByText(`${tag}-first`).waitFor({ timeout: 60_000 });
  // Enough lines that the view scrolls; it keeps to the newest.
  for (let i = 1; i <= 60; i++) await print(`${tag}-fill-${i}`);
  await output.getByText(`${tag}-fill-60`).waitFor({ timeout: 60_000 });
  await painted(page);
  const geometry = () => output.evaluate((box) => ({ top: box.scrollTop, height: box.scrollHeight, shown: box.clientHeight }));
  const below = (g) => g.height - g.top - g.shown;
  let g = await geometry();
  assert(g.height > g.shown + 100, `the output scrolls: ${JSON.stringify(g)}`);
  assert(below(g) <= 8, `following, the newest line is in view: ${JSON.stringify(g)}`);
  const jump = page.getByRole('button', { name: 'Jump to newest', exact: true });
  assert(!(await jump.isVisible()), 'no "Jump to newest" while following');

  await output.hover();
  await page.mouse.wheel(0, -800);
  await jump.waitFor();
  await page.getByText('Paused where you scrolled', { exact: false }).waitFor();
  await painted(page);
  const held = await geometry();
  assert(below(held) > 100, `scrolled up: ${JSON.stringify(held)}`);
  await print(`${tag}-while-scrolled`);
  await output.getByText(`${tag}-while-scrolled`).waitFor({ state: 'attached', timeout: 60_000 });
  await painted(page);
  g = await geometry();
  assert(g.top === held.top && g.height > held.height, `a new line doesn't move the view: before ${JSON.stringify(held)}, after ${JSON.stringify(g)}`);
  assert(below(g) > 100, `the new line is below the view: ${JSON.stringify(g)}`);
  await page.getByText(/\d+ new lines? below/).waitFor();
  assert(await jump.isVisible(), '"Jump to newest" is still offered');

  await jump.click();
  await jump.waitFor({ state: 'hidden' });
  await painted(page);
  assert(below(await geometry()) <= 8, 'Jump to newest shows the newest line');
  await print(`${tag}-after-jump`);
  await output.getByText(`${tag}-after-jump`).waitFor({ timeout: 60_000 });
  await painted(page);
  assert(below(await geometry()) <= 8, 'following again: the new line is in view');
  await screenshot('logs');

  const file = await downloaded(page, page.getByRole('button', { name: 'Download', exact: true }));
  assert(file.name === 'nb-browser.log', `the file's name: ${file.name}`);
  const saved = file.text.split('\n');
  for (const word of ['first', 'fill-1', 'fill-60', 'while-scrolled', 'after-jump']) {
    assert(saved.some((line) => line.includes(`/api/${tag}-${word}`)), `the file has the line of ${word}`);
  }
  const onPage = await output.locator('.line .text').allTextContents();
  assert(saved.length - 1 >= onPage.length, `the file has every line: ${saved.length - 1} lines, ${onPage.length} on the page`);
  for (const line of onPage) assert(saved.includes(line), `the file has the page's line ${JSON.stringify(line)}`);
  await page.getByText(/Saved [\d,]+ lines/).waitFor();
}

/** Every activity entry, from the API. */
async function allActivity() {
  const entries = [];
  let token = '';
  do {
    const page = await api('GET', `/v1/activity?page_size=500${token ? `&page_token=${token}` : ''}`);
    entries.push(...page.entries);
    token = page.next_page_token;
  } while (token);
  return entries;
}

/** A CSV text (RFC 4180) as records of fields. */
function parseCsv(text) {
  const records = [];
  let fields = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      fields.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      fields.push(field);
      records.push(fields);
      fields = [];
      field = '';
      i++;
    } else field += c;
  }
  if (field || fields.length) records.push([...fields, field]);
  return records;
}

/**
 * The Activity page: the launch of workload `id` (create_workload, ok, linked to its page) and
 * a call the API refused; the Result filter; Load more; CSV and NDJSON of every entry, as the
 * API has them; a refusal (someone not the owner) in the API's words.
 */
async function activityPage(page, id, screenshot) {
  const nobody = '00000000-0000-4000-8000-000000000000';
  const refused = await fetch(`${API_URL}/v1/workloads/${nobody}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert(refused.status === 404, `a workload that isn't there is refused: ${refused.status}`);
  await nav(page, 'Activity');
  await page.waitForURL(/\/activity$/);
  await heading(page, 'Activity').waitFor();
  const rows = page.locator('main tbody tr');
  const launched = rows.filter({ hasText: 'create_workload' }).filter({ has: page.getByRole('link', { name: id, exact: true }) });
  await launched.first().waitFor();
  const launchResult = await launched.first().locator('.result').textContent();
  assert(launchResult === 'ok', `the launch is ok: ${launchResult}`);
  const href = await launched.first().getByRole('link', { name: id, exact: true }).getAttribute('href');
  assert(href === `/workloads/${id}`, `the workload's ID links to its page: ${href}`);
  const read = rows.filter({ hasText: 'get_workload' }).filter({ hasText: nobody });
  await read.first().waitFor();
  const readResult = await read.first().locator('.result').textContent();
  assert(readResult === 'not_found', `the refused read says why: ${readResult}`);
  await screenshot('activity');

  await page.getByLabel('Result', { exact: true }).selectOption('refused');
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await page.waitForURL(/\/activity\?result=refused$/);
  await waitFor('only refusals listed', async () => {
    const results = await page.locator('main tbody .result').allTextContents();
    return results.length > 0 && results.every((r) => r !== 'ok') && (await launched.count()) === 0;
  });
  await read.first().waitFor();
  // The wrong password at the start: a refused sign-in to this account.
  await rows.filter({ has: page.getByText('login', { exact: true }) }).first().waitFor();

  // Load more: pages of three (the page's own size rewritten on its way), newest first.
  await page.route(/\/v1\/activity\?/, (route) => {
    const url = new URL(route.request().url());
    if (url.searchParams.get('page_size') !== '100') return route.fallback();
    url.searchParams.set('page_size', '3');
    return route.continue({ url: url.toString() });
  });
  await page.getByLabel('Result', { exact: true }).selectOption({ index: 0 });
  await page.getByRole('button', { name: 'Show', exact: true }).click();
  await waitFor('a page of three', async () => (await rows.count()) === 3);
  const more = page.getByRole('button', { name: 'Load more', exact: true });
  await more.click();
  await waitFor('two pages of three', async () => (await rows.count()) === 6);
  const ids = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.id));
  assert(new Set(ids).size === 6, `Load more adds the next entries: ${ids}`);
  const times = await rows.locator('time').evaluateAll((ts) => ts.map((t) => Date.parse(t.getAttribute('datetime'))));
  assert(times.every((t, i) => i === 0 || t <= times[i - 1]), `newest first: ${times}`);
  await page.unroute(/\/v1\/activity\?/);

  // Every entry, as the API has it.
  const entries = await allActivity();
  const columns = ['id', 'at', 'user_id', 'actor', 'action', 'object_kind', 'object_id', 'result', 'request_id', 'client_addr'];
  const csv = await downloaded(page, page.getByRole('button', { name: 'Download CSV', exact: true }));
  assert(/^einsora-activity-\d{4}-\d{2}-\d{2}\.csv$/.test(csv.name), `the CSV's name: ${csv.name}`);
  const [header, ...records] = parseCsv(csv.text);
  assert(header.join(',') === columns.join(','), `the CSV's header row: ${header}`);
  assert(records.length === entries.length, `a row per entry: ${records.length} rows, ${entries.length} entries`);
  records.forEach((record, i) => {
    const entry = Object.fromEntries(columns.map((c) => [c, String(entries[i][c] ?? '')]));
    assert(JSON.stringify(record) === JSON.stringify(columns.map((c) => entry[c])), `row ${i + 1} is the entry: ${record} vs ${JSON.stringify(entry)}`);
  });
  assert(records.some((r) => r[4] === 'create_workload' && r[6] === id && r[7] === 'ok'), 'the CSV has the launch');
  assert(records.some((r) => r[4] === 'get_workload' && r[6] === nobody && r[7] === 'not_found'), 'the CSV has the refused read');
  const ndjson = await downloaded(page, page.getByRole('button', { name: 'Download NDJSON', exact: true }));
  assert(/\.ndjson$/.test(ndjson.name), `the NDJSON's name: ${ndjson.name}`);
  const objects = ndjson.text.split('\n').filter(Boolean).map((line) => JSON.parse(line));
  assert(JSON.stringify(objects) === JSON.stringify(entries), `the NDJSON is every entry: ${objects.length} lines, ${entries.length} entries`);

  // Someone who isn't the owner is refused: the page says what the API said.
  const forbidden = {
    error: { code: 'forbidden', message: 'only the tenant owner reads its activity (the test says)', request_id: 'req-browser-test-2' },
  };
  await page.route(/\/v1\/activity\?/, (route) =>
    route.fulfill({ status: 403, contentType: 'application/json', body: JSON.stringify(forbidden) }));
  expectedFailure = '/v1/activity';
  await nav(page, 'Usage');
  await nav(page, 'Activity');
  const alert = page.getByRole('alert').filter({ hasText: 'the test says' });
  await alert.waitFor();
  assert(/Request ID:\s*req-browser-test-2/.test(await alert.textContent()), 'the refusal names its request ID');
  assert((await page.getByRole('table').count()) === 0 || !(await page.getByRole('table').isVisible()), 'no table when refused');
  await page.unroute(/\/v1\/activity\?/);
  expectedFailure = null;
}

/**
 * Hides the tab (`visible` false) or shows it again, as the page sees it: `document.hidden`
 * and `visibilityState` (headless Chromium's tab is always visible), and the event.
 */
async function setVisible(page, visible) {
  await page.evaluate((shown) => {
    if (shown) {
      delete document.hidden;
      delete document.visibilityState;
    } else {
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
    }
    document.dispatchEvent(new Event('visibilitychange'));
  }, visible);
}

/**
 * The banner of what is down, on the page shown: a role the API reports unhealthy is named
 * with what it means, and goes when the real (healthy) answer is back; a hidden tab asks
 * nothing, showing it again asks at once; the gateway's 503 `unavailable` shows the API's
 * wording after two failed asks in a row, one failed ask shows nothing; a gateway that can't
 * be reached shows "Can't reach Einsora". Screenshots of the page with the banner.
 */
async function statusBanner(page, screenshot) {
  const real = await api('GET', '/v1/status');
  const down = real.roles.filter((r) => !r.healthy);
  assert(down.length === 0, `every role of this einsora up is healthy: ${JSON.stringify(down)}`);
  assert(real.roles.some((r) => r.name === 'controller'), `the status names the controller: ${JSON.stringify(real.roles)}`);
  const live = page.locator('#health');
  assert((await live.getAttribute('role')) === 'status' && (await live.getAttribute('aria-live')) === 'polite', 'the banner is a polite live region');
  const order = await page.evaluate(() => {
    const health = document.getElementById('health');
    return health?.previousElementSibling?.id === 'top' && health.nextElementSibling?.id === 'main';
  });
  assert(order, 'the banner sits between the header and the page');
  const banner = live.locator('.health-banner');
  assert((await banner.count()) === 0, `no banner while all is well: ${await live.textContent()}`);
  // Whether a banner showed at all from here on (a flash between two looks counts).
  await page.evaluate(() => {
    window.__einsoraBanner = 0;
    window.__einsoraBannerWatch?.disconnect();
    window.__einsoraBannerWatch = new MutationObserver(() => {
      if (document.querySelector('#health .health-banner')) window.__einsoraBanner++;
    });
    window.__einsoraBannerWatch.observe(document.getElementById('health'), { childList: true, subtree: true });
  });
  const flashes = () => page.evaluate(() => window.__einsoraBanner);

  // The controller down: the real answer, that role changed.
  let asks = 0;
  await page.route(`${DASHBOARD}/v1/status`, async (route) => {
    asks++;
    const answer = await route.fetch();
    const status = await answer.json();
    status.roles = status.roles.map((r) => (r.name === 'controller' ? { ...r, healthy: false, detail: 'not answering' } : r));
    return route.fulfill({ response: answer, json: status });
  });
  await setVisible(page, false);
  await sleep(1000);
  assert(asks === 0, `a hidden tab asks nothing: ${asks} asks`);
  // Visible again: asked at once, not at the next 15 s.
  const shownAt = Date.now();
  await setVisible(page, true);
  await banner.filter({ hasText: 'The controller isn\'t answering' }).waitFor({ timeout: 5000 });
  const said = (await banner.textContent()).replace(/\s+/g, ' ').trim();
  log(`  banner after ${Date.now() - shownAt} ms: ${said}`);
  assert(said === 'The controller isn\'t answering: workloads won\'t start or stop until it\'s back.', `the banner says what is down and what it means: ${said}`);
  assert(await banner.isVisible(), 'the banner is shown');
  await screenshot('status-banner');

  // The real answer again: the banner goes.
  await page.unroute(`${DASHBOARD}/v1/status`);
  await setVisible(page, false);
  await setVisible(page, true);
  await banner.waitFor({ state: 'detached', timeout: 5000 });
  assert((await live.textContent()) === '', 'nothing left in the live region');

  // The gateway answers 503 once: asked again 3 s later, answered, no banner.
  const unavailable = {
    error: { code: 'unavailable', message: 'the service is unavailable right now; try again shortly', request_id: 'req-browser-test-3' },
  };
  expectedFailure = '/v1/status';
  asks = 0;
  await page.route(`${DASHBOARD}/v1/status`, (route) =>
    ++asks === 1
      ? route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify(unavailable) })
      : route.fallback());
  await page.evaluate(() => {
    window.__einsoraBanner = 0;
  });
  await setVisible(page, false);
  await setVisible(page, true);
  await waitFor('the failed ask, then one more', async () => asks >= 2, 10_000);
  await sleep(500);
  assert((await flashes()) === 0, 'one failed ask shows no banner');
  await page.unroute(`${DASHBOARD}/v1/status`);

  // 503 every time: the API-down wording, with the request ID, after the second.
  asks = 0;
  await page.route(`${DASHBOARD}/v1/status`, (route) => {
    asks++;
    return route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify(unavailable) });
  });
  await setVisible(page, false);
  await setVisible(page, true);
  await waitFor('the first failed ask', async () => asks >= 1, 5000);
  await sleep(300);
  assert((await flashes()) === 0, 'no banner after the first failed ask');
  const apiDown = banner.filter({ hasText: 'Einsora\'s API isn\'t answering' });
  await apiDown.waitFor({ timeout: 10_000 });
  assert(asks >= 2, `the banner came after a second ask: ${asks} asks`);
  const apiSaid = (await apiDown.textContent()).replace(/\s+/g, ' ').trim();
  assert(/Request ID: req-browser-test-3/.test(apiSaid), `the banner names the request ID: ${apiSaid}`);
  await page.unroute(`${DASHBOARD}/v1/status`);

  // Nothing answers at all, twice: can't reach Einsora.
  await page.route(`${DASHBOARD}/v1/status`, (route) => route.abort('connectionrefused'));
  await setVisible(page, false);
  await setVisible(page, true);
  await banner.filter({ hasText: 'Can\'t reach Einsora' }).waitFor({ timeout: 10_000 });
  await page.unroute(`${DASHBOARD}/v1/status`);

  // All well again.
  await setVisible(page, false);
  await setVisible(page, true);
  await banner.waitFor({ state: 'detached', timeout: 5000 });
  expectedFailure = null;
  await page.evaluate(() => window.__einsoraBannerWatch.disconnect());
}

/**
 * Opens `url` in `page` (a context the watchers don't follow) until the page headed `name`
 * shows: a load this host's changing network aborted (see `networkChanged`) is tried again, at
 * most three times, and says so.
 */
async function openTo(page, url, name) {
  for (let tries = 1; ; tries++) {
    await page.goto(url).catch((error) => log(`loading ${new URL(url).pathname} failed: ${error.message}`));
    try {
      await heading(page, name).waitFor({ timeout: 15_000 });
      return;
    } catch (error) {
      if (tries === 3) throw error;
      log(`no "${name}" page after loading it (try ${tries}); again`);
    }
  }
}

/**
 * The owner invites someone on the Users page; the link, opened in a browser of the invitee's
 * own (another profile: no cookie of the owner's), makes their account; they sign in as a
 * member (no invite form, no admin actions); the owner disables them, and their next page is
 * the sign-in page.
 */
async function usersPage(browser, page, result, screenshot) {
  await nav(page, 'Users');
  await page.waitForURL(/\/users$/);
  await heading(page, 'Users').waitFor();
  const email = `member-${Date.now()}@example.com`;
  await page.getByLabel('Their email', { exact: true }).fill(email);
  await page.getByRole('button', { name: 'Create invite link', exact: true }).click();
  const link = await waitFor('the invite link', async () => page.locator('code.link').textContent());
  assert(/^http:\/\/[^/]+\/#\/invite\/[0-9a-f]{64}$/.test(link), `an invite link into the dashboard: ${link}`);
  await page.getByRole('row').filter({ hasText: email }).first().waitFor();
  await screenshot('users');

  const theirs = await browser.newContext({ viewport: DESKTOP });
  const invitee = await theirs.newPage();
  invitee.setDefaultTimeout(30_000);
  await openTo(invitee, link, 'Join Einsora');
  assert(!invitee.url().includes('#'), `the secret leaves the address bar: ${invitee.url()}`);
  misfits.push(...(await shoot(invitee, SHOTS, 'join')));
  const password = 'a member password 123';
  await invitee.getByLabel('Your name', { exact: true }).fill('Member');
  await invitee.getByLabel('Password', { exact: true }).fill(password);
  await invitee.getByLabel('Password again', { exact: true }).fill(password);
  await invitee.getByRole('button', { name: 'Join', exact: true }).click();
  await invitee.waitForURL(/\/signin$/);
  await invitee.getByText(/Welcome to .*: sign in as /).waitFor();
  await invitee.getByLabel('Email', { exact: true }).fill(email);
  await invitee.getByLabel('Password', { exact: true }).fill(password);
  await invitee.getByRole('button', { name: 'Sign in', exact: true }).click();
  await invitee.waitForURL((url) => !url.pathname.startsWith('/signin'));
  await invitee.getByRole('link', { name: 'Users', exact: true }).click();
  await heading(invitee, 'Users').waitFor();
  await invitee.getByRole('row').filter({ hasText: EMAIL }).first().waitFor();
  assert(!(await invitee.getByRole('heading', { name: 'Invite someone' }).count()), 'a member has no invite form');
  assert(!(await invitee.getByRole('button', { name: 'Disable' }).count()), 'a member has no admin actions');
  // The link worked once: used again, it is refused, and the page says so.
  await openTo(invitee, link, 'Join Einsora');
  await invitee.getByLabel('Password', { exact: true }).fill(password);
  await invitee.getByLabel('Password again', { exact: true }).fill(password);
  await invitee.getByRole('button', { name: 'Join', exact: true }).click();
  await invitee.getByRole('alert').filter({ hasText: /unknown, used, revoked or expired/ }).waitFor();

  await reloadTo(page, 'Users');
  const row = page.getByRole('row').filter({ hasText: email }).first();
  await row.getByRole('button', { name: 'Disable', exact: true }).click();
  await row.getByText('Disabled').waitFor();
  await invitee.goto(`${DASHBOARD}/workloads`);
  await invitee.waitForURL(/\/signin$/);
  await theirs.close();
  result.member = email;
}

// ---- the run ----

async function main() {
  for (const stale of ['failure.png', 'failure.html']) fs.rmSync(path.join(SHOTS, stale), { force: true });
  const browser = await chromium();
  log(`Chromium ${browser.version()}, dashboard ${DASHBOARD}`);
  const context = await browser.newContext({ viewport: DESKTOP });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: DASHBOARD });
  // CSP violations, reported by the page itself (the browser also logs them as console errors).
  await context.exposeBinding('__einsoraViolation', ({ page }, text) => {
    if (isDashboard(page.url())) problems.push(`CSP violation on ${page.url()}: ${text}`);
  });
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__einsoraViolation(`${e.violatedDirective} blocked ${e.blockedURI} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  watch(context);
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  const result = {};
  const screenshot = async (name) => misfits.push(...(await shoot(page, SHOTS, name)));
  let step = 'start';
  const stepStart = (name) => {
    step = name;
    log(name);
  };

  try {
    stepStart('sign in: a wrong password is refused, then the keyboard signs in');
    await page.goto(`${DASHBOARD}/workloads`);
    await page.waitForURL(/\/signin$/);
    await heading(page, 'Sign in').waitFor();
    await screenshot('signin');
    await page.getByLabel('Email', { exact: true }).fill(EMAIL);
    await page.getByLabel('Password', { exact: true }).fill('not the password');
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: /\S/ }).waitFor();
    await page.getByLabel('Email', { exact: true }).fill('');
    await page.getByLabel('Password', { exact: true }).fill('');
    await page.getByLabel('Email', { exact: true }).focus();
    await page.keyboard.type(EMAIL);
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => document.activeElement?.getAttribute('type'));
    assert(focused === 'password', `Tab from Email goes to Password, not ${focused}`);
    await page.keyboard.type(PASSWORD);
    signedIn = true;
    await page.keyboard.press('Enter');
    await page.waitForURL((url) => !url.pathname.startsWith('/signin'));
    await page.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
    const cookies = await context.cookies(DASHBOARD);
    const session = cookies.find((c) => c.name === SESSION_COOKIE);
    assert(session && session.httpOnly && session.sameSite === 'Strict', `an HttpOnly, SameSite=Strict session cookie: ${JSON.stringify(session)}`);
    assert(session.domain === new URL(DASHBOARD).hostname, `the session cookie is host-only: ${session.domain}`);

    stepStart('workloads: the empty list');
    await nav(page, 'Workloads');
    await page.waitForURL(/\/workloads$/);
    await heading(page, 'Workloads').waitFor();
    await page.getByRole('table').waitFor();
    await screenshot('workloads');

    stepStart('status: a banner while a part of Einsora is down, gone when it is back');
    await statusBanner(page, screenshot);

    stepStart('launch: a notebook from the form, its failure shown with a request ID first');
    await nav(page, 'Launch');
    await page.waitForURL(/\/launch$/);
    await heading(page, 'Launch').waitFor();
    await page.getByLabel('Kind', { exact: true }).selectOption('notebook');
    // The fallback opt-in: a GPU class may fall back to CPU after the minutes given (sent in
    // the refused launch below); a CPU class can't.
    await page.getByLabel('Class', { exact: true }).selectOption('l40s-48gb');
    await page.getByLabel('Image', { exact: true }).selectOption('jupyterlab');
    const fallbackBox = page.getByLabel('If no l40s-48gb has room, run it on CPU instead', { exact: true });
    await fallbackBox.check();
    await page.getByLabel('Minutes to wait for the class first', { exact: true }).fill('5');
    await page.getByLabel('Name', { exact: true }).fill('nb-browser');
    await screenshot('launch');
    const refusal = {
      error: { code: 'quota_exceeded', message: 'the test says no', request_id: 'req-browser-test-1' },
    };
    /** @type {unknown} */
    let refusedBody = null;
    await page.route(`${DASHBOARD}/v1/workloads`, (route) => {
      if (route.request().method() !== 'POST') return route.fallback();
      refusedBody = route.request().postDataJSON();
      return route.fulfill({ status: 409, contentType: 'application/json', body: JSON.stringify(refusal) });
    });
    expectedFailure = '/v1/workloads';
    await page.getByRole('button', { name: 'Launch', exact: true }).click();
    const alert = page.getByRole('alert').filter({ hasText: 'the test says no' });
    await alert.waitFor();
    const alertText = await alert.textContent();
    assert(/Request ID:\s*req-browser-test-1/.test(alertText), `the error names its request ID: ${alertText}`);
    const sent = JSON.stringify(refusedBody);
    assert(
      sent.includes('"gpu_class":"l40s-48gb"') && sent.includes('"fallback":["cpu"]') && sent.includes('"fallback_after_s":300'),
      `the launch asked for the CPU fallback after 5 minutes: ${sent}`,
    );
    await page.unroute(`${DASHBOARD}/v1/workloads`);
    expectedFailure = null;
    await page.getByLabel('Class', { exact: true }).selectOption('cpu-1c-2g');
    await page.getByLabel('Image', { exact: true }).selectOption('jupyterlab');
    const cpuBox = page.locator('#launch-fallback');
    assert(await cpuBox.isDisabled() && !(await cpuBox.isChecked()), 'a CPU class has no CPU fallback');
    const fallbackHint = await page.locator('#launch-fallback-hint').textContent();
    assert(fallbackHint === 'Unavailable: it is a CPU class already.', `the opt-in says why not: ${fallbackHint}`);
    await page.getByRole('button', { name: 'Launch', exact: true }).click();
    await page.waitForURL(/\/workloads\/[0-9a-f-]{36}$/);
    const id = new URL(page.url()).pathname.split('/').pop();
    result.notebook = id;
    log(`notebook ${id}`);

    stepStart('the workload page: it reaches running without a reload');
    await heading(page, 'nb-browser').waitFor();
    await heading(page, 'Timeline').waitFor();
    const seen = await watchState(page, 'running');
    log(`states seen: ${seen.join(' → ')}`);
    assert(seen.length > 1, `a state before running was shown, then running: ${seen}`);
    assert((await fieldText(page, 'Requested class')) === 'cpu-1c-2g', 'requested class');
    assert((await fieldText(page, 'Placed class')) === 'cpu-1c-2g', 'placed class');
    assert((await fieldText(page, 'Region')) === 'local', 'region');
    assert((await fieldText(page, 'Driver')) === 'docker', 'driver');
    assert((await fieldText(page, 'Machine')) !== '', 'a machine');
    const timeline = page.locator('xpath=//*[self::h2 or self::h3][normalize-space()="Timeline"]/following::ol[1]/li');
    await waitFor('a timeline ending with running (newest last)', async () =>
      (await timeline.count()) >= 2 && /^\s*running/.test(await timeline.last().textContent({ timeout: 2000 })));
    await screenshot('workload');
    await reloadTo(page, 'nb-browser'); // the route survives a refresh

    stepStart('open: the link lands on the notebook\'s own origin and JupyterLab loads');
    const notebookOrigin = `http://w-${id}.localhost:${ACCESS_PORT}`;
    const popup = context.waitForEvent('page');
    await page.getByRole('button', { name: 'Open', exact: true }).click();
    const lab = await popup;
    await lab.waitForURL((url) => url.origin === notebookOrigin && !url.pathname.startsWith('/_einsora/'), { timeout: 60_000 });
    assert(
      notebookRequests.some((u) => u.startsWith(`${notebookOrigin}/_einsora/open?ticket=`)),
      `the link was ${notebookOrigin}/_einsora/open?ticket=…: ${notebookRequests.slice(0, 3)}`,
    );
    await waitFor('JupyterLab\'s title', async () => /JupyterLab/.test(await lab.title()), 60_000);
    await lab.locator('.jp-LabShell').first().waitFor({ timeout: 120_000 });
    // The offline image asks nothing it can't answer: no "Jupyter news" prompt.
    const disabled = await lab.evaluate(() => JSON.parse(document.getElementById('jupyter-config-data')?.textContent ?? '{}').disabledExtensions ?? []);
    assert(
      disabled.includes('@jupyterlab/apputils-extension:announcements'),
      `the news prompt's plugin is off in the image: disabledExtensions ${JSON.stringify(disabled)}`,
    );
    await lab.locator('.jp-Launcher').first().waitFor({ timeout: 60_000 });
    const news = await lab.getByText(/Jupyter news/i).count();
    assert(news === 0, `no "Jupyter news" prompt once JupyterLab has loaded (found ${news})`);
    // The browser's own cookie matching (Playwright's context.cookies(url) ignores host-only).
    const cdp = await context.newCDPSession(lab);
    const cookiesFor = async (url) => (await cdp.send('Network.getCookies', { urls: [url] })).cookies;
    const labCookies = await cookiesFor(`${notebookOrigin}/`);
    const access = labCookies.find((c) => c.name === ACCESS_COOKIE);
    assert(access && access.domain === `w-${id}.localhost` && access.httpOnly, `the access cookie is the notebook host's alone: ${JSON.stringify(labCookies)}`);
    assert(!labCookies.some((c) => c.name === SESSION_COOKIE), `the session cookie is not the notebook's: ${JSON.stringify(labCookies)}`);
    const dashboardCookies = await cookiesFor(`${DASHBOARD}/`);
    assert(dashboardCookies.some((c) => c.name === SESSION_COOKIE), 'the dashboard has its session cookie');
    assert(!dashboardCookies.some((c) => c.name === ACCESS_COOKIE), 'the access cookie is not the dashboard\'s');
    await cdp.detach();

    stepStart('other sites: fetch, form POST and WebSocket against the API with the session live');
    const before = await snapshot(id);
    const server = await elsewhere();
    const port = server.address().port;
    const origins = [
      [`http://localhost:${port}`, 'localhost (same site, other port)'],
      [`http://127.0.0.1:${port}`, '127.0.0.1 (another site)'],
    ];
    const outcomes = {};
    for (const [origin, label] of origins) {
      const other = await context.newPage();
      attackers.set(other, label);
      await other.goto(`${origin}/`);
      outcomes[label] = await other.evaluate(attack, { dashboard: DASHBOARD, workload: id });
      await other.close();
    }
    attackers.set(lab, 'the notebook\'s origin');
    outcomes['the notebook\'s origin'] = await lab.evaluate(attack, { dashboard: DASHBOARD, workload: id });
    attackers.delete(lab);
    server.close();
    await Promise.all(pending);
    await sleep(1500); // anything that did get through has been recorded by now
    for (const [label, got] of Object.entries(outcomes)) log(`  from ${label}: ${JSON.stringify(got)}`);
    const after = await snapshot(id);
    assert(JSON.stringify(after) === JSON.stringify(before), `no effect: before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`);
    for (const [label, got] of Object.entries(outcomes)) {
      for (const read of ['read tokens', 'read me']) {
        assert(got[read].startsWith('refused'), `${label} can't read ${read}: ${got[read]}`);
      }
      assert(got.websocket !== 'open', `${label}: no WebSocket to the API`);
    }
    // Playwright shows the Cookie header of a request Chromium sent only if the request got
    // its extra info: form posts (navigations) always do, fetches that CORS failed may not.
    const reached = (label) => attackRequests.filter(([l]) => l === label);
    for (const [, label] of [...origins, [null, 'the notebook\'s origin']]) {
      const all = reached(label);
      const withSession = all.filter(([, , , session]) => session).map(([, m, u]) => `${m} ${new URL(u).pathname}`);
      log(`  from ${label}: ${all.length} requests reached the gateway, seen with the session cookie: ${withSession.join(', ') || 'none'}`);
    }
    assert(
      reached(origins[0][1]).some(([, method, , session]) => method === 'POST' && session),
      'the same-site attacks did reach the gateway with the session cookie (so the refusals are the gateway\'s)',
    );
    for (const label of [origins[1][1], 'the notebook\'s origin']) {
      // Form posts always reach the gateway: the attacks were made and seen.
      assert(reached(label).length > 0, `the attacks from ${label} reached the gateway`);
      assert(!reached(label).some(([, , , session]) => session), `no request from ${label} carried the session cookie`);
    }
    await reloadTo(page, 'nb-browser'); // still signed in

    stepStart('logs: what the notebook printed, followed live; scrolling up stops following; Download');
    await logsTab(page, lab, screenshot);
    await lab.close();

    stepStart('workloads: the list follows the workload live; filters');
    await nav(page, 'Workloads');
    await page.waitForURL(/\/workloads$/);
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'nb-browser', exact: true }) });
    await waitFor('the row to say running', async () => /running/i.test(await row.textContent({ timeout: 2000 })));
    const link = await row.getByRole('link', { name: 'nb-browser', exact: true }).getAttribute('href');
    assert(link === `/workloads/${id}`, `the name links to its page: ${link}`);
    await page.evaluate(() => {
      window.__einsoraNoReload = true;
    });
    await api('POST', `/v1/workloads/${id}/stop`, {});
    await waitFor('the row to say stopped', async () => /stopped/i.test(await row.textContent({ timeout: 2000 })), 60_000);
    assert(await page.evaluate(() => window.__einsoraNoReload === true), 'the list was reloaded');
    await page.getByLabel('Kind', { exact: true }).selectOption('endpoint');
    await row.waitFor({ state: 'detached' });
    await page.getByLabel('Kind', { exact: true }).selectOption({ index: 0 });
    await row.waitFor();
    await page.getByLabel('State', { exact: true }).selectOption('running');
    await row.waitFor({ state: 'detached' });
    await page.getByLabel('State', { exact: true }).selectOption('stopped');
    await row.waitFor();
    await page.getByLabel('State', { exact: true }).selectOption({ index: 0 });

    stepStart('the workload page: start, stop, delete (cancelled once) with the states live');
    await row.getByRole('link', { name: 'nb-browser', exact: true }).click();
    await page.waitForURL(`${DASHBOARD}/workloads/${id}`);
    await heading(page, 'nb-browser').waitFor();
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    log(`  start: ${(await watchState(page, 'running')).join(' → ')}`);
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    log(`  stop: ${(await watchState(page, 'stopped', 60_000)).join(' → ')}`);
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await inDialog(page, 'Cancel');
    await sleep(500);
    assert((await api('GET', `/v1/workloads/${id}`)).state === 'stopped', 'Cancel deletes nothing');
    await page.getByRole('button', { name: 'Delete', exact: true }).click();
    await inDialog(page, 'Delete');
    await waitFor('the workload to be deleted', async () =>
      (await api('GET', `/v1/workloads/${id}?include_deleted=true`)).state === 'deleted', 60_000);
    if (new URL(page.url()).pathname === `/workloads/${id}`) {
      log(`  delete: ${(await watchState(page, 'deleted', 30_000)).join(' → ')}`);
    }

    stepStart('workloads: a deleted one shows on request');
    await nav(page, 'Workloads');
    await heading(page, 'Workloads').waitFor();
    await page.getByRole('table').waitFor();
    // The list has loaded (its note no longer says so) before the row is looked for.
    await waitFor('the list to load', async () =>
      !/Loading/.test(await page.locator('main p.empty').textContent({ timeout: 2000 })));
    assert((await row.count()) === 0, 'a deleted workload is not listed');
    await page.getByRole('checkbox', { name: 'Show deleted', exact: true }).check();
    await row.waitFor();
    await page.getByRole('checkbox', { name: 'Show deleted', exact: true }).uncheck();

    stepStart('an endpoint: launched with its model, its base URL and a curl example to copy');
    await nav(page, 'Launch');
    await page.getByLabel('Kind', { exact: true }).selectOption('endpoint');
    await page.getByLabel('Class', { exact: true }).selectOption('cpu-1c-2g');
    await page.getByLabel('Image', { exact: true }).selectOption('openai-endpoint');
    await page.getByLabel('Name', { exact: true }).fill('llm-browser');
    // The form promises only what works: a file in the models directory, nothing downloaded.
    const modelHint = await page.locator('#launch-model-hint').textContent();
    assert(/models directory/.test(modelHint ?? '') && !/hugging ?face/i.test(modelHint ?? ''), `the model field's hint: ${modelHint}`);
    // It offers the model files this machine's agent validated: never one that isn't a model.
    const offered = await page.locator('#launch-models option').evaluateAll((options) => options.map((o) => o.getAttribute('value')));
    assert(offered.includes(MODEL), `the model field offers ${MODEL}: ${offered}`);
    assert(!offered.includes(NOT_A_MODEL), `a file that isn't a model is never offered: ${offered}`);
    assert(/Your machines offer/.test(modelHint ?? ''), `the hint says files are offered: ${modelHint}`);
    await page.getByLabel('Model', { exact: true }).fill(MODEL);
    // The name it serves its model under at the one base URL, and an idle time to park after.
    await page.getByLabel('Served as', { exact: true }).fill('tiny-browser');
    await page.getByLabel('Park after idle minutes', { exact: true }).fill('30');
    await page.getByRole('button', { name: 'Launch', exact: true }).click();
    await page.waitForURL(/\/workloads\/[0-9a-f-]{36}$/);
    const endpoint = new URL(page.url()).pathname.split('/').pop();
    result.endpoint = endpoint;
    await heading(page, 'llm-browser').waitFor();
    await page.getByText('after 30 min without requests', { exact: true }).waitFor();
    await watchState(page, 'running');
    const listed = await fetch(`http://localhost:${ACCESS_PORT}/v1/models`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    const served = ((await listed.json()).data ?? []).map((/** @type {any} */ m) => m.id);
    assert(served.includes('tiny-browser'), `the one base URL lists its served name: ${served}`);
    const base = `http://localhost:${ACCESS_PORT}/e/${endpoint}/v1`;
    await page.getByText(base, { exact: false }).first().waitFor();
    await page.getByRole('button', { name: 'Copy', exact: true }).click();
    const copied = await waitFor('the curl example on the clipboard', () => page.evaluate(() => navigator.clipboard.readText()), 5000);
    assert(copied.includes('curl') && copied.includes(base), `the copied example calls the endpoint: ${copied}`);
    assert(/Authorization: Bearer/i.test(copied), `it uses an API token: ${copied}`);
    assert(!/cookie|einsora_session/i.test(copied), `it never uses the cookie: ${copied}`);
    // A chat, whose tokens (as the engine counted them) the Usage page shows later.
    const chatted = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 }),
    });
    assert(chatted.status === 200, `the endpoint answers a chat: ${chatted.status}`);
    const spent = (await chatted.json()).usage;
    assert(spent && spent.prompt_tokens > 0, `the engine's usage: ${JSON.stringify(spent)}`);
    result.endpoint_usage = spent;

    stepStart('inference keys: one for this endpoint with a limit, shown once, used, revoked');
    await nav(page, 'Inference keys');
    await page.waitForURL(/\/keys$/);
    await heading(page, 'Inference keys').waitFor();
    const keyName = `browser-key-${Date.now()}`;
    await page.getByLabel('Key name', { exact: true }).fill(keyName);
    await page.getByLabel('Every endpoint I can use, those launched later too').uncheck();
    await page.getByLabel('llm-browser', { exact: true }).check();
    await page.getByLabel('Requests a minute', { exact: true }).first().fill('5');
    await page.getByRole('button', { name: 'Create key', exact: true }).click();
    const key = await waitFor('the new key', async () => /isk_[0-9A-Za-z]{32}/.exec(await page.locator('body').innerText())?.[0]);
    const withKey = await fetch(`${base}/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    assert(withKey.status === 200, `the shown key calls its endpoint: ${withKey.status}`);
    const limited = withKey.headers.get('x-ratelimit-limit-requests');
    assert(limited === '5', `its limit is on the answer: ${limited}`);
    const keyRow = page.getByRole('row').filter({ hasText: keyName });
    await keyRow.waitFor();
    await keyRow.getByText('llm-browser').waitFor();
    await keyRow.getByText('5 requests a minute').waitFor();
    await screenshot('keys');
    await nav(page, 'Workloads');
    await nav(page, 'Inference keys');
    await keyRow.waitFor();
    assert(!(await page.content()).includes(key), 'the key is shown once only');
    await keyRow.getByRole('button', { name: 'Revoke', exact: true }).click();
    await waitFor('the key to be refused', async () =>
      (await fetch(`${base}/models`, { headers: { Authorization: `Bearer ${key}` } })).status === 401);
    await api('DELETE', `/v1/workloads/${endpoint}`);

    stepStart('API tokens: create (shown once), use, revoke');
    await nav(page, 'API tokens');
    await page.waitForURL(/\/tokens$/);
    await heading(page, 'API tokens').waitFor();
    const name = `browser-${Date.now()}`;
    result.token_name = name;
    await page.getByLabel('Token name', { exact: true }).fill(name);
    await page.getByRole('button', { name: 'Create token', exact: true }).click();
    const shown = await waitFor('the new token', async () => /tsk_[0-9A-Za-z]{32}/.exec(await page.locator('body').innerText())?.[0]);
    const me = await fetch(`${API_URL}/v1/me`, { headers: { Authorization: `Bearer ${shown}` } });
    assert(me.status === 200, `the shown token works: ${me.status}`);
    const tokenRow = page.getByRole('row').filter({ hasText: name });
    await tokenRow.waitFor();
    await screenshot('tokens');
    await nav(page, 'Workloads');
    await nav(page, 'API tokens');
    await tokenRow.waitFor();
    assert(!(await page.content()).includes(shown), 'the token is shown once only');
    await tokenRow.getByRole('button', { name: 'Revoke', exact: true }).click();
    await waitFor('the token to be refused', async () =>
      (await fetch(`${API_URL}/v1/me`, { headers: { Authorization: `Bearer ${shown}` } })).status === 401);

    stepStart('machines: this machine; an enrolment token made and revoked');
    await nav(page, 'Machines');
    await page.waitForURL(/\/machines$/);
    await heading(page, 'Machines').waitFor();
    const machines = (await api('GET', '/v1/machines')).machines ?? [];
    assert(machines.length >= 1, 'this machine is enrolled');
    await page.getByRole('row').filter({ hasText: machines[0].name }).first().waitFor();
    await page.getByLabel('Machine name', { exact: true }).fill('lab-box');
    await page.getByRole('button', { name: 'Create enrolment token', exact: true }).click();
    const join = await waitFor('the join command with its token', async () =>
      /einsora agent join --token enr_[0-9A-Za-z]{32}/.exec(await page.locator('body').innerText())?.[0]);
    const enrolments = (await api('GET', '/v1/enrolment-tokens')).enrolment_tokens ?? [];
    const labBox = enrolments.find((t) => t.name === 'lab-box' && !t.revoked_at);
    assert(labBox, `the enrolment token exists: ${JSON.stringify(enrolments)}`);
    await screenshot('machines');
    await nav(page, 'Usage');
    await nav(page, 'Machines');
    await page.getByRole('row').filter({ hasText: 'lab-box' }).waitFor();
    assert(!(await page.content()).includes(join.split('--token ')[1]), 'the enrolment token is shown once only');
    await page.getByRole('row').filter({ hasText: 'lab-box' }).getByRole('button', { name: 'Revoke', exact: true }).click();
    await waitFor('the enrolment token to be revoked', async () => {
      const now = (await api('GET', '/v1/enrolment-tokens')).enrolment_tokens ?? [];
      const t = now.find((x) => x.id === labBox.id);
      assert(t, `revoked enrolment tokens stay listed: ${JSON.stringify(now)}`);
      return t.revoked_at;
    });

    stepStart('usage: the chart and the table of this run; grouped by class, its CSV; the endpoint\'s tokens');
    await nav(page, 'Usage');
    await page.waitForURL(/\/usage(\?.*)?$/);
    await heading(page, 'Usage').waitFor();
    const today = new Date();
    const pad = (n) => String(n).padStart(2, '0');
    const day = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
    const from = page.getByLabel('From', { exact: true });
    const to = page.getByLabel('To', { exact: true });
    const yesterday = day(new Date(today.getTime() - 86_400_000));
    const tomorrow = day(new Date(today.getTime() + 86_400_000));
    const type = await from.getAttribute('type');
    if (type === 'date') {
      await from.fill(yesterday);
      await to.fill(tomorrow);
    } else if (type === 'datetime-local') {
      await from.fill(`${yesterday}T00:00`);
      await to.fill(`${tomorrow}T00:00`);
    }
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    const chart = page.locator('svg[role="img"]');
    await chart.waitFor();
    const label = (await chart.getAttribute('aria-label')) ?? (await chart.locator('title').first().textContent().catch(() => ''));
    assert(label, 'the chart has an accessible name');
    await waitFor('a bar in the chart', async () => (await chart.locator('rect, path').count()) > 0);
    await page.getByRole('table').getByText('cpu-1c-2g').first().waitFor();
    await screenshot('usage');
    // Grouped by class: the period's report as a table, downloaded as CSV.
    await page.getByLabel('Group by', { exact: true }).selectOption('class');
    const report = page.getByRole('region', { name: 'Unit-hours by class' });
    await report.getByRole('row').filter({ hasText: 'cpu-1c-2g' }).first().waitFor();
    const usageCsv = await downloaded(page, page.getByRole('button', { name: 'Download CSV', exact: true }));
    assert(/^einsora-usage-by-class-[\d-]+-to-[\d-]+\.csv$/.test(usageCsv.name), `the report's CSV name: ${usageCsv.name}`);
    const [usageHeader, ...usageRows] = parseCsv(usageCsv.text);
    assert(
      usageHeader.join(',') === 'group_id,label,placed_class,workloads,seconds,unit_seconds,unit_hours',
      `the report's CSV header: ${usageHeader}`,
    );
    assert(
      usageRows.some((r) => r[0] === 'cpu-1c-2g' && r[2] === 'cpu-1c-2g' && Number(r[5]) > 0 && /^\d+\.\d{4}$/.test(r[6])),
      `the report's CSV has cpu-1c-2g's unit-hours: ${JSON.stringify(usageRows)}`,
    );
    // Tokens: the endpoint's chat, as its engine counted it (the proxy sends them every 5 s).
    await page.getByLabel('Group by', { exact: true }).selectOption('tokens-range');
    const tokens = page.getByRole('region', { name: 'Tokens by endpoint, key and user' });
    const endpointTokens = tokens.getByRole('row').filter({ hasText: result.endpoint });
    await waitFor('the endpoint\'s tokens on the Usage page', async () => {
      if (await endpointTokens.count()) return true;
      await page.getByRole('button', { name: 'Show', exact: true }).click();
      await sleep(1000);
      return false;
    });
    const cells = await endpointTokens.locator('td').allTextContents();
    const usage = result.endpoint_usage;
    assert(
      cells[0] === 'API token' && cells[2] === '1' && cells[3] === String(usage.prompt_tokens) && cells[4] === String(usage.completion_tokens),
      `the row says what the engine counted (${JSON.stringify(usage)}): ${JSON.stringify(cells)}`,
    );
    await screenshot('usage-tokens');

    stepStart('activity: the test\'s own actions and a refused call; filters, Load more, CSV and NDJSON');
    await activityPage(page, id, screenshot);

    stepStart('users: an invite link, joined from another browser; a member sees no admin tools; disabled, signed out');
    await usersPage(browser, page, result, screenshot);

    stepStart('quotas: a team, and a quota for it, shown with what it holds');
    await nav(page, 'Quotas');
    await page.waitForURL(/\/quotas$/);
    await heading(page, 'Quotas').waitFor();
    await page.getByLabel('Team name', { exact: true }).fill('ml');
    await page.getByRole('button', { name: 'Create team', exact: true }).click();
    await page.getByRole('row').filter({ hasText: 'ml' }).first().waitFor();
    await page.getByLabel('For', { exact: true }).selectOption('team');
    await page.getByLabel('Team or user', { exact: true }).selectOption({ label: 'ml' });
    await page.getByLabel('Class', { exact: true }).selectOption('cpu-1c-2g');
    await page.getByLabel('Limit', { exact: true }).fill('3');
    // A CPU class's row limits CPUs too.
    await page.getByLabel('CPUs', { exact: true }).fill('2');
    await page.getByRole('button', { name: 'Set quota', exact: true }).click();
    await page.getByRole('row').filter({ hasText: 'Team ml' }).filter({ hasText: 'cpu-1c-2g' }).filter({ hasText: 'of 2' }).waitFor();
    const quotas = (await api('GET', '/v1/quotas')).quotas ?? [];
    assert(
      quotas.some((q) => q.scope === 'team' && q.subject === 'ml' && q.limit === 3 && q.cpus === 2),
      `the team's quota: ${JSON.stringify(quotas)}`,
    );
    await screenshot('quotas');

    stepStart('sign out');
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    signedIn = false;
    await page.waitForURL(/\/signin$/);
    await page.goto(`${DASHBOARD}/tokens`);
    await page.waitForURL(/\/signin$/);
    assert(!(await context.cookies(DASHBOARD)).some((c) => c.name === SESSION_COOKIE && c.value), 'the session cookie is gone');

    stepStart('all along: no console error, exception or CSP violation; no session cookie on a notebook host');
    // The watchers see what they watch for: an image from another origin, which the policy
    // refuses, is reported as a violation and logged as a console error; then set aside.
    const probe = 'einsora-csp-probe';
    await page.evaluate((url) => {
      const img = document.createElement('img');
      img.src = url;
      document.body.append(img);
    }, `http://127.0.0.1:9/${probe}.png`);
    await waitFor('the probe reported as a CSP violation and a console error', () =>
      problems.some((p) => p.startsWith('CSP violation') && p.includes(probe))
      && problems.some((p) => p.startsWith('console error') && p.includes(probe)), 10_000);
    problems.splice(0, problems.length, ...problems.filter((p) => !p.includes(probe)));
    await Promise.all(pending);
    assert(notebookRequests.length > 10, `the notebook was used: ${notebookRequests.length} requests`);
    assert(leaks.length === 0, `the session cookie went to a notebook host: ${leaks.join(', ')}`);
    assert(problems.length === 0, `the dashboard's console:\n  ${problems.join('\n  ')}`);
    assert(misfits.length === 0, `pages that don't fit the screen:\n  ${misfits.join('\n  ')}`);
    log(`${notebookRequests.length} requests to notebook hosts, none with the session cookie`);
    console.log(`RESULT ${JSON.stringify(result)}`);
  } catch (error) {
    console.error(`FAILED at "${step}": ${error.stack ?? error}`);
    if (problems.length) console.error(`console problems so far:\n  ${problems.join('\n  ')}`);
    if (misfits.length) console.error(`pages that don't fit so far:\n  ${misfits.join('\n  ')}`);
    try {
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, 'failure.png'), fullPage: true });
      fs.writeFileSync(path.join(SHOTS, 'failure.html'), await page.content());
      console.error(`the page then: ${page.url()} (failure.png, failure.html in ${SHOTS})`);
    } catch {
      // the page is gone; the error says enough
    }
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

await main();
