// The Memory part's measured traffic: one experiment on the lab's cluster runs
// the ring all-reduce, reduce-scatter and all-gather on the same vector
// (POST /api/zero-traffic); the lab sums them per ZeRO stage - DDP all-reduces,
// stages 1 and 2 reduce-scatter + all-gather, stage 3 one all-gather more -
// and the table sets measured bytes and time beside the calculator's 1x / 1.5x.
import { api, $ } from './api.js';
import { refreshResults } from './results.js';

const kPollMs = 300;
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const twoDecimals = x => String(Number(x.toFixed(2)));

async function pollZero(id) {
  for (;;) {
    const run = await api(`/api/zero-traffic?id=${id}`);
    $('zero-state').textContent = run.state === 'queued'
      ? `queued (${run.queued_ahead} ahead)` : run.state;
    if (run.state === 'done' || run.state === 'failed') return run;
    await sleep(kPollMs);
  }
}

function showStages(stages) {
  $('zero-table').tBodies[0].replaceChildren(...stages.map(s => {
    const tr = document.createElement('tr');
    tr.dataset.stage = s.stage;
    tr.innerHTML = `<td>${s.stage}</td><td style="text-align:left">${s.collectives}</td>` +
      `<td>${Math.round(s.bytes)}</td>` +
      `<td class="bytes-ratio">${twoDecimals(s.bytes_vs_ddp)}&times;</td>` +
      `<td>${Math.round(s.time_us)}</td><td>${twoDecimals(s.time_vs_ddp)}&times;</td>` +
      `<td class="model-ratio">${s.model_vs_ddp}&times;</td>`;
    return tr;
  }));
}

async function measureZero() {
  $('zero-message').textContent = '';
  $('zero-go').disabled = true;
  try {
    const query = new URLSearchParams({ n: $('zero-n').value,
                                        bytes: $('zero-bytes').value.trim() });
    const { id } = await api(`/api/zero-traffic?${query}`, { method: 'POST' });
    const run = await pollZero(id);
    if (run.state === 'failed') $('zero-message').textContent = `the run failed: ${run.error}`;
    showStages(run.stages);
    await refreshResults();
  } catch (error) {
    $('zero-message').textContent = error.message;
  } finally {
    $('zero-go').disabled = false;
  }
}

export function setUpZeroTraffic() {
  $('zero-form').addEventListener('submit', event => { event.preventDefault(); measureZero(); });
}
