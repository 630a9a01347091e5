// Browser test of `testbed lab` in Debian's chromium, headless, through
// puppeteer-core (installed by .ci/install-deps into this folder). Run the
// file itself, `node lab.test.mjs`, not `node --test`: exit 77 (skipped, no
// chromium or puppeteer) must reach CTest.
// Env: LAB_CMD (starts the lab; it prints a line with http://HOST:PORT/, and
// ?token=... off loopback) or LAB_URL (a lab already up); CHROMIUM (default /usr/bin/chromium); SHOT
// (screenshot path). Every process it starts it ends by PID, also on failure.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';

const SKIP = 77;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(CHROMIUM)) {
  console.log(`SKIP: ${CHROMIUM} not found (.ci/install-deps installs chromium)`);
  process.exit(SKIP);
}
let puppeteer;
try {
  ({ default: puppeteer } = await import('puppeteer-core'));  // after the chromium check
} catch {
  console.log('SKIP: puppeteer-core not installed (.ci/install-deps: npm ci in tests/browser)');
  process.exit(SKIP);
}

let server, browser, page, url = process.env.LAB_URL;
const pageErrors = [];

// Whatever happens, no process of ours outlives the test.
function killByPid(pid) {
  if (!pid) return;
  try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
}
process.on('exit', () => { killByPid(server?.pid); killByPid(browser?.process()?.pid); });
// CTest's TIMEOUT (180 s) would SIGKILL node and leave the lab behind: give up
// first, through process.exit, so the handler above still ends them.
setTimeout(() => { console.log('# lab.test.mjs ran past 150 s: giving up'); process.exit(1); },
           150000).unref();

function startServer(cmd) {
  return new Promise((resolve, reject) => {
    server = spawn('sh', ['-c', `exec ${cmd}`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error('the lab printed no URL in 10 s')), 10000);
    server.stdout.on('data', d => {
      const m = (out += d).match(/http:\/\/[\w.:\[\]-]+:\d+\/(\?token=\w+)?/);
      if (m) { clearTimeout(timer); resolve(m[0]); }
    });
    server.on('exit', code => { clearTimeout(timer); reject(new Error(`the lab exited ${code}`)); });
  });
}

// SIGTERM (the lab ends its daemons), SIGKILL if it has not gone in 10 s.
async function stopServer() {
  if (!server || server.exitCode !== null || server.signalCode !== null) return;
  const gone = new Promise(resolve => server.once('exit', resolve));
  server.kill('SIGTERM');
  const timer = setTimeout(() => killByPid(server.pid), 10000);
  await gone;
  clearTimeout(timer);
}

before(async () => {
  if (!url) url = await startServer(process.env.LAB_CMD);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu'],  // --no-sandbox: required as root
  });
  page = await browser.newPage();
  page.setDefaultTimeout(5000);
  await page.setViewport({ width: 1200, height: 2400 });
  page.on('pageerror', e => pageErrors.push(e.message));
});

after(async () => {
  const pid = browser?.process()?.pid;
  await Promise.race([browser?.close(), new Promise(r => setTimeout(r, 5000))]).catch(() => {});
  killByPid(pid);
  await stopServer();
});

// The lab's JSON, with the page's token when its address has one.
async function api(path) {
  const address = new URL(path, url);
  const token = new URL(url).searchParams.get('token');
  if (token) address.searchParams.set('token', token);
  return (await fetch(address)).json();
}
const text = selector => page.$eval(selector, e => e.textContent);
const popcount = mask => { let n = 0; for (; mask; mask &= mask - 1) n++; return n; };

async function setValue(selector, value) {
  await page.$eval(selector, (e, v) => {
    e.value = v;
    e.dispatchEvent(new Event('input', { bubbles: true }));
  }, value);
}

test('the page loads, fills its lists from the registry, and runs without errors', async () => {
  const response = await page.goto(url, { waitUntil: 'load' });
  assert.equal(response.status(), 200);
  await page.waitForFunction(() => document.querySelector('#status').textContent === 'ready');
  const registry = (await api('/api/collectives')).map(c => c.name);
  assert.deepEqual(await page.$$eval('#run-collective option', l => l.map(o => o.value)), registry);
  assert.equal(await text('#lab-runs-on'), (await api('/api/lab')).runs_on);
  assert.match(await text('#lab-runs-on'), /loopback/);
  assert.deepEqual(pageErrors, []);
});

