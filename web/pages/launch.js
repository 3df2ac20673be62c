// Launch a workload from a form the catalog drives: a class or image that can't be chosen for
// the kind and region is disabled, and its option says why (the same rules the API checks). An
// endpoint's model field offers the model files the caller's online machines report (their
// agents list the GGUF files in their models directories that validate). The fallback opt-in
// runs it on CPU (the API's `cpu`: the CPU class closest to the requested one) if its GPU class
// has no room after the minutes given; it is offered only where a CPU class can run the image.
// An endpoint may also be given the name it serves its model under, how many requests its
// engine serves at once, and an idle time after which it parks.

import { api } from '../api.js';
import { h, errorBox, field, select, setOptions } from '../dom.js';
import { KINDS, size } from '../format.js';

/**
 * @typedef {{name: string, accelerator: string, devices: number, cpus: number, memory_gib: number, regions: string[]}} ComputeClass
 * @typedef {{name: string, kinds: string[], runtimes: {name: string, accelerators: string[]}[], classes: string[]}} Image
 * @typedef {{regions: {name: string, is_default: boolean}[], classes: ComputeClass[], images: Image[]}} Catalog
 * @typedef {{path: string, size_bytes: string | number}} ModelFile
 * @typedef {{status: string, models?: ModelFile[]}} Machine
 */

/** @type {import('../app.js').Page['render']} */
export function render(main, _params, context) {
  const title = h('h1', { tabindex: -1 }, 'Launch');
  const status = h('p', {}, 'Loading the catalog…');
  main.append(title, status);
  let stopped = false;
  // Without the machines (an error reading them) the form still works: the model is typed.
  const machines = api.get('/v1/machines').then(
    (list) => /** @type {Machine[]} */ (list.machines ?? []),
    () => /** @type {Machine[]} */ ([]),
  );
  Promise.all([api.get('/v1/catalog'), machines]).then(
    ([catalog, list]) => {
      if (!stopped) status.replaceWith(form(/** @type {Catalog} */ (catalog), offeredModels(list), context));
    },
    (error) => {
      if (!stopped) status.replaceWith(errorBox(error));
    },
  );
  return () => {
    stopped = true;
  };
}

/**
 * The model files the online machines offer, each path once (the largest size if they differ),
 * sorted by path.
 * @param {Machine[]} machines
 * @returns {ModelFile[]}
 */
