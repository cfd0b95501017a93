// The source viewer's original page: pdf.js renders one page of the cited PDF on a canvas, with its text layer
// (selectable, read by screen readers) on top, and marks the quoted lines there in <mark> elements.
//
// Contract for tests: the page is an element with data-page="N" holding its canvas; the marks are inside it.
// pdf.js runs without eval (isEvalSupported: false, under the site's CSP) and without its scripting sandbox or
// annotation layer, so a PDF's own JavaScript and links never run in the page.

const root = document.getElementById("original");
const frame = root.querySelector(".pdf-frame");
const status = root.querySelector(".pdf-status");
const where = root.querySelector(".pdf-where");
const buttons = Object.fromEntries([...root.querySelectorAll("button[data-action]")].map((b) => [b.dataset.action, b]));
const quote = JSON.parse(document.getElementById("original-quote").textContent);
const MIN_CHARS = 6; // a shorter line ("1", "V DC") is found anywhere: it is marked only as part of a longer run
const ZOOM_STEP = 1.25;

const state = { lib: null, doc: null, page: quote.page, zoom: "fit", scale: 1, shown: 0, width: 0, opened: false };

// Page text without white space, lower case, NFKC (ligatures apart): extraction and the text layer space words
// differently, so only the letters are compared. ``at[i]`` is the [item, offset] that flat character i came from.
function flatten(strings) {
  let flat = "";
  const at = [];
  strings.forEach((text, item) => {
    for (let offset = 0; offset < text.length; offset++) {
      if (/\s/.test(text[offset])) continue;
      for (const ch of text[offset].normalize("NFKC").toLowerCase()) {
        if (/\s/.test(ch)) continue;
        flat += ch;
        at.push([item, offset]);
      }
    }
  });
  return { flat, at };
}

const squeeze = (text) => flatten([text]).flat;

// The quote's ranges in the page's flat text: the whole quote at once when it stands there as extracted, else
// each line of it (in order), so a line lost or reordered by extraction does not hide the others.
function locate(flat) {
  const whole = squeeze(quote.lines.join(""));
  const start = whole ? flat.indexOf(whole) : -1;
  if (start >= 0) return { ranges: [[start, start + whole.length]], found: quote.lines.length };
  const ranges = [];
  let cursor = 0;
  let found = 0;
  for (const line of quote.lines) {
    const needle = squeeze(line);
    if (needle.length < MIN_CHARS) continue;
    let at = flat.indexOf(needle, cursor);
    if (at < 0) at = flat.indexOf(needle);
    if (at < 0) continue;
    ranges.push([at, at + needle.length]);
    cursor = at + needle.length;
    found += 1;
  }
  return { ranges, found };
}

const searchable = () => quote.lines.filter((line) => squeeze(line).length >= MIN_CHARS).length || 1;

// Wraps each located range in <mark> elements, one per text-layer span it crosses.
function mark(divs, at, ranges) {
  const spans = new Map();
  for (const [start, end] of ranges) {
    for (let i = start; i < end; i++) {
      const [item, offset] = at[i];
      const span = spans.get(item) || [Infinity, -1];
      spans.set(item, [Math.min(span[0], offset), Math.max(span[1], offset + 1)]);
    }
  }
  for (const [item, [from, to]] of spans) {
    const div = divs[item];
    const text = div.textContent;
    const marked = document.createElement("mark");
    marked.textContent = text.slice(from, to);
    div.replaceChildren(text.slice(0, from), marked, text.slice(to));
  }
  return spans.size;
}

const cited = (n) => n >= quote.pages[0] && n <= quote.pages[1];

// Of the pages the quote may stand on, the one where most of it is found (the first on a tie).
async function bestPage() {
  if (quote.pages[0] === quote.pages[1]) return quote.pages[0];
  let best = quote.pages[0];
  let most = 0;
  for (let n = quote.pages[0]; n <= Math.min(quote.pages[1], state.doc.numPages); n++) {
    const content = await (await state.doc.getPage(n)).getTextContent();
    const { found } = locate(flatten(content.items.map((item) => item.str || "")).flat);
    if (found > most) [best, most] = [n, found];
  }
  return best;
}

