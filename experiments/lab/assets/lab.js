// The lab page's entry: wires the four parts and fills the collective lists
// from the registry (/api/collectives), never from a list of its own.
import { api, $, fillCollectives } from './api.js';
import { setUpTrace, loadTrace } from './trace.js';
import { setUpMeasure } from './measure.js';
import { setUpMemory } from './memory.js';
import { setUpZeroTraffic } from './zero.js';
import { refreshResults } from './results.js';

// Where runs go; on links of a known rate (the emulated cluster), the model's
// link starts at that rate, and N is capped at the workers the lab has.
async function showDeployment() {
  const lab = await api('/api/lab');
  $('lab-runs-on').textContent = lab.runs_on;
  if (lab.link_gbit > 0) $('run-rate').value = String(lab.link_gbit);
  for (const id of ['run-n', 'zero-n']) $(id).max = String(lab.max_workers);
}

async function start() {
  await showDeployment();
  const collectives = await api('/api/collectives');
  fillCollectives($('trace-collective'), collectives, c => c.traceable, 'ring');
  fillCollectives($('run-collective'), collectives, () => true, 'ring');
  setUpTrace(collectives);
  setUpMeasure();
  setUpZeroTraffic();
  await Promise.all([loadTrace(), setUpMemory(), refreshResults()]);
  $('status').textContent = 'ready';
}

start().catch(error => { $('status').textContent = `error: ${error.message}`; });
