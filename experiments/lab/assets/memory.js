// The Memory part: ZeRO stages 0-3 per card and the pipeline bubble, both
// computed by the server (/api/memory) with the course's accounting.
import { api, $, oneDecimal } from './api.js';

let latest = 0;  // the newest request: an older answer arriving late is dropped

async function update() {
  const billions = Number($('mem-params').value);
  const card = Number($('mem-card').value);
  if (!Number.isFinite(billions) || billions <= 0 || !Number.isFinite(card) || card <= 0) {
    $('mem-message').textContent = 'parameters and card size must be positive numbers';
    return;
  }
  const query = new URLSearchParams({
    params: String(billions * 1e9), gpus: $('mem-gpus').value,
    stages: $('bubble-stages').value, micro_batches: $('bubble-micro').value,
  });
  const request = ++latest;
  let memory;
  try {
    memory = await api(`/api/memory?${query}`);
    if (request !== latest) return;
    $('mem-message').textContent = '';
  } catch (error) {
    if (request === latest) $('mem-message').textContent = error.message;
    return;
  }
  $('mem-table').tBodies[0].replaceChildren(...memory.zero.map(stage => {
    const tr = document.createElement('tr');
    tr.dataset.stage = stage.stage;
    const fits = stage.gb_per_gpu <= card;
    tr.innerHTML = `<td>${stage.stage}</td><td style="text-align:left">${stage.sharded}</td>` +
      `<td class="gb">${oneDecimal(stage.gb_per_gpu)}</td>` +
      `<td class="${fits ? 'fits' : 'no-fit'}">${fits ? 'fits' : 'does not fit'}</td>` +
      `<td>${stage.traffic_vs_ddp}&times;</td>`;
    return tr;
  }));
  const pipeline = memory.pipeline;
  $('bubble-fraction').textContent = `${oneDecimal(100 * pipeline.bubble)}%`;
  $('bubble-gpipe').textContent = pipeline.gpipe_activations;
  $('bubble-1f1b').textContent = pipeline.one_f_one_b_activations;
}

export function setUpMemory() {
  for (const id of ['mem-params', 'mem-gpus', 'mem-card', 'bubble-stages', 'bubble-micro']) {
    $(id).addEventListener('input', update);
  }
  for (const form of ['mem-form', 'bubble-form']) {
    $(form).addEventListener('submit', event => event.preventDefault());
  }
  return update();
}
