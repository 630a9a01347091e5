// The Trace part: the executor's real trace (/api/trace), stepped round by
// round. Each rank shows its buffer as a row of blocks; a block's colour says
// how many ranks' contributions it holds (the popcount of its value, which is
// a bitmask: rank r starts with 2^r). The round's messages are arrows from
// sender to receiver. Where ranks sit is read off the trace, not a list of
// names: when the pairs that ever talk form a tree (tree, broadcast, reduce),
// ranks hang in levels below the root; otherwise they sit on a circle.
import { api, $, svgElement } from './api.js';

// Colour by share of ranks held: empty grey, then light to dark blue, and
// green once a block holds all N. data-holds carries the count for tests.
export function holdsColour(holds, workers) {
  if (holds === 0) return '#e0e0e0';
  if (holds === workers) return '#2e7d32';
  const shade = Math.round(200 - 150 * (holds / workers));
  return `rgb(${shade},${shade + 20},255)`;
}

export const popcount = mask => { let n = 0; for (; mask; mask &= mask - 1) n++; return n; };

let trace = null;   // the /api/trace answer shown
let round = -1;     // -1: before round 0
let timer = null;   // play
let positions = []; // per rank: {x, y}, from layOut()
let latest = 0;     // the newest /api/trace request: a late older answer is dropped

function buffersAt(k) { return k < 0 ? trace.initial : trace.rounds[k].buffers; }

// Depth of every rank below rank 0 when the pairs that exchange messages form
// a tree (N - 1 distinct pairs, all connected), and the ranks in the order a
// breadth-first walk finds them (children of a left parent first); null otherwise.
function treeDepths(trace) {
  const neighbours = Array.from({ length: trace.workers }, () => new Set());
  for (const round of trace.rounds) {
    for (const m of round.messages) { neighbours[m.from].add(m.to); neighbours[m.to].add(m.from); }
  }
  const pairs = neighbours.reduce((sum, n) => sum + n.size, 0) / 2;
  if (trace.workers < 3 || pairs !== trace.workers - 1) return null;
  const depth = Array(trace.workers).fill(-1);
  depth[0] = 0;
  const order = [0];
  for (let i = 0; i < order.length; i++) {
    for (const next of [...neighbours[order[i]]].sort((a, b) => a - b)) {
      if (depth[next] < 0) { depth[next] = depth[order[i]] + 1; order.push(next); }
    }
  }
  return depth.includes(-1) ? null : { depth, order };
}

function layOut(trace) {
  const tree = treeDepths(trace);
  if (tree) {
    const { depth, order } = tree;
    const levels = Math.max(...depth);
    return {
      kind: 'tree',
      positions: depth.map((d, rank) => {
        const level = order.filter(r => depth[r] === d);
        return { x: (900 * (level.indexOf(rank) + 0.5)) / level.length,
                 y: 50 + (460 * d) / Math.max(1, levels) };
      }),
    };
  }
  return {
    kind: 'circle',
    positions: Array.from({ length: trace.workers }, (_, rank) => {
      const angle = -Math.PI / 2 + (2 * Math.PI * rank) / trace.workers;
      return { x: 450 + 330 * Math.cos(angle), y: 280 + 220 * Math.sin(angle) };
    }),
  };
}

const rankPosition = rank => positions[rank];

function drawRank(svg, rank, masks) {
  const { x, y } = rankPosition(rank);
  const width = Math.min(16, 150 / trace.count);
  const left = x - (width * trace.count) / 2;
  svg.append(svgElement('text', { x, y: y - 14, 'text-anchor': 'middle', 'font-size': 13 },
                        `rank ${rank}`));
  masks.forEach((mask, element) => {
    const holds = popcount(mask);
    const block = svgElement('rect', {
      class: 'block', x: left + element * width, y: y - 8, width: width - 1, height: 18,
      fill: holdsColour(holds, trace.workers), stroke: '#666', 'stroke-width': 0.5,
      'data-rank': rank, 'data-element': element, 'data-holds': holds,
    });
    block.append(svgElement('title', {}, `rank ${rank}, element ${element}: holds ${holds} of ${trace.workers}`));
    svg.append(block);
  });
}

