// Building the page without HTML strings: every text goes in as text, never as markup, and
// no element gets a style attribute or an inline handler (the Content-Security-Policy forbids
// both).

/**
 * @typedef {string | number | Node | null | undefined | false} Leaf
 * @typedef {Leaf | Leaf[] | Leaf[][]} Child
 * @typedef {Record<string, unknown>} Attributes
 *   Attribute values: a string or number is set as is, `true` as an empty attribute, and
 *   `false`, `null` or `undefined` leave it out. A function under `onclick`, `onsubmit`, …
 *   becomes an event listener.
 */

/**
 * An HTML element.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attributes} [attributes]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

const SVG = 'http://www.w3.org/2000/svg';

/**
 * An SVG element.
 * @param {string} tag
 * @param {Attributes} [attributes]
 * @param {...Child} children
 * @returns {SVGElement}
 */
export function svg(tag, attributes = {}, ...children) {
  const element = /** @type {SVGElement} */ (document.createElementNS(SVG, tag));
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

/**
 * @param {Element} element
 * @param {Attributes} attributes
 */
function setAttributes(element, attributes) {
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'style') throw new Error('inline styles are refused by the CSP: use a class');
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), /** @type {EventListener} */ (value));
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
}

/**
 * @param {Node} parent
 * @param {Child[]} children
 */
export function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.appendChild(child);
    else parent.appendChild(document.createTextNode(String(child)));
  }
}

/**
 * An API error for people: its message and the request ID that finds it in the operator's
 * log, announced to screen readers as it appears.
 * @param {unknown} error
 * @returns {HTMLElement}
 */
export function errorBox(error) {
  const { message, requestId } = describe(error);
  return h(
    'div',
    { role: 'alert', class: 'error' },
    h('p', {}, message),
    requestId && h('p', { class: 'request-id' }, 'Request ID: ', h('code', {}, requestId)),
  );
}

/**
 * @param {unknown} error
 * @returns {{message: string, requestId: string}}
 */
export function describe(error) {
  if (error && typeof error === 'object' && 'message' in error) {
    const requestId = 'requestId' in error ? String(error.requestId || '') : '';
    return { message: String(error.message), requestId };
  }
  return { message: String(error), requestId: '' };
}

/**
 * A labelled form control: `<label for>` and the control, in a `.field`.
 * @param {string} label
 * @param {HTMLElement} control  must have an id
 * @param {Child} [hint]  a description, tied to the control by aria-describedby
 * @returns {HTMLElement}
 */
export function field(label, control, hint) {
  const hintId = hint ? `${control.id}-hint` : '';
  if (hintId) control.setAttribute('aria-describedby', hintId);
  return h(
    'div',
    { class: 'field' },
    h('label', { for: control.id }, label),
    control,
    hint ? h('p', { class: 'hint', id: hintId }, hint) : null,
  );
}

/**
 * A `<select>` of options.
 * @param {string} id
 * @param {{value: string, text: string, disabled?: boolean}[]} options
 * @param {string} selected
 * @returns {HTMLSelectElement}
 */
export function select(id, options, selected) {
  const control = h('select', { id, name: id });
  setOptions(control, options, selected);
  return control;
}

/**
 * Replaces a select's options, keeping `selected` if it can still be chosen, else the first
 * option that can.
 * @param {HTMLSelectElement} control
 * @param {{value: string, text: string, disabled?: boolean}[]} options
 * @param {string} selected
 */
export function setOptions(control, options, selected) {
  const usable = options.filter((o) => !o.disabled);
  const keep = usable.some((o) => o.value === selected) ? selected : (usable[0]?.value ?? '');
  control.replaceChildren(
    ...options.map((o) =>
      h('option', { value: o.value, disabled: Boolean(o.disabled) }, o.text),
    ),
  );
  control.value = keep;
}

/**
 * A table whose rows scroll sideways on narrow screens; the scrolling box is reachable by
 * keyboard.
 * @param {string} label  what the table holds, for its caption
 * @param {string[]} columns
 * @param {HTMLTableSectionElement} body
 * @returns {HTMLElement}
 */
export function table(label, columns, body) {
  return h(
    'div',
    { class: 'table-wrap', tabindex: 0, role: 'region', 'aria-label': label },
    h(
      'table',
      {},
      h('caption', { class: 'visually-hidden' }, label),
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
      body,
    ),
  );
}

/**
 * Asks before something that can't be undone, in a modal `<dialog>`; Cancel has the focus.
 * @param {{title: string, body: string, confirm: string}} text
 * @returns {Promise<boolean>}
 */
export function confirmDialog({ title, body, confirm }) {
  return new Promise((resolve) => {
    const titleId = `dialog-title-${Date.now()}`;
    /** @type {HTMLDialogElement} */
    const dialog = h('dialog', { 'aria-labelledby': titleId, class: 'confirm' });
    let answer = false;
    const close = (/** @type {boolean} */ yes) => {
      answer = yes;
      dialog.close();
    };
    dialog.append(
      h('h2', { id: titleId }, title),
      h('p', {}, body),
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'button', autofocus: true, onclick: () => close(false) }, 'Cancel'),
        h('button', { type: 'button', class: 'danger', onclick: () => close(true) }, confirm),
      ),
    );
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/**
 * A secret shown this once: what it is (`lead`, a paragraph or more), the text to copy (the
 * secret, or a command or link holding it) in a code block of `kind`, a Copy button, and
 * anything after.
 * @param {(Node | string)[]} lead
 * @param {string} text
 * @param {'token' | 'command' | 'link'} kind
 * @param {...(Node | string)} after
 * @returns {HTMLElement}
 */
export function shownOnce(lead, text, kind, ...after) {
  return h(
    'div',
    { role: 'status', class: 'secret' },
    ...lead,
    h('pre', {}, h('code', { class: kind }, text)),
    copyButton(() => text),
    ...after,
  );
}

/**
 * A "Copy" button for `text`, saying so in a live region when done.
 * @param {() => string} text
 * @param {string} [label]  its name for screen readers where a page has more than one ("Copy
 *   the command"); it starts with "Copy", the word on the button
 * @returns {HTMLElement}
 */
export function copyButton(text, label) {
  // aria-live rather than role=status: a page's one status (a new token) stays easy to find.
  const said = h('span', { 'aria-live': 'polite', class: 'copied' });
  const button = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      'aria-label': label,
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text());
          said.textContent = 'Copied';
        } catch {
          said.textContent = 'Copy failed: select the text and copy it';
        }
        setTimeout(() => {
          said.textContent = '';
        }, 3000);
      },
    },
    'Copy',
  );
  return h('span', { class: 'copy' }, button, said);
}

/**
 * Saves text as a file the browser downloads: a Blob behind an object URL, clicked through an
 * `<a download>` that is gone again at once (no inline script, nothing left in the page).
 * @param {string} name  the file's name
 * @param {BlobPart[]} parts  its text
 * @param {string} type  its media type
 */
export function saveFile(name, parts, type) {
  const href = URL.createObjectURL(new Blob(parts, { type }));
  const link = h('a', { href, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // The download has its own copy once it starts; a minute is ample.
  setTimeout(() => URL.revokeObjectURL(href), 60_000);
}
