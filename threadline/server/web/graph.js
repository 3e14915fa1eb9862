// The graph as an SVG drawn from /assistants/{id}/graph's nodes and edges: nodes in layers by
// their distance from __start__, the selected step's nodes highlighted.

const NS = 'http://www.w3.org/2000/svg';
const W = 120;
const H = 34;
const GAP_X = 24;
const GAP_Y = 42;

function el(tag, attrs = {}, text) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function layers(drawing) {
  const level = new Map([['__start__', 0]]);
  const queue = ['__start__'];
  while (queue.length) {
    const id = queue.shift();
    for (const e of drawing.edges.filter((x) => x.source === id)) {
      if (!level.has(e.target)) {
        level.set(e.target, level.get(id) + 1);
        queue.push(e.target);
      }
    }
  }
  level.delete('__end__');
  let deepest = Math.max(...level.values());
  for (const n of drawing.nodes) if (!level.has(n.id) && n.id !== '__end__') level.set(n.id, ++deepest);
  level.set('__end__', deepest + 1); // always the last row
  const rows = [];
  for (const n of drawing.nodes) (rows[level.get(n.id)] ||= []).push(n.id);
  return rows.filter(Boolean);
}

// ran: nodes that ran to make the selected checkpoint; next: nodes it would run next.
export function drawGraph(drawing, { ran = [], next = [] } = {}) {
  const rows = layers(drawing);
  const widest = Math.max(...rows.map((r) => r.length));
  const width = widest * (W + GAP_X) + GAP_X;
  const height = rows.length * (H + GAP_Y) + GAP_Y / 2;
  const pos = new Map();
  rows.forEach((row, r) => row.forEach((id, i) => {
    const x = (width - row.length * (W + GAP_X) + GAP_X) / 2 + i * (W + GAP_X);
    pos.set(id, { x, y: GAP_Y / 2 + r * (H + GAP_Y), row: r });
  }));
  const label = `Graph: ${drawing.nodes.map((n) => n.id).join(', ')}.` +
    (ran.length ? ` Ran: ${ran.join(', ')}.` : '') + (next.length ? ` Next: ${next.join(', ')}.` : '');
  const svg = el('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': label, class: 'graph' });
  const defs = el('defs');
  const marker = el('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrowhead' }));
  defs.append(marker);
  svg.append(el('title', {}, label), defs);
  for (const e of drawing.edges) {
    const a = pos.get(e.source);
    const b = pos.get(e.target);
    if (!a || !b) continue;
    const down = b.row > a.row;
    const d = down
      ? `M ${a.x + W / 2} ${a.y + H} L ${b.x + W / 2} ${b.y}`
      : `M ${a.x + W} ${a.y + H / 2} C ${a.x + W + 40} ${a.y + H / 2}, ${b.x + W + 40} ${b.y + H / 2}, ${b.x + W} ${b.y + H / 2}`;
    svg.append(el('path', { d, class: `edge${e.conditional ? ' conditional' : ''}`, 'marker-end': 'url(#arrow)' }));
  }
  for (const n of drawing.nodes) {
    const p = pos.get(n.id);
    const cls = ['node', n.id.startsWith('__') ? 'terminal' : '', ran.includes(n.id) ? 'ran' : '', next.includes(n.id) ? 'next' : ''];
    const g = el('g', { class: cls.filter(Boolean).join(' '), 'data-node': n.id });
    g.append(el('rect', { x: p.x, y: p.y, width: W, height: H, rx: n.id.startsWith('__') ? H / 2 : 6 }),
      el('text', { x: p.x + W / 2, y: p.y + H / 2 + 4, 'text-anchor': 'middle' }, n.id.replace(/^__(.*)__$/, (m, x) => x.toUpperCase())));
    svg.append(g);
  }
  return svg;
}
