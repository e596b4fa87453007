// Eddy's dashboard: plain JavaScript, no build step. It polls the JSON API every second and
// redraws the page the location hash names: #/ (overview), #/view/<id> (a view's operator
// graph), #/storage. Rates are computed here from successive cumulative counters.
'use strict';

const POLL_MS = 1000;
const HISTORY = 120;
const history = new Map(); // key -> [[time ms, cumulative value], ...]
let timer = null;

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

function num(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (a >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (a >= 1e4) return (n / 1e3).toFixed(1) + 'K';
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}

function bytes(n) {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

function secs(s) {
  if (s === null || s === undefined) return '–';
  if (s < 60) return s.toFixed(0) + ' s';
  if (s < 3600) return (s / 60).toFixed(1) + ' min';
  return (s / 3600).toFixed(1) + ' h';
}

async function get(path) {
  const r = await fetch(path, { cache: 'no-store' });
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

// Records a cumulative counter; returns its rate per second over the last poll (null at first).
function observe(key, value) {
  if (value === null || value === undefined) return null;
  let h = history.get(key);
  if (!h) { h = []; history.set(key, h); }
  const now = Date.now();
  if (h.length && now - h[h.length - 1][0] < POLL_MS / 2) return rateOf(h);
  h.push([now, value]);
  while (h.length > HISTORY + 1) h.shift();
  return rateOf(h);
}

function rateOf(h) {
  if (h.length < 2) return null;
  const [t0, v0] = h[h.length - 2];
  const [t1, v1] = h[h.length - 1];
  return t1 > t0 ? Math.max(0, (v1 - v0) * 1000 / (t1 - t0)) : null;
}

// Rates per second between successive samples of a counter.
function rates(key) {
  const h = history.get(key) || [];
  const out = [];
  for (let i = 1; i < h.length; i++) out.push(Math.max(0, (h[i][1] - h[i - 1][1]) * 1000 / Math.max(1, h[i][0] - h[i - 1][0])));
  return out;
}

function sparkline(values, w = 280, h = 48, cls = 'spark') {
  if (values.length < 2) return `<svg class="${cls}" width="${w}" height="${h}"><text x="4" y="${h / 2}" class="muted" font-size="11">collecting…</text></svg>`;
  const max = Math.max(...values, 1e-9);
  const step = w / (values.length - 1);
  const pts = values.map((v, i) => [i * step, h - 2 - (v / max) * (h - 6)]);
  const line = pts.map((p, i) => (i ? 'L' : 'M') + p[0].toFixed(1) + ' ' + p[1].toFixed(1)).join(' ');
  const area = line + ` L ${w} ${h} L 0 ${h} Z`;
  return `<svg class="${cls}" width="${w}" height="${h}"><path class="area" d="${area}"/><path d="${line}"/></svg>`;
}

function bar(used, limit) {
  if (!limit) return '';
  const pct = Math.min(100, (used / limit) * 100);
  return `<div class="bar${pct > 90 ? ' warn' : ''}"><i style="width:${pct.toFixed(1)}%"></i></div>`;
}

function percentile(values, p) {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

function progressRows(progress) {
  if (!progress.length) return '<p class="muted">No backfill has run since the server started.</p>';
  return '<table><tr><th>view</th><th>state</th><th>progress</th><th class="num">rows</th><th class="num">rows/s</th><th class="num">ETA</th></tr>' +
    progress.map((p) => `<tr data-progress="${esc(p.view)}"><td>${esc(p.view)}</td><td>${esc(p.state)}</td>` +
      `<td style="min-width:160px">${p.percent === null ? '<span class="muted">counting…</span>' : bar(p.percent, 100) + ` <span class="muted">${p.percent.toFixed(1)}%</span>`}</td>` +
      `<td class="num">${num(p.rows_done)}${p.rows_total !== null ? ' / ' + num(p.rows_total) : ''}</td>` +
      `<td class="num">${num(p.rows_per_sec)}</td><td class="num">${p.state === 'done' ? 'done' : secs(p.eta_secs)}</td></tr>`).join('') + '</table>';
}

// A COPY's size is unknown until its data ends: a running one shows an indeterminate bar.
function copyRows(copies) {
  if (!copies.length) return '<p class="muted">No COPY has run since the server started.</p>';
  return '<table><tr><th>table</th><th>state</th><th>progress</th><th class="num">rows</th><th class="num">received</th><th class="num">rows/s</th><th class="num">elapsed</th></tr>' +
    copies.map((c) => `<tr data-copy="${c.id}"><td>${esc(c.table)}</td><td class="${c.state === 'failed' ? 'failed' : ''}">${esc(c.state)}</td>` +
      `<td style="min-width:160px">${c.state === 'running' ? '<div class="bar busy"><i></i></div>' : bar(1, 1)}</td>` +
      `<td class="num" data-copy-rows="${c.rows}">${num(c.rows)}</td><td class="num">${bytes(c.bytes)}</td>` +
      `<td class="num">${num(c.rows_per_sec)}</td><td class="num">${secs(c.elapsed_secs)}</td></tr>`).join('') + '</table>';
}

async function overview(main) {
  const [o, views, epochs, progress, copies, sources] = await Promise.all([get('/api/overview'), get('/api/views'), get('/api/epochs'), get('/api/progress'), get('/api/copies'), get('/api/sources')]);
  const sourceRows = sources.map((s) => {
    const rate = observe('source:' + s.reader, s.rows);
    return `<tr data-source="${s.reader}"><td>${esc(s.source)}</td><td>${esc(s.view)}</td><td class="num">${num(s.rows)}</td>` +
      `<td class="num">${num(rate)}</td><td class="num">${s.backlog === null ? '–' : num(s.backlog)}</td></tr>`;
  }).join('');
  const ingest = observe('rows_in', o.rows_in);
  const barrier = epochs.map((e) => e.barrier_ms);
  const r = o.relations;
  const memory = o.memory.components.map((c) =>
    `<tr><td>${esc(c.component.replace('_', ' '))}</td><td class="num">${c.used_bytes === null ? '–' : bytes(c.used_bytes)}</td>` +
    `<td class="num">${bytes(c.limit_bytes)}</td><td style="min-width:120px">${c.used_bytes === null ? '' : bar(c.used_bytes, c.limit_bytes)}</td></tr>`).join('');
  const rows = views.map((v) => {
    const rate = observe('view_out:' + v.id, v.rows_in);
    return `<tr data-view="${v.id}"><td><a href="#/view/${v.id}">${esc(v.schema)}.${esc(v.name)}</a></td>` +
      `<td class="${esc(v.status)}">${esc(v.status)}${v.failure ? ': ' + esc(v.failure) : ''}</td>` +
      `<td class="num">${num(v.rows_in)}</td><td class="num">${num(v.rows_out)}</td><td class="num">${num(rate)}</td>` +
      `<td class="num">${num(v.state_entries)}</td><td class="num">${bytes(v.state_bytes)}</td></tr>`;
  }).join('');
  main.innerHTML = `
    <h1>Overview</h1>
    <div class="card kpis" style="margin-bottom:16px">
      <div class="kpi"><b id="kpi-epoch">${o.committed_epoch}</b><span>committed epoch</span></div>
      <div class="kpi"><b>${num(ingest)}</b><span>rows/s into views</span></div>
      <div class="kpi"><b>${r.tables}</b><span>tables</span></div>
      <div class="kpi"><b>${r.materialized_views}</b><span>materialized views</span></div>
      <div class="kpi"><b>${r.sources}</b><span>sources</span></div>
      <div class="kpi"><b>${r.sinks}</b><span>sinks</span></div>
      <div class="kpi"><b>${o.connections}</b><span>connections</span></div>
      <div class="kpi"><b>${secs(o.uptime_secs)}</b><span>uptime</span></div>
    </div>
    <div class="grid">
      <div class="card"><h2>Throughput (rows/s into views)</h2>${sparkline(rates('rows_in'))}</div>
      <div class="card"><h2>Commit latency (barrier → durable, ms)</h2>${sparkline(barrier)}
        <div class="muted">p50 ${num(percentile(barrier, 0.5))} ms · p99 ${num(percentile(barrier, 0.99))} ms · ${o.commits.epochs} epochs, ${o.commits.failures} failed</div></div>
      <div class="card"><h2>Memory</h2><table><tr><th>component</th><th class="num">used</th><th class="num">limit</th><th></th></tr>${memory}
        <tr><td>process (RSS)</td><td class="num">${bytes(o.memory.rss_bytes)}</td><td class="num">${bytes(o.memory.budget_bytes)}</td><td>${bar(o.memory.rss_bytes, o.memory.budget_bytes)}</td></tr></table></div>
    </div>
    <div class="card" style="margin-bottom:16px"><h2>Materialized views and sinks</h2>
      ${views.length ? `<table><tr><th>name</th><th>status</th><th class="num">rows in</th><th class="num">rows out</th><th class="num">rows/s</th><th class="num">state entries</th><th class="num">state</th></tr>${rows}</table>` : '<p class="muted">None yet: CREATE MATERIALIZED VIEW ... AS SELECT ...</p>'}
    </div>
    <div class="grid">
      <div class="card"><h2>Backfills</h2>${progressRows(progress)}</div>
      <div class="card"><h2>COPY</h2>${copyRows(copies)}</div>
    </div>
    ${sources.length ? `<div class="card"><h2>Sources</h2><table><tr><th>source</th><th>view</th><th class="num">rows read</th><th class="num">rows/s</th><th class="num">backlog</th></tr>${sourceRows}</table></div>` : ''}`;
}

// Lays a view's operator tree out top-down: inputs at the top, the view's output at the bottom.
function layout(nodes) {
  const children = new Map(nodes.map((n) => [n.id, []]));
  const roots = [];
  for (const n of nodes) (n.parent === null ? roots : children.get(n.parent)).push(n.id);
  const depth = new Map();
  const pos = new Map();
  let slot = 0;
  const place = (id, d) => {
    depth.set(id, d);
    const kids = children.get(id) || [];
    if (!kids.length) { pos.set(id, slot++); return; }
    kids.forEach((k) => place(k, d + 1));
    pos.set(id, kids.reduce((s, k) => s + pos.get(k), 0) / kids.length);
  };
  roots.forEach((r) => place(r, 0));
  const maxDepth = Math.max(0, ...depth.values());
  return { x: pos, level: new Map([...depth].map(([id, d]) => [id, maxDepth - d])), width: Math.max(1, slot), height: maxDepth + 1 };
}

function graph(nodes, viewId) {
  const W = 270, H = 64, GX = 30, GY = 44;
  const l = layout(nodes);
  const cx = (id) => 10 + l.x.get(id) * (W + GX);
  const cy = (id) => 10 + l.level.get(id) * (H + GY);
  const width = l.width * (W + GX) + 20, height = l.height * (H + GY) + 10;
  const edges = nodes.filter((n) => n.parent !== null).map((n) =>
    `<path class="edge" d="M ${cx(n.id) + W / 2} ${cy(n.id) + H} C ${cx(n.id) + W / 2} ${cy(n.id) + H + GY / 2}, ${cx(n.parent) + W / 2} ${cy(n.parent) - GY / 2}, ${cx(n.parent) + W / 2} ${cy(n.parent) - 2}"/>`).join('');
  const boxes = nodes.map((n) => {
    const rin = observe(`node:${viewId}:${n.id}:in`, n.rows_in);
    const rout = observe(`node:${viewId}:${n.id}:out`, n.rows_out);
    const label = n.label.length > 31 ? n.label.slice(0, 30) + '…' : n.label;
    const state = n.state ? `state ${num(n.state.entries)} · ${bytes(n.state.bytes)}${n.cache_hit_ratio === null ? '' : ' · hit ' + (n.cache_hit_ratio * 100).toFixed(0) + '%'}` : `${num(n.rows_in)} in · ${num(n.rows_out)} out`;
    return `<g class="node ${esc(n.kind)}" data-node="${n.id}" data-rows-in="${n.rows_in}" data-rows-out="${n.rows_out}" transform="translate(${cx(n.id)},${cy(n.id)})">
      <title>${esc(n.label)}</title><rect width="${W}" height="${H}"></rect>
      <text class="label" x="10" y="18">${esc(label)}</text>
      <text class="stat rate" x="10" y="36">${num(rin)} rows/s in · ${num(rout)} rows/s out</text>
      <text class="stat" x="10" y="53">${esc(state)}</text>
      <text class="stat fragment" x="${W - 10}" y="18" text-anchor="end">F${n.fragment}</text></g>`;
  }).join('');
  return `<svg class="graph" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#9aa3b5"/></marker></defs>
    ${edges}${boxes}</svg>`;
}

async function viewPage(main, id) {
  const v = await get('/api/views/' + encodeURIComponent(id));
  const rows = v.nodes.map((n) => `<tr data-node-row="${n.id}"><td>${n.id}</td><td>F${n.fragment}</td><td>${esc(n.kind)}</td><td>${esc(n.label)}</td>` +
    `<td class="num">${num(n.rows_in)}</td><td class="num">${num(n.rows_out)}</td><td class="num">${num(n.busy_ms)} ms</td>` +
    `<td class="num">${n.state ? num(n.state.entries) : ''}</td><td class="num">${n.state ? bytes(n.state.bytes) : ''}</td>` +
    `<td class="num">${n.cache_hit_ratio === null ? '' : (n.cache_hit_ratio * 100).toFixed(1) + '%'}</td></tr>`).join('');
  main.innerHTML = `
    <h1>${esc(v.schema)}.${esc(v.name)} <span class="${esc(v.status)}" style="font-size:14px">${esc(v.status)}</span></h1>
    ${v.failure ? `<p class="failed">${esc(v.failure)}</p>` : ''}
    <div class="card kpis" style="margin-bottom:16px">
      <div class="kpi"><b id="view-rows-in">${num(v.rows_in)}</b><span>rows in</span></div>
      <div class="kpi"><b>${num(v.rows_out)}</b><span>rows out</span></div>
      <div class="kpi"><b>${num(v.epochs)}</b><span>epochs</span></div>
      <div class="kpi"><b>${bytes(v.state_bytes)}</b><span>state (cached)</span></div>
      <div class="kpi"><b>${num(v.backpressure_ms)} ms</b><span>backpressure</span></div>
      <div class="kpi"><b>${num(v.barrier_ms)} ms</b><span>in barriers</span></div>
      <div class="kpi"><b>${num(v.parallelism)}</b><span>actors per fragment</span></div>
    </div>
    <div class="card" style="margin-bottom:16px;overflow:auto"><h2>Operator graph <span class="muted">(F<i>n</i>: fragment; an Exchange routes rows between fragments by key)</span></h2>${v.nodes.length ? graph(v.nodes, v.id) : '<p class="muted">The view is not running.</p>'}</div>
    ${v.backfill && v.backfill.state !== 'none' ? `<div class="card" style="margin-bottom:16px"><h2>Backfill</h2>${progressRows([v.backfill])}</div>` : ''}
    <div class="card" style="margin-bottom:16px"><h2>Operators</h2><table><tr><th>#</th><th>fragment</th><th>kind</th><th>operator</th><th class="num">rows in</th><th class="num">rows out</th><th class="num">busy</th><th class="num">state entries</th><th class="num">state</th><th class="num">cache hits</th></tr>${rows}</table></div>
    <div class="card"><h2>Definition</h2><pre class="def">${esc(v.definition)}</pre></div>`;
}

async function storagePage(main) {
  const s = await get('/api/storage');
  const os = s.object_store;
  const kinds = Object.keys(os.requests);
  const req = kinds.map((k) => `<tr><td>${esc(k)}</td><td class="num">${num(os.requests[k])}</td><td class="num">${num(observe('os:' + k, os.requests[k]))}</td><td class="num">${num(os.errors[k])}</td></tr>`).join('');
  const objects = Array.isArray(s.objects)
    ? `<table><tr><th>directory</th><th class="num">objects</th><th class="num">bytes</th></tr>${s.objects.map((d) => `<tr><td>${esc(d.directory)}</td><td class="num">${num(d.objects)}</td><td class="num">${bytes(d.bytes)}</td></tr>`).join('')}</table>`
    : `<p class="failed">${esc(s.objects.error)}</p>`;
  const lsm = s.lsm.map((m) => `<tr><td>${esc(m.name.replace('slatedb.', ''))}</td><td class="muted">${esc(Object.entries(m.labels).map(([k, v]) => k + '=' + v).join(' '))}</td><td class="num">${num(m.value)}</td></tr>`).join('');
  main.innerHTML = `
    <h1>Storage</h1>
    <p class="muted">${esc(s.location)} · committed epoch ${s.committed_epoch}</p>
    <div class="grid">
      <div class="card"><h2>Object-store requests</h2><table><tr><th>kind</th><th class="num">total</th><th class="num">per s</th><th class="num">errors</th></tr>${req}</table>
        <p class="muted">read ${bytes(os.bytes_read)} (${bytes(observe('os:read', os.bytes_read))}/s) · written ${bytes(os.bytes_written)} (${bytes(observe('os:written', os.bytes_written))}/s)</p></div>
      <div class="card"><h2>LSM files (SlateDB)</h2>${objects}
        <p class="muted"><code>wal</code>: write-ahead SSTs · <code>compacted</code>: L0 SSTs and sorted runs · <code>manifest</code>: the LSM's versions</p></div>
      <div class="card"><h2>LSM and block cache (SlateDB's metrics)</h2><table><tr><th>metric</th><th>labels</th><th class="num">value</th></tr>${lsm}</table></div>
    </div>`;
}

async function tick() {
  clearTimeout(timer);
  const main = document.getElementById('main');
  const hash = location.hash || '#/';
  const status = document.getElementById('status');
  document.querySelectorAll('nav a[data-page]').forEach((a) => a.classList.toggle('active', hash === a.getAttribute('href')));
  try {
    const m = hash.match(/^#\/view\/(.+)$/);
    if (m) await viewPage(main, decodeURIComponent(m[1]));
    else if (hash === '#/storage') await storagePage(main);
    else await overview(main);
    status.textContent = 'updated ' + new Date().toLocaleTimeString();
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  } catch (e) {
    status.textContent = 'error: ' + e.message;
  }
  timer = setTimeout(tick, POLL_MS);
}

window.addEventListener('hashchange', tick);
tick();