test('ring N=4: every round\'s block colours match /api/trace', async () => {
  await page.select('#trace-collective', 'ring');
  await setValue('#trace-n', '4');
  await setValue('#trace-count', '8');
  await page.click('#trace-load');
  await page.waitForFunction(() => document.querySelector('#trace-round').dataset.round === '-1' &&
                                   document.querySelectorAll('rect.block').length === 32);
  const trace = await api('/api/trace?collective=ring&n=4&count=8');
  const legend = Object.fromEntries(await page.$$eval('#trace-legend span[data-holds]',
      l => l.map(s => [Number(s.dataset.holds), s.dataset.colour])));
  assert.equal(new Set(Object.values(legend)).size, 5, 'one colour per 0..4 ranks held');

  for (let round = -1; round < trace.rounds.length; round++) {
    if (round >= 0) await page.click('#trace-next');
    await page.waitForFunction(r => document.querySelector('#trace-round').dataset.round === String(r),
                               {}, round);
    const expected = round < 0 ? trace.initial : trace.rounds[round].buffers;
    const blocks = await page.$$eval('rect.block', l => l.map(b => ({
      rank: Number(b.dataset.rank), element: Number(b.dataset.element),
      holds: Number(b.dataset.holds), fill: b.getAttribute('fill') })));
    assert.equal(blocks.length, 32);
    for (const b of blocks) {
      const holds = popcount(expected[b.rank][b.element]);
      assert.equal(b.holds, holds, `round ${round}, rank ${b.rank}, element ${b.element}`);
      assert.equal(b.fill, legend[holds], `round ${round}, rank ${b.rank}, element ${b.element}`);
    }
    const arrows = await page.$$eval('#trace-svg .message', l => l.length);
    assert.equal(arrows, round < 0 ? 0 : trace.rounds[round].messages.length);
  }
  // The end: every block holds all four ranks, and the bytes meet the closed form.
  assert.match(await text('#trace-bytes'), new RegExp(`^${trace.formula_bytes} bytes sent`));
  assert.ok(await page.$eval('#trace-next', b => b.disabled));
});

test('bad input is a message on the page, not a broken page', async () => {
  await setValue('#trace-n', '17');
  await page.click('#trace-load');
  await page.waitForFunction(() => document.querySelector('#trace-message').textContent !== '');
  assert.match(await text('#trace-message'), /n must be 1\.\.16/);
  await setValue('#trace-n', '4');
  await page.click('#trace-load');
  await page.waitForFunction(() => document.querySelector('#trace-message').textContent === '');

  await setValue('#predict-time', 'soon');
  await page.click('#run-go');
  await page.waitForFunction(() => document.querySelector('#run-message').textContent !== '');
  assert.match(await text('#run-message'), /not a number/);
  await setValue('#predict-time', '');
  assert.deepEqual(pageErrors, []);
});

// Waits until the Memory table shows `figures` (each input fires a request;
// the page keeps only the newest answer), fails with what it shows instead.
async function expectStageGigabytes(figures) {
  const shown = () => page.$$eval('#mem-table tbody tr td.gb', l => l.map(td => td.textContent));
  await page.waitForFunction(f => JSON.stringify([...document.querySelectorAll('#mem-table tbody tr td.gb')]
                                                 .map(td => td.textContent)) === f,
                             {}, JSON.stringify(figures)).catch(() => {});
  assert.deepEqual(await shown(), figures);
}

test('Memory shows the course\'s ZeRO figures', async () => {
  await setValue('#mem-params', '7');
  await setValue('#mem-gpus', '8');
  await expectStageGigabytes(['112', '38.5', '26.3', '14']);
  await setValue('#mem-params', '7.5');
  await setValue('#mem-gpus', '64');
  await expectStageGigabytes(['120', '31.4', '16.6', '1.9']);
  await setValue('#bubble-stages', '4');
  await setValue('#bubble-micro', '8');
  await page.waitForFunction(() => document.querySelector('#bubble-fraction').textContent === '27.3%');
  await setValue('#mem-params', '7');
  await setValue('#mem-gpus', '8');
});

