// Predict, then measure: the student's predictions are checked as numbers
// first; the run goes to the lab's queue (POST /api/run), its progress and
// rows are polled, then measured, model (/api/model, the alpha-beta model of
// the schedules) and prediction are drawn side by side, and each rank's
// rounds as a timeline.
import { api, $, svgElement, withToken } from './api.js';
import { refreshResults } from './results.js';

const kPollMs = 300;

// Each prediction: empty (none given) or a non-negative number.
function readPredictions() {
  const predictions = {};
  for (const [key, id, what] of [['bytes', 'predict-bytes', 'bytes in total'],
                                 ['rounds', 'predict-rounds', 'rounds'],
                                 ['time_us', 'predict-time', 'time']]) {
    const text = $(id).value.trim();
    if (text === '') continue;
    const value = Number(text);
    if (!Number.isFinite(value) || value < 0) {
      throw new Error(`your prediction of ${what} is not a number: '${text}'`);
    }
    predictions[key] = value;
  }
  return predictions;
}

// One bar chart: measured, model, prediction (absent ones left out).
function barChart(title, bars) {
  const shown = bars.filter(b => b.value !== undefined);
  const max = Math.max(...shown.map(b => b.value), 1e-9);
  const svg = svgElement('svg', { class: 'chart', viewBox: '0 0 300 175', width: 300, height: 175,
                                  'data-title': title });
  svg.append(svgElement('text', { x: 150, y: 14, 'text-anchor': 'middle', 'font-size': 12 }, title));
  shown.forEach((bar, i) => {
    const height = (100 * bar.value) / max;
    svg.append(svgElement('rect', { x: 30 + i * 85, y: 150 - height, width: 60, height,
                                    fill: bar.colour, 'data-series': bar.label,
                                    'data-value': bar.value }));
    svg.append(svgElement('text', { x: 60 + i * 85, y: 145 - height, 'text-anchor': 'middle',
                                    'font-size': 10 }, Number(bar.value.toPrecision(4))));
    svg.append(svgElement('text', { x: 60 + i * 85, y: 166, 'text-anchor': 'middle',
                                    'font-size': 11 }, bar.label));
  });
  return svg;
}

function drawCharts(row, model, predictions) {
  const bars = (measured, modelled, predicted) => [
    { label: 'measured', value: measured, colour: '#1565c0' },
    { label: 'model', value: modelled, colour: '#ef6c00' },
    { label: 'you', value: predicted, colour: '#6a1b9a' },
  ];
  $('run-charts').replaceChildren(
    barChart('time per iteration (µs)', bars(row.time_us_avg, model.time_us, predictions.time_us)),
    barChart('bytes on the wire, all ranks', bars(Number(row.payload_bytes_total), model.formula_bytes,
                                                   predictions.bytes)),
    barChart('rounds', bars(row.rounds, model.rounds, predictions.rounds)));
  const timeline = timelineChart(row);
  if (timeline !== null) $('run-charts').append(timeline);
}

// Each rank's rounds of the last timed iteration, back to back (the row's
// rank_round_counts and rank_round_end_us, whole microseconds from the rank's
// start): a track per rank, a bar per round, the slowest rank's track named.
// What `testbed local --timeline` writes for Perfetto, drawn on the page.
function timelineChart(row) {
  const counts = (row.rank_round_counts ?? []).map(Number);
  const ends = (row.rank_round_end_us ?? []).map(Number);
  if (counts.length === 0) return null;
  const tracks = [];
  for (let r = 0, at = 0; r < counts.length; at += counts[r], r++) {
    tracks.push(ends.slice(at, at + counts[r]));
  }
  const last = tracks.map(t => (t.length > 0 ? t[t.length - 1] : 0));
  const slowest = last.indexOf(Math.max(...last));
  const span = Math.max(...last, 1);
  const height = 22 + 18 * tracks.length;
  const svg = svgElement('svg', { class: 'timeline', viewBox: `0 0 600 ${height}`, width: 600, height,
                                  'data-title': 'rounds per rank' });
  svg.append(svgElement('text', { x: 300, y: 14, 'text-anchor': 'middle', 'font-size': 12 },
                        `each rank's rounds, last iteration (${Number(span.toPrecision(4))} µs)`));
  tracks.forEach((track, rank) => {
    const y = 22 + 18 * rank;
    svg.append(svgElement('text', { x: 0, y: y + 11, 'font-size': 10 },
                          `rank ${rank}${rank === slowest ? ' (slowest)' : ''}`));
    track.forEach((end, round) => {
      const start = round === 0 ? 0 : track[round - 1];
      const x = 90 + (500 * start) / span;
      const rect = svgElement('rect', { class: 'span', x, y, width: Math.max(0.5, (500 * (end - start)) / span),
                                        height: 14, fill: round % 2 === 0 ? '#1565c0' : '#64b5f6',
                                        'data-rank': rank, 'data-round': round, 'data-us': end - start });
      rect.append(svgElement('title', {}, `rank ${rank}, round ${round}: ${end - start} µs`));
      svg.append(rect);
    });
  });
  return svg;
}

const kRowColumns = ['algorithm', 'workers', 'bytes', 'time_us_avg', 'algbw_gbps',
                     'payload_bytes_total', 'theory_bytes_total', 'rounds', 'wrong'];

function showRows(rows) {
  const head = $('run-rows').tHead, body = $('run-rows').tBodies[0];
  head.innerHTML = `<tr>${kRowColumns.map(c => `<th>${c}</th>`).join('')}</tr>`;
  body.replaceChildren(...rows.map(row => {
    const tr = document.createElement('tr');
    tr.className = 'row';
    tr.innerHTML = kRowColumns.map(c => `<td data-column="${c}">${row[c] ?? ''}</td>`).join('');
    return tr;
  }));
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function pollRun(id) {
  for (;;) {
    const run = await api(`/api/run?id=${id}`);
    $('run-state').textContent = run.state === 'queued'
      ? `queued (${run.queued_ahead} ahead)` : run.state;
    $('run-progress').textContent = run.progress.join('\n');
    if (run.state === 'done' || run.state === 'failed') return run;
    await sleep(kPollMs);
  }
}

async function runExperiment() {
  $('run-message').textContent = '';
  let predictions;
  try {
    predictions = readPredictions();
  } catch (error) {
    $('run-message').textContent = error.message;
    return;
  }
  const experiment = { collective: $('run-collective').value, n: $('run-n').value,
                       bytes: $('run-bytes').value.trim() };
  const modelQuery = new URLSearchParams({ ...experiment, alpha_us: $('run-alpha').value.trim(),
                                           rate_gbit: $('run-rate').value.trim() });
  $('run-go').disabled = true;
  try {
    const model = await api(`/api/model?${modelQuery}`);  // bad input is refused before a run
    const { id } = await api(`/api/run?${new URLSearchParams(experiment)}`, { method: 'POST' });
    const run = await pollRun(id);
    showRows(run.rows);
    if (run.state === 'failed') {
      $('run-message').textContent = `the run failed: ${run.error}`;
    } else if (run.rows.length > 0) {
      drawCharts(run.rows[0], model, predictions);
      $('run-download').href = withToken(`/api/run.jsonl?id=${id}`);
      $('run-download').download = `lab-run-${id}.jsonl`;
      $('run-download').hidden = false;
    }
    await refreshResults();
  } catch (error) {
    $('run-message').textContent = error.message;
  } finally {
    $('run-go').disabled = false;
  }
}

export function setUpMeasure() {
  $('run-form').addEventListener('submit', event => { event.preventDefault(); runExperiment(); });
}
