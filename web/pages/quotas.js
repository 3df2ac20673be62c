// Teams and quotas: every quota of the tenant, its teams and its users with what each holds
// now; owners and admins make teams and set quotas (a class's units: GPUs, or workloads for a
// CPU class; and for a CPU class, CPUs and GiB of memory). A create or start must fit the
// tenant's, the creator's team's and their own, every limit each states.

import { api } from '../api.js';
import { h, errorBox, field, select, setOptions, table } from '../dom.js';

const SCOPES = [
  { value: 'tenant', text: 'The whole tenant' },
  { value: 'team', text: 'A team' },
  { value: 'user', text: 'A user' },
];

/** @type {import('../app.js').Page['render']} */
export function render(main) {
  const rows = h('tbody');
  const teamRows = h('tbody');
  const problem = h('div', { class: 'problem' });
  const admin = h('div');
  let stopped = false;
  /** @type {any[]} */
  let teams = [];
  /** @type {any[]} */
  let users = [];

  async function refresh() {
    try {
      const [quotas, listedTeams, listedUsers] = await Promise.all([
        api.get('/v1/quotas'),
        api.get('/v1/teams'),
        api.get('/v1/users'),
      ]);
      if (stopped) return;
      teams = listedTeams.teams ?? [];
      users = listedUsers.users ?? [];
      draw(quotas.quotas ?? []);
      teamRows.replaceChildren(
        ...teams.map((t) => h('tr', {}, h('th', { scope: 'row' }, t.name), h('td', {}, String(t.members ?? 0)))),
      );
      subjects();
    } catch (error) {
      if (!stopped) problem.replaceChildren(errorBox(error));
    }
  }

  /**
   * CPUs or memory held, and the limit on them, as a cell says them: "4 of 8", "4" with no
   * limit, "-" for a row that counts none (a GPU class's, or nothing held).
   * @param {number | undefined | null} limit
   * @param {string | number | undefined} held
   */
  function ofLimit(limit, held) {
    if (limit !== undefined && limit !== null) return `${held ?? 0} of ${limit}`;
    return Number(held ?? 0) > 0 ? String(held) : '-';
  }

  /** @param {any[]} quotas */
  function draw(quotas) {
    rows.replaceChildren(
      ...quotas.map((q) => {
        const noLimit = [q.limit, q.cpus, q.memory_gib].every((l) => l === undefined || l === null);
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, q.scope === 'tenant' ? 'Tenant' : `${q.scope === 'team' ? 'Team' : 'User'} ${q.subject}`),
          h('td', {}, q.gpu_class === '*' ? 'every other class' : q.gpu_class),
          h('td', {}, noLimit ? 'unlimited' : q.limit === undefined || q.limit === null ? '-' : String(q.limit)),
          h('td', {}, String(q.held ?? 0)),
          h('td', {}, ofLimit(q.cpus, q.held_cpus)),
          h('td', {}, ofLimit(q.memory_gib, q.held_memory_gib)),
        );
      }),
    );
  }

  const scope = select('quota-scope', SCOPES, 'team');
  const subject = select('quota-subject', [], '');
  const subjectField = field('Team or user', subject);
  const klass = select('quota-class', [], '');
  const limit = h('input', { id: 'quota-limit', name: 'limit', inputmode: 'numeric', autocomplete: 'off' });
  const cpus = h('input', { id: 'quota-cpus', name: 'cpus', inputmode: 'numeric', autocomplete: 'off' });
  const memory = h('input', { id: 'quota-memory', name: 'memory_gib', inputmode: 'numeric', autocomplete: 'off' });
  // CPUs and memory limit CPU classes only: their fields show for one.
  const cpuFields = h(
    'div',
    { class: 'stack' },
    field('CPUs', cpus, 'The CPUs its workloads of this class may hold at once. Empty: no limit.'),
    field('Memory (GiB)', memory, 'The memory its workloads of this class may hold at once. Empty: no limit.'),
  );
  /** @type {Set<string>} */
  let cpuClasses = new Set();
  function classFields() {
    cpuFields.hidden = !cpuClasses.has(klass.value);
    if (cpuFields.hidden) {
      cpus.value = '';
      memory.value = '';
    }
  }
  klass.addEventListener('change', classFields);
  const submit = h('button', { type: 'submit' }, 'Set quota');
  const formProblem = h('div', { class: 'problem' });

  function subjects() {
    const options =
      scope.value === 'team'
        ? teams.map((t) => ({ value: t.id, text: t.name }))
        : users.map((u) => ({ value: u.id, text: u.email }));
    setOptions(subject, options, subject.value);
    subjectField.hidden = scope.value === 'tenant';
  }
  scope.addEventListener('change', subjects);

  const form = h(
    'form',
    { class: 'stack', novalidate: true },
    field('For', scope),
    subjectField,
    field('Class', klass),
    field('Limit', limit, 'In the class\u2019s units (GPUs; workloads for a CPU class). Empty: no limit.'),
    cpuFields,
    formProblem,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    formProblem.replaceChildren();
    const chosen = /** @type {'tenant' | 'team' | 'user'} */ (scope.value);
    /** @type {import('../api.js').Put['/v1/quotas']['body']} */
    const body = { scope: chosen, gpu_class: klass.value, subject_id: chosen === 'tenant' ? '' : subject.value };
    for (const [input, key, what] of /** @type {const} */ ([
      [limit, 'limit', 'The limit'],
      [cpus, 'cpus', 'The CPUs'],
      [memory, 'memory_gib', 'The memory'],
    ])) {
      const text = input.value.trim();
      if (!text) continue;
      if (!/^\d+$/.test(text)) {
        formProblem.replaceChildren(h('p', { role: 'alert' }, `${what} is a whole number, or empty for none.`));
        return;
      }
      body[key] = Number(text);
    }
    submit.disabled = true;
    try {
      const answer = await api.put('/v1/quotas', body);
      draw(answer.quotas ?? []);
      limit.value = '';
      cpus.value = '';
      memory.value = '';
    } catch (error) {
      formProblem.replaceChildren(errorBox(error));
    } finally {
      submit.disabled = false;
    }
  });

  const teamName = h('input', { id: 'team-name', name: 'team', required: true, autocomplete: 'off', maxlength: 64 });
  const teamForm = h(
    'form',
    { class: 'stack', novalidate: true },
    field('Team name', teamName),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Create team')),
  );
  teamForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    formProblem.replaceChildren();
    try {
      await api.post('/v1/teams', { name: teamName.value.trim() });
      teamName.value = '';
      await refresh();
    } catch (error) {
      formProblem.replaceChildren(errorBox(error));
    }
  });

  main.append(
    h('h1', { tabindex: -1 }, 'Quotas'),
    h(
      'p',
      {},
      'A launch or start must fit the tenant\u2019s quota for its class, its creator\u2019s team\u2019s and its creator\u2019s own. Put users in teams on the Users page.',
    ),
    admin,
    problem,
    table('Quotas', ['Whose', 'Class', 'Limit', 'Held now', 'CPUs (held of limit)', 'Memory GiB (held of limit)'], rows),
    h('h2', {}, 'Teams'),
    table('Teams', ['Team', 'Members'], teamRows),
  );
  Promise.all([api.get('/v1/me'), api.get('/v1/catalog')]).then(([me, catalog]) => {
    if (stopped || (me.role !== 'owner' && me.role !== 'admin')) return;
    const classes = (catalog.classes ?? []).map((/** @type {any} */ c) => ({ value: c.name, text: c.name }));
    cpuClasses = new Set((catalog.classes ?? []).filter((/** @type {any} */ c) => c.accelerator === 'cpu').map((/** @type {any} */ c) => c.name));
    setOptions(klass, [...classes, { value: '*', text: 'every other class (the tenant only)' }], classes[0]?.value ?? '');
    classFields();
    admin.replaceChildren(
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'set-quota' },
        h('h2', { id: 'set-quota' }, 'Set a quota'),
        form,
        h('h2', {}, 'New team'),
        teamForm,
      ),
    );
    subjects();
  }, () => {});
  refresh();
  return () => {
    stopped = true;
  };
}