async function render(n) {
  const ticket = ++state.shown;
  const page = await state.doc.getPage(n);
  const natural = page.getViewport({ scale: 1 });
  state.width = frame.clientWidth;
  const scale = state.zoom === "fit" ? Math.max(0.25, (frame.clientWidth - 2) / natural.width) : state.zoom;
  const viewport = page.getViewport({ scale });
  const ratio = window.devicePixelRatio || 1;

  const holder = document.createElement("div");
  holder.className = "pdf-page";
  holder.dataset.page = String(n);
  holder.style.setProperty("--scale-factor", String(scale));
  holder.style.setProperty("--total-scale-factor", String(scale));
  holder.style.width = `${Math.floor(viewport.width)}px`;
  holder.style.height = `${Math.floor(viewport.height)}px`;
  const canvas = document.createElement("canvas");
  canvas.width = Math.floor(viewport.width * ratio);
  canvas.height = Math.floor(viewport.height * ratio);
  canvas.style.width = holder.style.width;
  canvas.style.height = holder.style.height;
  canvas.setAttribute("aria-hidden", "true"); // the text layer above it is what assistive technology reads
  const text = document.createElement("div");
  text.className = "textLayer";
  holder.append(canvas, text);

  const transform = ratio === 1 ? null : [ratio, 0, 0, ratio, 0, 0];
  await page.render({ canvasContext: canvas.getContext("2d"), canvas, viewport, transform }).promise;
  const layer = new state.lib.TextLayer({ textContentSource: page.streamTextContent(), container: text, viewport });
  await layer.render();
  if (ticket !== state.shown) return; // a later click asked for another page or zoom meanwhile

  let message = `Page ${n} is not one the passage is cited on (pages ${quote.pages[0]}–${quote.pages[1]}).`;
  if (quote.pages[0] === quote.pages[1]) message = `The passage is cited on page ${quote.pages[0]}.`;
  if (cited(n)) {
    const { flat, at } = flatten(layer.textContentItemsStr);
    const { ranges, found } = locate(flat);
    mark(layer.textDivs, at, ranges);
    const total = searchable();
    if (found >= total) message = "The quoted passage is highlighted on this page.";
    else if (found) message = `Part of the quoted passage is highlighted (${found} of ${total} lines found on this page).`;
    else message = "The quoted passage could not be located on this page (its text differs from the extracted text shown below), so nothing is highlighted.";
    holder.dataset.located = found >= total ? "all" : found ? "part" : "none";
  }
  frame.replaceChildren(holder);
  state.page = n;
  state.scale = scale;
  where.textContent = `Page ${n} of ${state.doc.numPages} · ${Math.round(scale * 100)} %`;
  status.textContent = message;
  buttons.previous.disabled = n <= 1;
  buttons.next.disabled = n >= state.doc.numPages;
  const first = holder.querySelector("mark");
  if (first) first.scrollIntoView({ block: "center", inline: "nearest" });
  else if (!state.opened) root.scrollIntoView({ block: "start" }); // over the #chunk-N the link scrolled to
  state.opened = true;
}

function failed(error) {
  status.textContent = `The original page could not be shown: ${error && error.message ? error.message : error}`;
  root.dataset.failed = "true";
}

const actions = {
  previous: () => state.page > 1 && render(state.page - 1),
  next: () => state.page < state.doc.numPages && render(state.page + 1),
  "zoom-in": () => ((state.zoom = Math.min(4, state.scale * ZOOM_STEP)), render(state.page)),
  "zoom-out": () => ((state.zoom = Math.max(0.25, state.scale / ZOOM_STEP)), render(state.page)),
  fit: () => ((state.zoom = "fit"), render(state.page)),
};

function wire() {
  for (const [name, button] of Object.entries(buttons)) {
    button.addEventListener("click", () => Promise.resolve(actions[name]()).catch(failed));
    button.disabled = false;
  }
  // Arrow keys turn pages and +/- zoom while the page has focus (it is focusable, and scrolls when zoomed in).
  frame.addEventListener("keydown", (event) => {
    const name = { ArrowLeft: "previous", ArrowRight: "next", "+": "zoom-in", "=": "zoom-in", "-": "zoom-out" }[event.key];
    if (!name || event.altKey || event.ctrlKey || event.metaKey) return;
    event.preventDefault();
    Promise.resolve(actions[name]()).catch(failed);
  });
  let resized = null;
  new ResizeObserver(() => {
    if (state.zoom !== "fit" || !state.doc || frame.clientWidth === state.width) return;
    clearTimeout(resized);
    resized = setTimeout(() => render(state.page).catch(failed), 150);
  }).observe(frame);
}

async function main() {
  try {
    state.lib = await import(root.dataset.lib);
  } catch (error) {
    throw new Error(`pdf.js is not installed on this server (make install copies it): ${error.message}`);
  }
  state.lib.GlobalWorkerOptions.workerSrc = root.dataset.worker;
  state.doc = await state.lib.getDocument({
    url: root.dataset.url,
    isEvalSupported: false,
    enableXfa: false,
    standardFontDataUrl: root.dataset.fonts,
    cMapUrl: root.dataset.cmaps,
    cMapPacked: true,
  }).promise;
  await render(await bestPage());
  wire();
}

main().catch(failed);