function offeredModels(machines) {
  /** @type {Map<string, ModelFile>} */
  const byPath = new Map();
  for (const m of machines) {
    if (m.status !== 'online') continue;
    for (const file of m.models ?? []) {
      const known = byPath.get(file.path);
      if (!known || Number(file.size_bytes) > Number(known.size_bytes)) byPath.set(file.path, file);
    }
  }
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * @param {Catalog} catalog
 * @param {ModelFile[]} models  what the model field offers
 * @param {import('../app.js').Context} context
 * @returns {HTMLElement}
 */
function form(catalog, models, context) {
  const imagesOf = (/** @type {string} */ kind) => catalog.images.filter((i) => i.kinds.includes(kind));
  const kind = select(
    'launch-kind',
    KINDS.map((k) => {
      const none = imagesOf(k).length === 0;
      return { value: k, text: none ? `${k} (no image in the catalog)` : k, disabled: none };
    }),
    'notebook',
  );
  const name = h('input', {
    id: 'launch-name',
    name: 'name',
    required: true,
    autocomplete: 'off',
    spellcheck: 'false',
    maxlength: 63,
  });
  const regions = catalog.regions.map((r) => ({ value: r.name, text: r.is_default ? `${r.name} (default)` : r.name }));
  const region = select('launch-region', regions, catalog.regions[0]?.name ?? '');
  const gpuClass = h('select', { id: 'launch-class', name: 'gpu_class' });
  const image = h('select', { id: 'launch-image', name: 'image' });
  const offered = h(
    'datalist',
    { id: 'launch-models' },
    ...models.map((m) => h('option', { value: m.path }, `${m.path} (${size(m.size_bytes)})`)),
  );
  const model = h('input', {
    id: 'launch-model',
    name: 'model',
    list: 'launch-models',
    autocomplete: 'off',
    spellcheck: 'false',
    maxlength: 256,
  });
  const keys = h('textarea', { id: 'launch-ssh-keys', name: 'ssh_authorized_keys', rows: 3, spellcheck: 'false' });
  const found = models.length
    ? `Your machines offer ${models.length === 1 ? 'one' : models.length}: pick ${models.length === 1 ? 'it' : 'one'} from the list, or type another's path.`
    : 'None of your machines offers one yet: put a GGUF file in its models directory (EINSORA_MODELS_DIR) and it is listed here within a minute.';
  const modelField = field(
    'Model',
    model,
    `A GGUF file in the models directory of the machine it runs on, by its path there (e.g. my-model.gguf or team/my-model.gguf). Nothing is downloaded. ${found}`,
  );
  modelField.append(offered);
  const servedName = h('input', { id: 'launch-served-name', name: 'served_name', autocomplete: 'off', spellcheck: 'false', maxlength: 128 });
  const slots = h('input', { id: 'launch-slots', name: 'slots', type: 'number', min: 1, max: 64, step: 1 });
  const parkAfter = h('input', { id: 'launch-park-after', name: 'park_after_idle', type: 'number', min: 1, max: 10080, step: 1 });
  const endpointFields = h(
    'div',
    { class: 'stack' },
    field(
      'Served as',
      servedName,
      'The name clients send as "model" at the one base URL; endpoints serving one name are its replicas. Empty: the model file\u2019s name without .gguf.',
    ),
    field('Requests at once', slots, 'What its engine serves in parallel (1 to 64); more wait in its queue. Empty: 1.'),
    field('Park after idle minutes', parkAfter, 'It stops after this long without a request (1 to 10080), and the next request starts it again. Empty: it runs until stopped.'),
  );
  const keysField = field('SSH public keys', keys, 'Optional: one OpenSSH public key a line.');
  const fallback = h('input', { id: 'launch-fallback', name: 'fallback', type: 'checkbox' });
  const fallbackLabel = h('label', { for: fallback.id });
  const fallbackHint = h('p', { class: 'hint', id: 'launch-fallback-hint' });
  fallback.setAttribute('aria-describedby', fallbackHint.id);
  const fallbackAfter = h('input', {
    id: 'launch-fallback-after',
    name: 'fallback_after',
    type: 'number',
    min: 0,
    max: 10080,
    step: 1,
    value: 10,
  });
  const fallbackField = h(
    'div',
    { class: 'stack' },
    h('div', { class: 'field checkbox' }, fallback, fallbackLabel),
    field('Minutes to wait for the class first', fallbackAfter),
    fallbackHint,
  );
  const submit = h('button', { type: 'submit' }, 'Launch');
  const problem = h('div', { class: 'problem' });

  function update() {
    const k = kind.value;
    const r = region.value;
    const classes = catalog.classes.map((c) => {
      const why = classProblem(catalog, k, r, c);
      return { value: c.name, text: `${c.name} — ${describeClass(c)}${why ? ` (unavailable: ${why})` : ''}`, disabled: Boolean(why) };
    });
    setOptions(gpuClass, classes, gpuClass.value);
    const chosen = catalog.classes.find((c) => c.name === gpuClass.value);
    const images = imagesOf(k).map((i) => {
      const why = chosen ? imageProblem(i, chosen) : 'choose a class first';
      return { value: i.name, text: why ? `${i.name} (unavailable: ${why})` : i.name, disabled: Boolean(why) };
    });
    setOptions(image, images, image.value);
    const why = chosen ? fallbackProblem(catalog, r, chosen, catalog.images.find((i) => i.name === image.value)) : 'choose a class first';
    fallbackLabel.textContent = `If no ${chosen?.name ?? 'GPU'} has room, run it on CPU instead`;
    fallback.disabled = Boolean(why);
    if (why) fallback.checked = false;
    fallbackAfter.disabled = !fallback.checked;
    fallbackHint.textContent = why
      ? `Unavailable: ${why}.`
      : 'It keeps asking for its class until then, and its timeline says where it runs; usage is counted on the class it runs on.';
    modelField.hidden = k !== 'endpoint';
    endpointFields.hidden = k !== 'endpoint';
    model.required = k === 'endpoint';
    keysField.hidden = k !== 'vm';
  }
  for (const control of [kind, region, gpuClass, image, fallback]) control.addEventListener('change', update);
  update();

  const element = h(
    'form',
    { class: 'stack card', novalidate: true },
    field('Kind', kind),
    field('Name', name, 'Lowercase letters, digits and inner hyphens, starting with a letter; up to 63.'),
    field('Region', region),
    field('Class', gpuClass, 'The compute class it asks for; usage is counted by the class it runs on.'),
    field('Image', image),
    modelField,
    endpointFields,
    keysField,
    fallbackField,
    problem,
    h('div', { class: 'actions' }, submit),
  );
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    problem.replaceChildren();
    /** @type {import('../api.js').Post['/v1/workloads']['body']} */
    const body = {
      kind: /** @type {NonNullable<import('../api-types').Workload['kind']>} */ (kind.value),
      name: name.value.trim(),
      gpu_class: gpuClass.value,
      image: image.value,
      region: region.value,
    };
    if (kind.value === 'notebook') body.notebook = {};
    if (kind.value === 'endpoint') body.endpoint = endpointParams(model, servedName, slots, parkAfter);
    if (kind.value === 'vm') {
      const lines = keys.value.split('\n').map((l) => l.trim()).filter(Boolean);
      body.vm = lines.length ? { ssh_authorized_keys: lines } : {};
    }
    if (fallback.checked && !fallback.disabled) {
      body.fallback = ['cpu'];
      const minutes = Number(fallbackAfter.value);
      // Not a number of minutes: the API says what it takes.
      body.fallback_after_s = fallbackAfter.value.trim() === '' ? 0 : Number.isFinite(minutes) ? Math.round(minutes * 60) : -1;
    }
    submit.disabled = true;
    try {
      const workload = await api.post('/v1/workloads', body);
      context.navigate(`/workloads/${encodeURIComponent(workload.id)}`);
    } catch (error) {
      problem.replaceChildren(errorBox(error));
    } finally {
      submit.disabled = false;
    }
  });
  return element;
}