test('a tiny experiment runs from the page: its row, charts and the course table', async () => {
  await page.select('#run-collective', 'ring');
  await setValue('#run-n', '2');
  await setValue('#run-bytes', '4KiB');
  await setValue('#predict-bytes', '8192');
  await setValue('#predict-rounds', '2');
  await setValue('#predict-time', '100');
  await page.click('#run-go');
  // Ends with the run, or at once with the lab's message when it refuses it.
  await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#run-state').textContent) ||
                                   document.querySelector('#run-message').textContent !== '',
                             { timeout: 90000 });
  assert.equal(await text('#run-state'), 'done', await text('#run-message'));
  const rows = await page.$$eval('#run-rows tbody tr.row', l => l.map(tr => Object.fromEntries(
      [...tr.cells].map(td => [td.dataset.column, td.textContent]))));
  assert.equal(rows.length, 1);
  assert.equal(rows[0].algorithm, 'ring');
  assert.equal(rows[0].workers, '2');
  assert.equal(rows[0].bytes, '4096');
  assert.equal(rows[0].wrong, '0');
  assert.equal(await page.$$eval('#run-charts svg.chart', l => l.length), 3);
  // The timeline: a track per rank, a bar per round of the ring (2(N-1) = 2).
  const spans = await page.$$eval('#run-charts svg.timeline rect.span',
                                  l => l.map(r => [r.dataset.rank, r.dataset.round, Number(r.dataset.us)]));
  assert.deepEqual(spans.map(([rank, round]) => `${rank}:${round}`), ['0:0', '0:1', '1:0', '1:1']);
  assert.ok(spans.every(([, , us]) => us >= 0), JSON.stringify(spans));
  assert.match(await text('#run-charts svg.timeline'), /\(slowest\)/);
  await page.waitForFunction(() => Number(document.querySelector('#results-count').textContent) >= 1);
  assert.match(await text('#results-table'), /ring/);
  assert.deepEqual(pageErrors, []);
});

test('Memory measures ZeRO\'s traffic on the lab\'s cluster: stages 1 and 3 at 1.5x, stage 2 at 1x', async () => {
  await setValue('#zero-n', '2');
  await setValue('#zero-bytes', '64KiB');
  await page.click('#zero-go');
  await page.waitForFunction(() => ['done', 'failed'].includes(document.querySelector('#zero-state').textContent) ||
                                   document.querySelector('#zero-message').textContent !== '',
                             { timeout: 90000 });
  assert.equal(await text('#zero-state'), 'done', await text('#zero-message'));
  const column = cls => page.$$eval(`#zero-table tbody td.${cls}`, l => l.map(td => td.textContent));
  assert.deepEqual(await column('bytes-ratio'), ['1×', '1.5×', '1×', '1.5×']);
  assert.deepEqual(await column('model-ratio'), ['1×', '1.5×', '1×', '1.5×']);
  assert.deepEqual(pageErrors, []);
});

