// The Trace part: the executor's real trace (/api/trace), stepped round by
// round. Each rank shows its buffer as a row of blocks; a block's colour says
// how many ranks' contributions it holds (the popcount of its value, which is
// a bitmask: rank r starts with 2^r). The round's messages are arrows from
// sender to receiver. Where ranks sit is read off the trace's messages
// (trace_layout.js): a star, a tree, a butterfly's grid or a circle. The
// parameter server's trace comes from its protocol, not from the executor (it
// runs through gRPC): its shards are nodes after the ranks, and the page says so.
import { api, $, svgElement } from './api.js';
import { layOut } from './trace_layout.js';

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
let layout = null;  // from layOut(): {kind, positions per node, bend}
let parameterServers = new Set();  // collectives whose trace takes servers=S
let latest = 0;     // the newest /api/trace request: a late older answer is dropped

function buffersAt(k) { return k < 0 ? trace.initial : trace.rounds[k].buffers; }

const isShard = node => node >= trace.workers;
const nodeName = node => (isShard(node) ? `server ${node - trace.workers}` : `rank ${node}`);

// The elements a node keeps: a rank all of them, a shard its slice.
function elementsOf(node) {
  if (!isShard(node)) return [0, trace.count];
  return trace.server_slices[node - trace.workers];
}

function drawNode(svg, node, masks) {
  const { x, y } = layout.positions[node];
  const nodes = trace.workers + trace.servers;
  const width = Math.min(16, (nodes > 8 ? 100 : 150) / trace.count);
  const [begin, end] = elementsOf(node);
  const left = x - (width * (end - begin)) / 2;
  svg.append(svgElement('text', { x, y: y - 14, 'text-anchor': 'middle', 'font-size': 13,
                                  class: isShard(node) ? 'server' : 'rank' }, nodeName(node)));
  for (let element = begin; element < end; element++) {
    const holds = popcount(masks[element]);
    const block = svgElement('rect', {
      class: 'block', x: left + (element - begin) * width, y: y - 8, width: width - 1, height: 18,
      fill: holdsColour(holds, trace.workers), stroke: '#666', 'stroke-width': 0.5,
      'data-rank': node, 'data-element': element, 'data-holds': holds,
    });
    block.append(svgElement('title', {},
      `${nodeName(node)}, element ${element}: holds ${holds} of ${trace.workers}`));
    svg.append(block);
  }
}

// An arrow from sender to receiver, bowed to its left by layout.bend of its
// length, so the two arrows of an exchange do not lie on one another.
function drawMessage(svg, message) {
  const from = layout.positions[message.from];
  const to = layout.positions[message.to];
  const dx = to.x - from.x, dy = to.y - from.y, length = Math.hypot(dx, dy) || 1;
  const inset = Math.min(40, length / 3);
  const x1 = from.x + (dx / length) * inset, y1 = from.y + 14 + (dy / length) * inset;
  const x2 = to.x - (dx / length) * inset, y2 = to.y + 14 - (dy / length) * inset;
  const bow = layout.bend * length;
  const cx = (x1 + x2) / 2 + (dy / length) * bow, cy = (y1 + y2) / 2 - (dx / length) * bow;
  const arrow = svgElement('path', {
    class: 'message', d: `M${x1},${y1} Q${cx},${cy} ${x2},${y2}`, fill: 'none',
    stroke: message.action === 'reduce' ? '#c62828' : '#1565c0', 'stroke-width': 2,
    'marker-end': 'url(#arrow)', 'data-from': message.from, 'data-to': message.to,
  });
  arrow.append(svgElement('title', {},
    `${nodeName(message.from)} -> ${nodeName(message.to)}: ` +
    `[${message.offset},${message.offset + message.count}) ` +
    (message.action === 'reduce' ? 'added in' : 'stored')));
  svg.append(arrow);
}

function draw() {
  const svg = $('trace-svg');
  const marker = svgElement('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5,
                                        markerWidth: 6, markerHeight: 6, orient: 'auto' });
  marker.append(svgElement('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#444' }));
  const defs = svgElement('defs');
  defs.append(marker);
  svg.replaceChildren(defs);
  buffersAt(round).forEach((masks, node) => drawNode(svg, node, masks));
  if (round >= 0) trace.rounds[round].messages.forEach(m => drawMessage(svg, m));

  const total = trace.rounds.length;
  $('trace-round').textContent = round < 0
    ? `before round 0 (of ${total})`
    : `round ${round + 1} of ${total}: ${trace.rounds[round].phase}`;
  $('trace-round').dataset.round = round;
  const sent = round < 0 ? 0 : trace.rounds[round].bytes_so_far;
  $('trace-bytes').textContent =
    `${sent} bytes sent so far; closed form ${trace.formula} = ${trace.formula_bytes} bytes ` +
    `in ${trace.formula_rounds} rounds (${trace.count} float64 elements per rank` +
    (trace.servers > 0 ? `, ${trace.servers} server shard${trace.servers > 1 ? 's' : ''})` : ')');
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
  const collective = $('trace-collective').value;
  const query = new URLSearchParams({ collective, n: $('trace-n').value,
                                      count: $('trace-count').value });
  if (parameterServers.has(collective)) query.set('servers', $('trace-servers').value);
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
  layout = layOut(trace);
  $('trace-svg').dataset.layout = layout.kind;
  $('trace-source').textContent = trace.note;
  $('trace-source').dataset.source = trace.source;
  drawLegend(trace.workers);
  draw();
}

export function step(by) {
  if (!trace) return;
  round = Math.max(-1, Math.min(trace.rounds.length - 1, round + by));
  draw();
}

// Shows the S field only for a collective that runs on the parameter server.
function showServersField() {
  $('trace-servers-field').hidden = !parameterServers.has($('trace-collective').value);
}

export function setUpTrace(collectives) {
  parameterServers = new Set(collectives.filter(c => c.parameter_server).map(c => c.name));
  $('trace-collective').addEventListener('change', showServersField);
  showServersField();
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
