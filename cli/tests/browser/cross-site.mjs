// The cross-site check of the dashboard's browser test: pages of other sites that try to use
// the dashboard's API with the browser's live session. `attack` runs inside such a page
// (Playwright's page.evaluate), so it uses nothing from this module's scope.

import http from 'node:http';

/** A page of another site: served by this script on another port of this machine. */
export function elsewhere() {
  const server = http.createServer((_, answer) => {
    answer.setHeader('Content-Type', 'text/html; charset=utf-8');
    answer.end('<!doctype html><title>Another site</title><p>Nothing to see here.</p>');
  });
  return new Promise((done) => server.listen(0, '127.0.0.1', () => done(server)));
}

/**
 * Runs in a page of another site while the dashboard's session is live: every way a page can
 * send a request to the dashboard's API. What each attempt got back, as far as the page can see.
 */
export async function attack({ dashboard, workload }) {
  const results = {};
  const attempt = async (name, run) => {
    try {
      results[name] = String(await run());
    } catch (e) {
      results[name] = `refused: ${e}`;
    }
  };
  const v1 = `${dashboard}/v1`;
  await attempt('read tokens', () => fetch(`${v1}/tokens`, { credentials: 'include' }).then((r) => r.text()));
  await attempt('read me', () => fetch(`${v1}/me`, { credentials: 'include' }).then((r) => r.text()));
  await attempt('create token (simple POST)', () =>
    fetch(`${v1}/tokens`, {
      method: 'POST',
      credentials: 'include',
      headers: { 'Content-Type': 'text/plain' },
      body: JSON.stringify({ name: 'attack-fetch' }),
    }).then((r) => r.status));
  await attempt('create token (JSON, guessed CSRF)', () =>
    fetch(`${v1}/tokens`, {
      method: 'POST',
      credentials: 'include',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': 'guessed' },
      body: JSON.stringify({ name: 'attack-json' }),
    }).then((r) => r.status));
  await attempt('stop (no-cors POST)', () =>
    fetch(`${v1}/workloads/${workload}/stop`, { method: 'POST', mode: 'no-cors', credentials: 'include', body: '' })
      .then((r) => r.type));
  await attempt('stop (beacon)', () => navigator.sendBeacon(`${v1}/workloads/${workload}/stop`, ''));
  await attempt('delete workload', () =>
    fetch(`${v1}/workloads/${workload}`, { method: 'DELETE', credentials: 'include' }).then((r) => r.status));
  await attempt('sign out', () =>
    fetch(`${v1}/sessions/current`, { method: 'DELETE', credentials: 'include' }).then((r) => r.status));
  await attempt('websocket', () => new Promise((done) => {
    const socket = new WebSocket(`${v1.replace(/^http/, 'ws')}/tokens`);
    socket.onopen = () => {
      socket.send(JSON.stringify({ name: 'attack-ws' }));
      done('open');
    };
    socket.onerror = () => done('error');
    socket.onclose = (e) => done(`closed ${e.code}`);
    setTimeout(() => done('no answer'), 5000);
  }));
  const forms = [
    // text/plain makes the body `{"name":"attack-form-=x"}`: JSON, as the API reads it.
    ['form: create token', `${v1}/tokens`, 'text/plain', { '{"name":"attack-form-': 'x"}' }],
    ['form: stop', `${v1}/workloads/${workload}/stop`, 'application/x-www-form-urlencoded', {}],
    ['form: sign out', `${v1}/sessions/current`, 'text/plain', {}],
  ];
  for (const [name, action, enctype, fields] of forms) {
    await attempt(name, () => new Promise((done) => {
      const sink = document.createElement('iframe');
      sink.name = `sink-${Math.random().toString(36).slice(2)}`;
      document.body.append(sink);
      const form = document.createElement('form');
      Object.assign(form, { method: 'POST', action, enctype, target: sink.name });
      for (const [key, value] of Object.entries(fields)) {
        const input = document.createElement('input');
        Object.assign(input, { type: 'hidden', name: key, value });
        form.append(input);
      }
      document.body.append(form);
      sink.onload = () => done('sent');
      form.submit();
      setTimeout(() => done('sent (no load)'), 3000);
    }));
  }
  return results;
}