function drawMessage(svg, message) {
  const from = rankPosition(message.from);
  const to = rankPosition(message.to);
  const dx = to.x - from.x, dy = to.y - from.y, length = Math.hypot(dx, dy) || 1;
  const inset = Math.min(40, length / 3);
  const line = svgElement('line', {
    class: 'message', x1: from.x + (dx / length) * inset, y1: from.y + 14 + (dy / length) * inset,
    x2: to.x - (dx / length) * inset, y2: to.y + 14 - (dy / length) * inset,
    stroke: message.action === 'reduce' ? '#c62828' : '#1565c0', 'stroke-width': 2,
    'marker-end': 'url(#arrow)', 'data-from': message.from, 'data-to': message.to,
  });
  line.append(svgElement('title', {},
    `rank ${message.from} -> rank ${message.to}: [${message.offset},${message.offset + message.count}) ` +
    (message.action === 'reduce' ? 'added in' : 'stored')));
  svg.append(line);
}

function draw() {
  const svg = $('trace-svg');
  const marker = svgElement('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5,
                                        markerWidth: 6, markerHeight: 6, orient: 'auto' });
  marker.append(svgElement('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#444' }));
  const defs = svgElement('defs');
  defs.append(marker);
  svg.replaceChildren(defs);
  buffersAt(round).forEach((masks, rank) => drawRank(svg, rank, masks));
  if (round >= 0) trace.rounds[round].messages.forEach(m => drawMessage(svg, m));

  const total = trace.rounds.length;
  $('trace-round').textContent = round < 0
    ? `before round 0 (of ${total})`
    : `round ${round + 1} of ${total}: ${trace.rounds[round].phase}`;
  $('trace-round').dataset.round = round;
  const sent = round < 0 ? 0 : trace.rounds[round].bytes_so_far;
  $('trace-bytes').textContent =
    `${sent} bytes sent so far; closed form ${trace.formula} = ${trace.formula_bytes} bytes ` +
    `in ${trace.formula_rounds} rounds (${trace.count} float64 elements per rank)`;
  $('trace-prev').disabled = round < 0;
  $('trace-next').disabled = round >= total - 1;
}

function drawLegend(workers) {
  const items = [];
  for (let holds = 0; holds <= workers; holds++) {
    const item = document.createElement('span');
    item.dataset.holds = holds;
    item.dataset.colour = holdsColour(holds, workers);
    item.innerHTML = `<i style="background:${item.dataset.colour}"></i>${holds}`;
    items.push(item);
  }
  const title = document.createElement('span');
  title.textContent = 'ranks held:';
  $('trace-legend').replaceChildren(title, ...items);
}

function stop() { clearInterval(timer); timer = null; $('trace-play').textContent = 'play'; }

export async function loadTrace() {
  stop();
  const query = new URLSearchParams({
    collective: $('trace-collective').value, n: $('trace-n').value, count: $('trace-count').value,
  });
  const request = ++latest;
  try {
    const answer = await api(`/api/trace?${query}`);
    if (request !== latest) return;
    trace = answer;
    $('trace-message').textContent = '';
  } catch (error) {
    if (request === latest) $('trace-message').textContent = error.message;
    return;
  }
  round = -1;
  const layout = layOut(trace);
  positions = layout.positions;
  $('trace-svg').dataset.layout = layout.kind;
  drawLegend(trace.workers);
  draw();
}

export function step(by) {
  if (!trace) return;
  round = Math.max(-1, Math.min(trace.rounds.length - 1, round + by));
  draw();
}

export function setUpTrace() {
  $('trace-form').addEventListener('submit', event => { event.preventDefault(); loadTrace(); });
  $('trace-prev').addEventListener('click', () => { stop(); step(-1); });
  $('trace-next').addEventListener('click', () => { stop(); step(1); });
  $('trace-play').addEventListener('click', () => {
    if (timer) return stop();
    if (trace && round >= trace.rounds.length - 1) round = -1;
    $('trace-play').textContent = 'pause';
    timer = setInterval(() => {
      if (!trace || round >= trace.rounds.length - 1) return stop();
      step(1);
    }, 900);
  });
}
