// kdissect report: tabs, a virtualised message list, the field tree and the hex pane.
// Every string from the capture reaches the page through textContent, never as markup.
(function () {
  "use strict";
  const ROW = 20, OPEN_DEPTH = 2;
  const data = JSON.parse(document.getElementById("kd-data").textContent);
  const S = data.strings, C = data.columns, N = C.n.length;
  const list = document.getElementById("kd-list"), spacer = document.getElementById("kd-spacer");
  const treePane = document.getElementById("kd-tree"), hexPane = document.getElementById("kd-hex");
  const filterBox = document.getElementById("kd-filter"), counter = document.getElementById("kd-count");
  let view = null, searchText = null, detailLines = null, selected = -1, byNumber = null;
  let current = null; // {tree, bytes, byteEls, selectedEl, highlighted}

  function str(index) { return index < 0 ? "" : S[index]; }
  const NONE = [];
  function kids(node) { return node[6] || NONE; }
  function pad(text, width) { text = String(text); return text.length >= width ? text : " ".repeat(width - text.length) + text; }
  function padEnd(text, width) { text = String(text); return text.length >= width ? text : text + " ".repeat(width - text.length); }

  function rowText(i) {
    let text = pad(C.n[i], 6) + " " + pad(C.t[i].toFixed(6), 12) + " " + pad(str(C.s[i]), 21) +
      " -> " + padEnd(str(C.d[i]), 21) + " " + str(C.p[i]) + " corr=" + (C.c[i] === null ? "?" : C.c[i]);
    if (C.i[i] >= 0) text += " client=" + str(C.i[i]);
    if (C.l[i] !== null) text += " " + C.l[i].toFixed(3) + " ms";
    if (C.k[i] >= 0) text += " [" + str(C.k[i]) + "]";
    return text;
  }

  // -- tabs and links ------------------------------------------------------------------
  function showTab(name) {
    for (const section of document.querySelectorAll("section.tab")) section.classList.toggle("shown", section.id === name);
    for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.tab === name);
    if (name === "packets") renderRows();
  }
  function route() {
    const hash = location.hash.slice(1);
    const wanted = /^m(\d+)$/.exec(hash);
    if (wanted) { showTab("packets"); selectNumber(Number(wanted[1])); return; }
    // with nothing found, the overview says more than an empty findings list
    const first = document.querySelector("#findings table.findings") ? "findings" : "overview";
    showTab(document.getElementById(hash) ? hash : first);
  }
  window.addEventListener("hashchange", route);

  // -- the message list ------------------------------------------------------------------
  function setView(indices) {
    view = indices;
    spacer.style.height = (view.length * ROW) + "px";
    counter.textContent = view.length === N ? N + " messages" : view.length + " of " + N + " messages";
    renderRows();
  }
  function renderRows() {
    if (!view) return;
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 5);
    const last = Math.min(view.length, first + Math.ceil((list.clientHeight || 600) / ROW) + 10);
    const rows = [];
    for (let v = first; v < last; v++) {
      const i = view[v], row = document.createElement("div");
      row.className = "row" + (C.w[i] >= 2 ? " w" + C.w[i] : "") + (i === selected ? " selected" : "");
      row.style.top = (v * ROW) + "px";
      row.dataset.index = i;
      row.dataset.number = C.n[i];
      row.textContent = rowText(i);
      rows.push(row);
    }
    spacer.replaceChildren(...rows);
  }
  list.addEventListener("scroll", () => window.requestAnimationFrame(renderRows));
  spacer.addEventListener("click", (event) => {
    const row = event.target.closest(".row");
    if (row) selectIndex(Number(row.dataset.index), false);
  });
  list.addEventListener("keydown", (event) => {
    if (!view || (event.key !== "ArrowDown" && event.key !== "ArrowUp")) return;
    event.preventDefault();
    const at = Math.max(0, view.indexOf(selected));
    const next = Math.min(view.length - 1, Math.max(0, at + (event.key === "ArrowDown" ? 1 : -1)));
    selectIndex(view[next], true);
  });

  let filterTimer = 0;
  filterBox.addEventListener("input", () => { clearTimeout(filterTimer); filterTimer = setTimeout(applyFilter, 120); });
  function applyFilter() {
    const terms = filterBox.value.toLowerCase().split(/\s+/).filter(Boolean);
    if (!terms.length) { setView(allRows()); return; }
    if (!searchText) { searchText = new Array(N); for (let i = 0; i < N; i++) searchText[i] = rowText(i).toLowerCase(); }
    const found = [];
    outer: for (let i = 0; i < N; i++) {
      for (const term of terms) if (searchText[i].indexOf(term) < 0) continue outer;
      found.push(i);
    }
    list.scrollTop = 0;
    setView(found);
  }
  function allRows() { const all = new Array(N); for (let i = 0; i < N; i++) all[i] = i; return all; }

  function selectNumber(number) {
    if (!byNumber) { byNumber = new Map(); for (let i = 0; i < N; i++) byNumber.set(C.n[i], i); }
    const index = byNumber.get(number);
    if (index === undefined) return;
    if (view.indexOf(index) < 0) { filterBox.value = ""; setView(allRows()); }
    selectIndex(index, true);
  }
  function selectIndex(index, scroll) {
    selected = index;
    if (scroll) {
      const top = view.indexOf(index) * ROW;
      if (top < list.scrollTop || top > list.scrollTop + list.clientHeight - ROW) list.scrollTop = Math.max(0, top - 3 * ROW);
    }
    renderRows();
    showMessage(index);
  }

  // -- the tree and the bytes ---------------------------------------------------------------
  function detailLine(index) {
    if (!detailLines) detailLines = document.getElementById("kd-details").textContent.split("\n");
    return detailLines[index] || "";
  }
  function showMessage(index) {
    const line = detailLine(index);
    current = null;
    if (!line) {
      const hint = document.createElement("p");
      hint.className = "hint";
      hint.textContent = "Message " + C.n[index] + " is too large for this page or beyond its budget; " +
        "on the command line: kdissect -V -x -Y 'number == " + C.n[index] + "' " + data.source;
      treePane.replaceChildren(hint);
      hexPane.replaceChildren();
      return;
    }
    const [encoded, tree] = JSON.parse(line);
    const raw = atob(encoded), bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    current = { tree: tree, bytes: bytes, byteEls: [], selectedEl: null, highlighted: [] };
    treePane.replaceChildren(nodeElement(tree, 0, []));
    hexPane.replaceChildren(hexElement(bytes));
  }

  function labelText(node) {
    const type = str(node[1]);
    let text = str(node[0]);
    if (type !== "frame" && type !== "header") text += " " + type;
    if (node[2]) text += (type === "message" || type === "header" ? " " : " = ") + node[2];
    text += " [0x" + node[3].toString(16).padStart(4, "0") + ", " + node[4] + "B]";
    return node[7] ? "[" + text + "]" : text;
  }
  function nodeElement(node, depth, path) {
    const element = document.createElement("div"), label = document.createElement("span");
    const twisty = document.createElement("span");
    element.className = "node" + (kids(node).length && depth >= OPEN_DEPTH ? " closed" : "");
    element.dataset.offset = node[3];
    element.dataset.size = node[4];
    element.dataset.path = path.join(".");
    twisty.className = "twisty";
    twisty.textContent = kids(node).length ? (depth >= OPEN_DEPTH ? "\u25b8" : "\u25be") : "";
    label.className = "label" + (node[7] ? " gen" : "");
    label.textContent = labelText(node);
    element.append(twisty, label);
    if (str(node[5])) { const about = document.createElement("span"); about.className = "about"; about.textContent = "  " + str(node[5]); element.append(about); }
    for (const note of (node[8] || NONE)) { const flag = document.createElement("span"); flag.className = "note"; flag.textContent = "  " + note; element.append(flag); }
    element.kdNode = node;
    element.kdDepth = depth;
    if (kids(node).length && depth < OPEN_DEPTH) element.append(childrenElement(node, depth, path));
    return element;
  }
  function childrenElement(node, depth, path) {
    const box = document.createElement("div");
    box.className = "kids";
    kids(node).forEach((child, i) => box.append(nodeElement(child, depth + 1, path.concat(i))));
    return box;
  }
  function toggle(element) {
    const node = element.kdNode;
    if (!kids(node).length) return;
    if (!element.querySelector(":scope > .kids")) element.append(childrenElement(node, element.kdDepth, element.dataset.path ? element.dataset.path.split(".").map(Number) : []));
    const closed = element.classList.toggle("closed");
    element.querySelector(":scope > .twisty").textContent = closed ? "\u25b8" : "\u25be";
  }
  treePane.addEventListener("click", (event) => {
    const element = event.target.closest(".node");
    if (!element || !current) return;
    if (event.target.classList.contains("twisty")) { toggle(element); return; }
    selectField(element, true);
  });

  function selectField(element, scrollHex) {
    if (current.selectedEl) current.selectedEl.classList.remove("selected");
    element.classList.add("selected");
    current.selectedEl = element;
    for (const el of current.highlighted) el.classList.remove("sel");
    current.highlighted = [];
    const start = Number(element.dataset.offset), end = start + Number(element.dataset.size);
    for (let o = start; o < end && o < current.byteEls.length; o++) { current.byteEls[o].classList.add("sel"); current.highlighted.push(current.byteEls[o]); }
    if (scrollHex && current.highlighted.length) current.highlighted[0].scrollIntoView({ block: "nearest" });
  }

  function hexElement(bytes) {
    const box = document.createElement("div"), els = current.byteEls;
    for (let row = 0; row < bytes.length; row += 16) {
      const line = document.createElement("div"), offset = document.createElement("span");
      offset.className = "off";
      offset.textContent = row.toString(16).padStart(4, "0") + "  ";
      line.append(offset);
      let ascii = "";
      for (let o = row; o < row + 16; o++) {
        if (o >= bytes.length) { line.append(o % 16 === 7 ? "    " : "   "); continue; }
        const b = document.createElement("span");
        b.className = "b";
        b.dataset.offset = o;
        b.textContent = bytes[o].toString(16).padStart(2, "0");
        els.push(b);
        line.append(b, o % 16 === 7 ? "  " : " ");
        ascii += bytes[o] >= 32 && bytes[o] < 127 ? String.fromCharCode(bytes[o]) : ".";
      }
      line.append(" " + ascii);
      box.append(line);
    }
    return box;
  }
  hexPane.addEventListener("click", (event) => {
    const b = event.target.closest(".b");
    if (!b || !current) return;
    const path = deepestAt(current.tree, Number(b.dataset.offset));
    let element = treePane.firstElementChild;
    for (const i of path) {
      if (element.classList.contains("closed") || !element.querySelector(":scope > .kids")) toggle(element);
      element = element.querySelector(":scope > .kids").children[i];
    }
    selectField(element, false);
    element.scrollIntoView({ block: "nearest" });
  });
  function deepestAt(node, offset) {
    const path = [];
    for (;;) {
      const children = kids(node);
      const next = children.findIndex((c) => !c[7] && c[4] > 0 && c[3] <= offset && offset < c[3] + c[4]);
      if (next < 0) return path;
      path.push(next);
      node = children[next];
    }
  }

  setView(allRows());
  route();
})();
