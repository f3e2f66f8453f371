// Benchmark driver for the comparison peer: the npm package `redis-semaphore`
// (v5.x) on top of `ioredis`.
//
// The packages are not part of this repository. Install them anywhere, e.g.
//   mkdir -p /tmp/peer-npm && cd /tmp/peer-npm && npm init -y &&
//   npm install redis-semaphore ioredis
// and point FAIRSEM_PEER_MODULES at the directory holding node_modules.
//
// Usage:
//   node peer.mjs pair --port P --iterations N [--key K]
//   node peer.mjs contention --port P --clients C --limit L --hold-ms H
//     --seconds S --mode threads|processes --out FILE [--key K] [--weights W]
//   node peer.mjs ceiling --port P [--mode uncontended|contended] ...
//     (the throughput ceiling's load: see ceiling.mjs)
//
// --weights 1,4 is the weighted scenario (issue 16): client i asks for
// W[i % W.length] units each time, through MultiSemaphore(client, key, limit,
// units), the peer's only way to take several permits at once. Each acquire
// then gives up when the run ends (acquireTimeout = time left), so a request
// that never got its units is recorded instead of making the run wait for it:
//   client,ask_ns,-1,gave_up_ns,-1,units
// A granted request is client,ask_ns,enter_ns,release_ns,-1,units. Without
// --weights the records keep their five fields and every acquire waits.
//
// Times come from process.hrtime.bigint(), i.e. CLOCK_MONOTONIC nanoseconds on
// Linux, the same clock as std::chrono::steady_clock on the C++ side.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { runCeiling } from './ceiling.mjs';

const HOST = '127.0.0.1';
const IMPL = 'redis-semaphore';

// The only non-default library option: a 10 minute acquireTimeout, so that no
// acquire() times out during a run (the default is 10 s).
const ACQUIRE_TIMEOUT_MS = 10 * 60 * 1000;

const PAIR_WARMUP = 200;
// Head start given to child processes so all of them are connected at start.
const CHILD_START_DELAY_NS = 1500n * 1000000n;

// ---------------------------------------------------------------------------
// Helpers

function fail(message) {
  process.stderr.write(`peer.mjs: ${message}\n`);
  process.exit(1);
}

// Load redis-semaphore and ioredis from $FAIRSEM_PEER_MODULES/node_modules.
function loadPeer() {
  const dir = process.env.FAIRSEM_PEER_MODULES;
  if (!dir) {
    fail(
      'FAIRSEM_PEER_MODULES is not set; point it at the directory whose ' +
        'node_modules holds redis-semaphore and ioredis'
    );
  }
  const require = createRequire(path.join(path.resolve(dir), 'package.json'));
  let semaphoreModule;
  let Redis;
  try {
    semaphoreModule = require('redis-semaphore');
    Redis = require('ioredis');
  } catch (err) {
    fail(`cannot load redis-semaphore/ioredis from ${dir}: ${err.message}`);
  }
  for (const name of ['Semaphore', 'MultiSemaphore']) {
    if (typeof semaphoreModule[name] !== 'function') {
      fail(`redis-semaphore does not export ${name}`);
    }
  }
  return {
    Semaphore: semaphoreModule.Semaphore,
    MultiSemaphore: semaphoreModule.MultiSemaphore,
    Redis,
    version: require('redis-semaphore/package.json').version,
    ioredisVersion: require('ioredis/package.json').version,
  };
}

// Parse `--name value` pairs after the subcommand into an object.
function parseArgs(argv) {
  const opts = {};
  for (let i = 0; i < argv.length; i += 2) {
    const name = argv[i];
    if (!name.startsWith('--') || i + 1 >= argv.length) {
      fail(`bad argument '${name}' (expected --name value)`);
    }
    opts[name.slice(2)] = argv[i + 1];
  }
  return opts;
}

function requireString(opts, name) {
  const value = opts[name];
  if (value === undefined || value === '') fail(`missing --${name}`);
  return value;
}

function requireInt(opts, name, min) {
  const text = requireString(opts, name);
  const value = Number(text);
  if (!Number.isInteger(value) || value < min) {
    fail(`--${name} must be an integer >= ${min}, got '${text}'`);
  }
  return value;
}

function now() {
  return process.hrtime.bigint();
}

