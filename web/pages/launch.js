// Launch a workload from a form the catalog drives: a class or image that can't be chosen for
// the kind and region is disabled, and its option says why (the same rules the API checks).

import { api } from '../api.js';
import { h, errorBox, field, select, setOptions } from '../dom.js';
import { KINDS } from '../format.js';

/**
 * @typedef {{name: string, accelerator: string, devices: number, cpus: number, memory_gib: number, regions: string[]}} ComputeClass
 * @typedef {{name: string, kinds: string[], runtimes: {name: string, accelerators: string[]}[], classes: string[]}} Image
 * @typedef {{regions: {name: string, is_default: boolean}[], classes: ComputeClass[], images: Image[]}} Catalog
 */

/** @type {import('../app.js').Page['render']} */
export function render(main, _params, context) {
  const title = h('h1', { tabindex: -1 }, 'Launch');
  const status = h('p', {}, 'Loading the catalog…');
  main.append(title, status);
  let stopped = false;
  api.get('/v1/catalog').then(
    (catalog) => {
      if (!stopped) status.replaceWith(form(/** @type {Catalog} */ (catalog), context));
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
 * @param {Catalog} catalog
 * @param {import('../app.js').Context} context
 * @returns {HTMLElement}
 */
function form(catalog, context) {
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
  const model = h('input', { id: 'launch-model', name: 'model', autocomplete: 'off', spellcheck: 'false', maxlength: 256 });
  const keys = h('textarea', { id: 'launch-ssh-keys', name: 'ssh_authorized_keys', rows: 3, spellcheck: 'false' });
  const modelField = field(
    'Model',
    model,
    'A GGUF file in the models directory of the machine it runs on, by its path there (e.g. my-model.gguf or team/my-model.gguf). Nothing is downloaded.',
  );
  const keysField = field('SSH public keys', keys, 'Optional: one OpenSSH public key a line.');
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
    modelField.hidden = k !== 'endpoint';
    model.required = k === 'endpoint';
    keysField.hidden = k !== 'vm';
  }
  for (const control of [kind, region, gpuClass]) control.addEventListener('change', update);
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
    keysField,
    problem,
    h('div', { class: 'actions' }, submit),
  );
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    problem.replaceChildren();
    /** @type {Record<string, unknown>} */
    const body = {
      kind: kind.value,
      name: name.value.trim(),
      gpu_class: gpuClass.value,
      image: image.value,
      region: region.value,
    };
    if (kind.value === 'notebook') body.notebook = {};
    if (kind.value === 'endpoint') body.endpoint = { model: model.value.trim() };
    if (kind.value === 'vm') {
      const lines = keys.value.split('\n').map((l) => l.trim()).filter(Boolean);
      body.vm = lines.length ? { ssh_authorized_keys: lines } : {};
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
 * Why the image can't run on the class; empty if it can.
 * @param {Image} i
 * @param {ComputeClass} c
 */
function imageProblem(i, c) {
  if (i.classes.length > 0 && !i.classes.includes(c.name)) return `limited to ${i.classes.join(', ')}`;
  if (!i.runtimes.some((r) => r.accelerators.includes(c.accelerator))) return `no runtime for ${c.accelerator}`;
  return '';
}