/**
 * An endpoint's parameters from its fields: what is left empty is the API's default, and what
 * isn't a whole number is sent as -1, for the API to say what it takes.
 * @param {HTMLInputElement} model
 * @param {HTMLInputElement} servedName
 * @param {HTMLInputElement} slots
 * @param {HTMLInputElement} parkAfter
 * @returns {import('../api-types').EndpointParamsInput}
 */
function endpointParams(model, servedName, slots, parkAfter) {
  /** @type {import('../api-types').EndpointParamsInput} */
  const params = { model: model.value.trim() };
  const whole = (/** @type {string} */ text) => (/^\d+$/.test(text) ? Number(text) : -1);
  if (servedName.value.trim()) params.served_name = servedName.value.trim();
  if (slots.value.trim()) params.slots = whole(slots.value.trim());
  if (parkAfter.value.trim()) {
    const minutes = whole(parkAfter.value.trim());
    params.park_after_idle_s = minutes < 0 ? -1 : minutes * 60;
  }
  return params;
}

/** @param {ComputeClass} c */
function describeClass(c) {
  const parts = [];
  if (c.accelerator !== 'cpu') parts.push(`${c.devices} ${c.accelerator} GPU${c.devices === 1 ? '' : 's'}`);
  parts.push(`${c.cpus} CPU${c.cpus === 1 ? '' : 's'}`, `${c.memory_gib} GiB`);
  return parts.join(', ');
}

/**
 * Why the class can't be chosen for this kind in this region; empty if it can.
 * @param {Catalog} catalog
 * @param {string} kind
 * @param {string} region
 * @param {ComputeClass} c
 */
function classProblem(catalog, kind, region, c) {
  if (c.regions.length > 0 && !c.regions.includes(region)) return `not offered in ${region}`;
  const runs = catalog.images.some((i) => i.kinds.includes(kind) && !imageProblem(i, c));
  return runs ? '' : `no ${kind} image runs on ${c.accelerator}`;
}

/**
 * Why it can't fall back to CPU; empty if it can: the class is a GPU class, and a CPU class
 * offered in the region runs the image.
 * @param {Catalog} catalog
 * @param {string} region
 * @param {ComputeClass} c
 * @param {Image | undefined} i
 */
function fallbackProblem(catalog, region, c, i) {
  if (c.accelerator === 'cpu') return 'it is a CPU class already';
  if (!i) return 'choose an image first';
  const cpu = catalog.classes.filter((k) => k.accelerator === 'cpu' && (k.regions.length === 0 || k.regions.includes(region)));
  return cpu.some((k) => !imageProblem(i, k)) ? '' : `no CPU class in ${region} runs ${i.name}`;
}

/**
 * Why the image can't run on the class; empty if it can.
 * @param {Image} i
 * @param {ComputeClass} c
 */
function imageProblem(i, c) {
  if (i.classes.length > 0 && !i.classes.includes(c.name)) return `limited to ${i.classes.join(', ')}`;
  if (!i.runtimes.some((r) => r.accelerators.includes(c.accelerator))) return `no runtime for ${c.accelerator}`;
  return '';
}