function sleepMs(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Sleep until at least `ms` milliseconds after `fromNs`. A bare setTimeout can
// wake a fraction of a millisecond early (libuv keeps whole-ms loop time).
async function holdUntil(fromNs, ms) {
  const target = fromNs + BigInt(ms) * 1000000n;
  for (let left = target - now(); left > 0n; left = target - now()) {
    await sleepMs(Math.ceil(Number(left) / 1e6));
  }
}

// Connect one ioredis client and make sure it answers. Reconnection is off so
// that a lost or refused connection fails the run instead of being retried.
async function connect(peer, port) {
  const client = new peer.Redis({
    host: HOST,
    port,
    lazyConnect: true,
    retryStrategy: () => null,
  });
  client.on('error', (err) => fail(`redis connection error: ${err.message}`));
  await client.connect();
  await client.ping();
  return client;
}

// Delete the library's key so that a stale holder from an earlier, aborted
// run cannot occupy permits (redis-semaphore stores `semaphore:<key>`).
async function resetKey(client, key) {
  await client.del(`semaphore:${key}`);
}

function newSemaphore(peer, client, key, limit) {
  return new peer.Semaphore(client, key, limit, {
    acquireTimeout: ACQUIRE_TIMEOUT_MS,
  });
}

// The weighted scenario's semaphore: `units` of `limit` at once. It shares the
// sorted set `semaphore:<key>` with Semaphore (one member per unit). The
// acquire gives up after `timeoutMs`; retryInterval stays at its default
// (10 ms): the peer's own way of waiting, polled, with no queue.
function newMultiSemaphore(peer, client, key, limit, units, timeoutMs) {
  return new peer.MultiSemaphore(client, key, limit, units, {
    acquireTimeout: timeoutMs,
  });
}

// Nearest-rank percentile of an ascending array.
function percentile(sorted, p) {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

function round3(x) {
  return Math.round(x * 1000) / 1000;
}

// ---------------------------------------------------------------------------
// pair: uncontended acquire + release latency, one client, limit 1

async function runPair(peer, opts) {
  const port = requireInt(opts, 'port', 1);
  const iterations = requireInt(opts, 'iterations', 1);
  const key = opts.key ?? 'bench-pair';

  const client = await connect(peer, port);
  await resetKey(client, key);

  const once = async () => {
    const sem = newSemaphore(peer, client, key, 1);
    await sem.acquire();
    await sem.release();
  };

  for (let i = 0; i < PAIR_WARMUP; i++) await once();

  const samples = new Float64Array(iterations);
  for (let i = 0; i < iterations; i++) {
    const t0 = now();
    await once();
    const t1 = now();
    samples[i] = Number(t1 - t0) / 1000;
  }
  await client.quit();

  samples.sort();
  const mean = samples.reduce((sum, x) => sum + x, 0) / iterations;
  return {
    impl: IMPL,
    version: peer.version,
    ioredis: peer.ioredisVersion,
    scenario: 'pair',
    iterations,
    p50_us: round3(percentile(samples, 50)),
    p90_us: round3(percentile(samples, 90)),
    p99_us: round3(percentile(samples, 99)),
    mean_us: round3(mean),
  };
}

// ---------------------------------------------------------------------------
// contention: C clients, each with its own connection, loop on one semaphore

function contentionParams(opts) {
  const params = {
    port: requireInt(opts, 'port', 1),
    limit: requireInt(opts, 'limit', 1),
    holdMs: requireInt(opts, 'hold-ms', 0),
    seconds: requireInt(opts, 'seconds', 1),
    key: opts.key ?? 'bench-contention',
    weights: null,
  };
  if (opts.weights !== undefined) {
    params.weights = opts.weights.split(',').map((text) => {
      const units = Number(text);
      if (!Number.isInteger(units) || units < 1 || units > params.limit) {
        fail(`--weights: '${text}' is not a whole number from 1 to the limit`);
      }
      return units;
    });
  }
  return params;
}

function unitsOf(params, index) {
  return params.weights ? params.weights[index % params.weights.length] : 1;
}

// One client's loop. Asks for the permit until endNs; a grant asked for before
// endNs is finished and released even if that happens after endNs. Returns
// record lines `client,ask_ns,enter_ns,release_ns,-1` (no fencing token).
async function clientLoop(peer, client, index, params, endNs) {
  if (params.weights) return weightedLoop(peer, client, index, params, endNs);
  const lines = [];
  while (now() < endNs) {
    const ask = now();
    const sem = newSemaphore(peer, client, params.key, params.limit);
    await sem.acquire();
    const enter = now();
    await holdUntil(enter, params.holdMs);
    const rel = now();
    await sem.release();
    lines.push(`${index},${ask},${enter},${rel},-1\n`);
  }
  return lines;
}

// The weighted loop: MultiSemaphore for this client's units, every acquire
// bounded by the end of the run. A request still not granted then is recorded
// with enter_ns -1 and the time it gave up, and the loop ends.
async function weightedLoop(peer, client, index, params, endNs) {
  const units = unitsOf(params, index);
  const lines = [];
  for (let ask = now(); ask < endNs; ask = now()) {
    // acquireTimeout is compared with Date.now() (whole ms): round up, so the
    // request never gives up before the run's end.
    const leftMs = Math.max(1, Math.ceil(Number(endNs - ask) / 1e6));
    const sem = newMultiSemaphore(peer, client, params.key, params.limit, units, leftMs);
    const granted = await sem.tryAcquire();
    const enter = now();
    if (!granted) {
      lines.push(`${index},${ask},-1,${enter},-1,${units}\n`);
      break;
    }
    await holdUntil(enter, params.holdMs);
    const rel = now();
    await sem.release();
    lines.push(`${index},${ask},${enter},${rel},-1,${units}\n`);
  }
  return lines;
}

// Per weight: grants, waits of the granted requests and the requests still
// waiting when the run ended (a quick look; fairsem_contention --external
// analyses the same records for the write-up).
function weightedSummary(lines) {
  const byUnits = {};
  for (const line of lines) {
    const [, ask, enter, rel, , units] = line.trim().split(',').map(BigInt);
    const w = (byUnits[units] ??= { grants: 0, waiting_at_end: 0, waits: [] });
    if (enter < 0n) {
      w.waiting_at_end += 1;
      w.oldest_waiting_at_end_us = Math.max(
        w.oldest_waiting_at_end_us ?? 0,
        Number(rel - ask) / 1000
      );
    } else {
      w.grants += 1;
      w.waits.push(Number(enter - ask) / 1000);
    }
  }
  for (const w of Object.values(byUnits)) {
    const sorted = Float64Array.from(w.waits).sort();
    delete w.waits;
    if (sorted.length > 0) {
      w.wait_p50_us = round3(percentile(sorted, 50));
      w.wait_p99_us = round3(percentile(sorted, 99));
      w.wait_max_us = round3(sorted[sorted.length - 1]);
    }
  }
  return byUnits;
}

// Wait until hrtime >= ns. Sleeps in chunks of at most 50 ms (the kernel pads
// a long timer by ~0.1% of its length), then spins for the last millisecond.
async function waitUntil(ns) {
  for (let left = ns - now(); left > 0n; left = ns - now()) {
    const ms = Number(left) / 1e6;
    if (ms > 2) await sleepMs(Math.min(Math.floor(ms - 1), 50));
    else await new Promise((resolve) => setImmediate(resolve));
  }
}

function contentionResult(peer, mode, clients, params, lines, out) {
  const result = {
    impl: IMPL,
    version: peer.version,
    ioredis: peer.ioredisVersion,
    scenario: 'contention',
    mode,
    clients,
    limit: params.limit,
    hold_ms: params.holdMs,
    seconds: params.seconds,
    grants: lines.filter((line) => !line.split(',')[2].startsWith('-')).length,
    records: out,
  };
  if (params.weights) {
    result.weights = params.weights;
    result.by_units = weightedSummary(lines);
  }
  return result;
}

async function runContention(peer, opts) {
  const params = contentionParams(opts);
  const clients = requireInt(opts, 'clients', 1);
  const mode = requireString(opts, 'mode');
  const out = requireString(opts, 'out');
  if (mode === 'threads') return runThreads(peer, params, clients, out);
  if (mode === 'processes') return runProcesses(peer, params, clients, out);
  fail(`--mode must be threads or processes, got '${mode}'`);
}

// All clients as concurrent async loops in this process.
async function runThreads(peer, params, clients, out) {
  const conns = [];
  for (let i = 0; i < clients; i++) {
    conns.push(await connect(peer, params.port));
  }
  await resetKey(conns[0], params.key);

  // Every client is connected; all loops start now, in the same tick.
  const endNs = now() + BigInt(params.seconds) * 1000000000n;
  const perClient = await Promise.all(
    conns.map((client, i) => clientLoop(peer, client, i, params, endNs))
  );
  await Promise.all(conns.map((client) => client.quit()));

  const lines = perClient.flat();
  fs.writeFileSync(out, lines.join(''));
  return contentionResult(peer, 'threads', clients, params, lines, out);
}

// One child process per client; they all start at a common monotonic instant.
async function runProcesses(peer, params, clients, out) {
  const admin = await connect(peer, params.port);
  await resetKey(admin, params.key);
  await admin.quit();

  const script = fileURLToPath(import.meta.url);
  const startNs = now() + CHILD_START_DELAY_NS;
  const children = [];
  for (let i = 0; i < clients; i++) {
    const args = [
      script,
      'contention-child',
      '--port', String(params.port),
      '--key', params.key,
      '--limit', String(params.limit),
      '--hold-ms', String(params.holdMs),
      '--seconds', String(params.seconds),
      '--client', String(i),
      '--start-ns', String(startNs),
      '--out', `${out}.${i}`,
    ];
    if (params.weights) args.push('--weights', params.weights.join(','));
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(
      new Promise((resolve) => {
        child.on('error', (err) => resolve(`spawn failed: ${err.message}`));
        child.on('exit', (code, signal) => {
          if (code === 0) resolve(null);
          else resolve(signal ? `killed by ${signal}` : `exit code ${code}`);
        });
      })
    );
  }

  const results = await Promise.all(children);
  const failed = results
    .map((why, i) => (why ? `child ${i}: ${why}` : null))
    .filter(Boolean);
  if (failed.length > 0) {
    for (let i = 0; i < clients; i++) fs.rmSync(`${out}.${i}`, { force: true });
    fail(`contention children failed: ${failed.join('; ')}`);
  }

  // Concatenate FILE.0 .. FILE.(C-1) into FILE, then remove the parts.
  const lines = [];
  const fd = fs.openSync(out, 'w');
  try {
    for (let i = 0; i < clients; i++) {
      const part = fs.readFileSync(`${out}.${i}`, 'utf8');
      for (const line of part.split('\n')) if (line !== '') lines.push(`${line}\n`);
      fs.writeSync(fd, part);
    }
  } finally {
    fs.closeSync(fd);
  }
  for (let i = 0; i < clients; i++) fs.unlinkSync(`${out}.${i}`);

  return contentionResult(peer, 'processes', clients, params, lines, out);
}

// Hidden subcommand run by runProcesses: one client, records go to --out.
async function runContentionChild(peer, opts) {
  const params = contentionParams(opts);
  const index = requireInt(opts, 'client', 0);
  const out = requireString(opts, 'out');
  const startText = requireString(opts, 'start-ns');
  if (!/^\d+$/.test(startText)) fail(`bad --start-ns '${startText}'`);
  const startNs = BigInt(startText);

  const client = await connect(peer, params.port);
  const late = now() - startNs;
  if (late > 0n) {
    process.stderr.write(
      `peer.mjs: warning: child ${index} was ready ` +
        `${Number(late / 1000n) / 1000} ms after the common start\n`
    );
  }
  await waitUntil(startNs);

  const endNs = startNs + BigInt(params.seconds) * 1000000000n;
  const lines = await clientLoop(peer, client, index, params, endNs);
  await client.quit();
  fs.writeFileSync(out, lines.join(''));
  return null;
}

// ---------------------------------------------------------------------------

async function main() {
  const [command, ...rest] = process.argv.slice(2);
  const commands = {
    pair: runPair,
    contention: runContention,
    'contention-child': runContentionChild,
    ceiling: (peer, opts) => runCeiling(peer, opts, { host: HOST, fail }),
  };
  const run = commands[command];
  if (!run) {
    fail(
      'usage: peer.mjs pair --port P --iterations N [--key K]\n' +
        '       peer.mjs contention --port P --clients C --limit L ' +
        '--hold-ms H --seconds S --mode threads|processes --out FILE [--key K] ' +
        '[--weights W1,W2,...]\n' +
        '       peer.mjs ceiling --port P [--cluster yes] ' +
        '[--mode uncontended|contended] [--threads T] [--semaphores S] ' +
        '[--limit L] [--seconds S] [--hold-us H] [--stem N] [--start-at-ms MS] ' +
        '[--connections C]'
    );
  }
  const opts = parseArgs(rest);
  const peer = loadPeer();
  const result = await run(peer, opts);
  if (result) process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().then(
  () => process.exit(0),
  (err) => fail(err && err.stack ? err.stack : String(err))
);