test('ranks are laid out by who talks to whom: trees hang from the root, rings circle', async () => {
  const layoutOf = async (collective, n) => {
    await page.select('#trace-collective', collective);
    await setValue('#trace-n', String(n));
    await page.click('#trace-load');
    await page.waitForFunction(k => document.querySelectorAll('rect.block').length === k * 8, {}, n);
    const top = await page.$$eval('rect.block', l => {
      const y = {};
      for (const b of l) y[b.dataset.rank] = Number(b.getAttribute('y'));
      return y;
    });
    return { kind: await page.$eval('#trace-svg', e => e.dataset.layout), top };
  };
  for (const collective of ['tree', 'broadcast', 'reduce']) {
    const { kind, top } = await layoutOf(collective, 8);
    assert.equal(kind, 'tree', collective);
    for (let r = 1; r < 8; r++) assert.ok(top[0] < top[r], `${collective}: rank 0 above rank ${r}`);
  }
  assert.equal((await layoutOf('ring', 4)).kind, 'circle');
  // Pairwise exchanges r <-> r XOR 2^k every round: the hypercube's grid, where
  // each round's partners share a row or a column.
  for (const collective of ['butterfly', 'halving-doubling']) {
    const { kind, top } = await layoutOf(collective, 8);
    assert.equal(kind, 'butterfly', collective);
    assert.equal(top[0], top[1], `${collective}: rank 0 and its bit-0 partner share a row`);
    assert.notEqual(top[0], top[2], `${collective}: rank 2 (bit 1) sits on another row`);
  }
  // At N = 6 the butterfly first folds ranks 4 and 5 in, one way: no longer pairwise.
  assert.equal((await layoutOf('butterfly', 6)).kind, 'circle');
  assert.deepEqual(pageErrors, []);
});

test('ps N=4: a star of workers round the shards, every block full after the pull', async () => {
  const blocksShown = count => page.waitForFunction(
      k => document.querySelectorAll('rect.block').length === k, {}, count);
  await page.select('#trace-collective', 'ps');
  assert.equal(await page.$eval('#trace-servers-field', e => e.hidden), false);
  await setValue('#trace-n', '4');
  await setValue('#trace-count', '8');
  await setValue('#trace-servers', '1');
  await page.click('#trace-load');
  await blocksShown(4 * 8 + 8);  // four workers, then the one shard's slice: all 8
  assert.equal(await page.$eval('#trace-svg', e => e.dataset.layout), 'star');
  assert.equal(await page.$eval('#trace-source', e => e.dataset.source), 'protocol');
  assert.match(await text('#trace-source'), /built from its protocol/);
  const labels = await page.$$eval('#trace-svg text.server', l => l.map(t => t.textContent));
  assert.deepEqual(labels, ['server 0']);
  const trace = await api('/api/trace?collective=ps&n=4&count=8&servers=1');
  for (let round = 0; round < 2; round++) {
    await page.click('#trace-next');
    await page.waitForFunction(
        r => document.querySelector('#trace-round').dataset.round === String(r), {}, round);
    assert.equal(await page.$$eval('#trace-svg .message', l => l.length), 4,
                 `round ${round}: one message per worker`);
  }
  const holds = await page.$$eval('rect.block', l => l.map(b => Number(b.dataset.holds)));
  assert.deepEqual(holds, Array(40).fill(4), 'after the pull every block holds all four');
  assert.match(await text('#trace-bytes'), new RegExp(`^${trace.formula_bytes} bytes sent`));
  assert.equal(trace.formula_bytes, 2 * 4 * 64, '2NM');

  await setValue('#trace-servers', '2');
  await page.click('#trace-load');
  await page.waitForFunction(
      () => document.querySelectorAll('#trace-svg text.server').length === 2);
  assert.equal(await page.$eval('#trace-svg', e => e.dataset.layout), 'star');
  await setValue('#trace-servers', '5');
  await page.click('#trace-load');
  await page.waitForFunction(() => document.querySelector('#trace-message').textContent !== '');
  assert.match(await text('#trace-message'), /servers must be 1\.\.4/);
  await setValue('#trace-servers', '1');
  await page.select('#trace-collective', 'ring');
  assert.equal(await page.$eval('#trace-servers-field', e => e.hidden), true);
  assert.deepEqual(pageErrors, []);
});

test('a screenshot of the whole page, the ring mid-way', async () => {
  await page.select('#trace-collective', 'ring');
  await setValue('#trace-n', '4');
  await page.click('#trace-load');
  await page.waitForFunction(() => document.querySelector('#trace-round').dataset.round === '-1' &&
                                   document.querySelectorAll('rect.block').length === 32);
  for (let i = 0; i < 3; i++) await page.click('#trace-next');
  await page.waitForFunction(() => document.querySelector('#trace-round').dataset.round === '2');
  await page.screenshot({ path: process.env.SHOT || 'lab.png', fullPage: true });
});
