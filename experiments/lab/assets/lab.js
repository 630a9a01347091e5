// The lab page's entry: wires the four parts and fills the collective lists
// from the registry (/api/collectives), never from a list of its own.
import { api, $, fillCollectives } from './api.js';
import { setUpTrace, loadTrace } from './trace.js';
import { setUpMeasure } from './measure.js';
import { setUpMemory } from './memory.js';
import { setUpZeroTraffic } from './zero.js';
import { refreshResults } from './results.js';

async function start() {
  const collectives = await api('/api/collectives');
  fillCollectives($('trace-collective'), collectives, c => c.traceable, 'ring');
  fillCollectives($('run-collective'), collectives, () => true, 'ring');
  setUpTrace();
  setUpMeasure();
  setUpZeroTraffic();
  await Promise.all([loadTrace(), setUpMemory(), refreshResults()]);
  $('status').textContent = 'ready';
}

start().catch(error => { $('status').textContent = `error: ${error.message}`; });
