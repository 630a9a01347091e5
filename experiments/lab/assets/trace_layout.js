// Where the Trace part puts its nodes, read off the trace's messages, never
// off the collective's name:
// - star: the trace has parameter-server shards and every message joins a
//   worker and a shard (ps): the shards in the middle, the workers around;
// - tree: the pairs that ever talk form a tree (tree, broadcast, reduce):
//   ranks hang in levels below rank 0;
// - butterfly: N = 2^d >= 4 and every round's messages are exchanges between
//   r and r XOR 2^k, one k per round (butterfly, halving-doubling): a grid that
//   projects the hypercube - r's even bits pick its column, its odd bits its
//   row - so each round's partners share a row or a column;
// - circle: anything else (ring, naive, ...).
// Coordinates are in the trace SVG's 900 x 560 viewBox. `bend` is how far an
// arrow bows off the straight line, as a share of its length: enough that the
// two arrows of an exchange part, and in the butterfly's grid that an arrow
// skipping a row or column passes beside the ranks between, not over them.

const CENTRE = { x: 450, y: 280 };

// `count` points on an ellipse around the centre, clockwise from `start`.
function ellipse(count, rx, ry, start = -Math.PI / 2) {
  return Array.from({ length: count }, (_, i) => {
    const angle = start + (2 * Math.PI * i) / count;
    return { x: CENTRE.x + rx * Math.cos(angle), y: CENTRE.y + ry * Math.sin(angle) };
  });
}

function isStar(trace) {
  const isShard = node => node >= trace.workers;
  const messages = trace.rounds.flatMap(round => round.messages);
  return trace.servers > 0 && messages.length > 0 &&
         messages.every(m => isShard(m.from) !== isShard(m.to));
}

function starPositions(trace) {
  const shards = trace.servers === 1 ? [CENTRE] : ellipse(trace.servers, 140, 70, Math.PI);
  return [...ellipse(trace.workers, 340, 220), ...shards];
}

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

function treePositions({ depth, order }) {
  const levels = Math.max(...depth);
  return depth.map((d, rank) => {
    const level = order.filter(r => depth[r] === d);
    return { x: (900 * (level.indexOf(rank) + 0.5)) / level.length,
             y: 50 + (460 * d) / Math.max(1, levels) };
  });
}

const isPowerOfTwo = x => x > 0 && (x & (x - 1)) === 0;

// The one 2^k every message of the round crosses (r -> r XOR 2^k); 0 for a
// round without messages, null when the round's messages cross other distances.
function exchangeDistance(round) {
  const distances = new Set(round.messages.map(m => m.from ^ m.to));
  if (distances.size === 0) return 0;
  const [distance] = distances;
  return distances.size === 1 && isPowerOfTwo(distance) ? distance : null;
}

// Some round where a pair sends both ways. (Not every pair of every round: with
// fewer elements than ranks a partner may have nothing left to send.)
const exchangesBothWays = trace => trace.rounds.some(round => {
  const sent = new Set(round.messages.map(m => `${m.from}>${m.to}`));
  return round.messages.some(m => sent.has(`${m.to}>${m.from}`));
});

function isButterfly(trace) {
  if (trace.servers > 0 || trace.workers < 4 || !isPowerOfTwo(trace.workers)) return false;
  const distances = trace.rounds.map(exchangeDistance);
  return !distances.includes(null) && distances.some(d => d > 0) && exchangesBothWays(trace);
}

// The bits of `rank` at positions first, first + 2, ..., packed into a number.
function everyOtherBit(rank, first) {
  let packed = 0;
  for (let bit = first, place = 0; (rank >> bit) > 0; bit += 2, place++) {
    packed |= ((rank >> bit) & 1) << place;
  }
  return packed;
}

function butterflyPositions(workers) {
  const dimensions = Math.log2(workers);
  const columns = 2 ** Math.ceil(dimensions / 2);
  const rows = 2 ** Math.floor(dimensions / 2);
  return Array.from({ length: workers }, (_, rank) => ({
    x: (900 * (everyOtherBit(rank, 0) + 0.5)) / columns,
    y: 60 + (440 * everyOtherBit(rank, 1)) / (rows - 1),
  }));
}

// {kind, positions: per node {x, y}, bend}.
export function layOut(trace) {
  if (isStar(trace)) return { kind: 'star', positions: starPositions(trace), bend: 0.12 };
  const tree = trace.servers > 0 ? null : treeDepths(trace);
  if (tree) return { kind: 'tree', positions: treePositions(tree), bend: 0.12 };
  if (isButterfly(trace)) {
    return { kind: 'butterfly', positions: butterflyPositions(trace.workers), bend: 0.42 };
  }
  const nodes = trace.workers + (trace.servers || 0);
  return { kind: 'circle', positions: ellipse(nodes, 330, 220), bend: 0.12 };
}
