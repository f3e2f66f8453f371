// `peer.mjs ceiling`: the throughput ceiling's load for the peer (npm
// redis-semaphore on ioredis), the same shape as fairsem_bench_ceiling
// (tests/bench/ceiling.cpp): T concurrent async loops in one node process,
// each looping acquire -> (hold) -> release over S semaphores {STEM-0} ..
// {STEM-(S-1)} (or as --spread picks them), for a fixed window, then one JSON
// line with grants, seconds, grants/s and grants by hash slot. Its keys are
// semaphore:{NAME}, in the slot of fairsem's semaphore NAME, so on a cluster
// both put the same load on the same masters.
//
//   node peer.mjs ceiling --port P [--cluster yes]
//     [--mode uncontended|contended] [--threads 16] [--semaphores S]
//     [--limit L] [--seconds 10] [--hold-us 0] [--stem ceil]
//     [--spread RANGES] [--start-at-ms EPOCH_MS] [--connections 1]
//
// Names, --spread and the modes are fairsem_bench_ceiling's (the same rule
// picks the same names): uncontended (limit 64, 1,000 semaphores, a random one
// per acquire) and contended (limit 1, 16 semaphores named ceilc-n, loop t on
// semaphore t % S). A waiting acquire is the peer's own: it polls every
// retryInterval (10 ms by default). --hold-us is rounded up to whole ms.
//
// The loops share --connections ioredis clients (loop t uses client t % N; one
// by default, as a node process normally has, its commands pipelined by
// ioredis); with --cluster yes each is an ioredis Cluster seeded with --port.

import { createRequire } from 'node:module';
import path from 'node:path';

// No acquire of a run may time out (the default acquireTimeout is 10 s).
const ACQUIRE_TIMEOUT_MS = 10 * 60 * 1000;

function now() {
  return process.hrtime.bigint();
}

function sleepMs(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function number(opts, name, fallback, min, fail) {
  if (opts[name] === undefined) return fallback;
  const value = Number(opts[name]);
  if (!Number.isFinite(value) || value < min) {
    fail(`--${name} must be a number >= ${min}, got '${opts[name]}'`);
  }
  return value;
}

// One ioredis client (or Cluster), connected and answering.
async function connect(peer, host, port, cluster, fail) {
  const client = cluster
    ? new peer.Redis.Cluster([{ host, port }], {
        clusterRetryStrategy: () => null,
        redisOptions: { retryStrategy: () => null },
      })
    : new peer.Redis({
        host,
        port,
        lazyConnect: true,
        retryStrategy: () => null,
      });
  client.on('error', (err) => fail(`redis connection error: ${err.message}`));
  if (cluster) {
    await new Promise((resolve) => client.once('ready', resolve));
  } else {
    await client.connect();
  }
  await client.ping();
  return client;
}

// The semaphores' names, as names() in ceiling.cpp picks them: STEM-0 ..
// STEM-(S-1), or with --spread ("0-5460,5461-10922,10923-16383": a group of
// '+'-joined slot ranges per master) name i is the next of STEM-0, STEM-1, ...
// whose hash slot lies in group i % groups.
function names(stem, count, spread, keySlot, fail) {
  const groups = (spread ?? '')
    .split(',')
    .filter((group) => group !== '')
    .map((group) =>
      group.split('+').map((range) => {
        const [first, last] = range.split('-').map(Number);
        if (!(first >= 0 && last >= first && last < 16384)) {
          fail(`--spread: bad range '${range}'`);
        }
        return [first, last];
      })
    );
  const out = [];
  for (let n = 0; out.length < count; n++) {
    const name = `${stem}-${n}`;
    const slot = keySlot(name);
    const group = groups[out.length % groups.length];
    const inGroup = (range) => range[0] <= slot && slot <= range[1];
    if (!group || group.some(inGroup)) out.push(name);
  }
  return out;
}

export async function runCeiling(peer, opts, { host, fail }) {
  const mode = opts.mode ?? 'uncontended';
  if (mode !== 'uncontended' && mode !== 'contended') {
    fail(`--mode must be uncontended or contended, got '${mode}'`);
  }
  const contended = mode === 'contended';
  const port = number(opts, 'port', undefined, 1, fail);
  if (port === undefined) fail('missing --port');
  const cluster = opts.cluster === 'yes';
  const threads = number(opts, 'threads', 16, 1, fail);
  const semaphores = number(opts, 'semaphores', contended ? 16 : 1000, 1, fail);
  const limit = number(opts, 'limit', contended ? 1 : 64, 1, fail);
  const seconds = number(opts, 'seconds', 10, 0.1, fail);
  const holdUs = number(opts, 'hold-us', 0, 0, fail);
  const startAtMs = number(opts, 'start-at-ms', 0, 0, fail);
  const connections = number(opts, 'connections', 1, 1, fail);
  const stem = opts.stem ?? (contended ? 'ceilc' : 'ceil');

  // The peer's own hash-slot function (ioredis routes with it).
  const require = createRequire(
    path.join(path.resolve(process.env.FAIRSEM_PEER_MODULES), 'package.json')
  );
  const keySlot = require('cluster-key-slot');
  const named = names(stem, semaphores, opts.spread, keySlot, fail);

  const clients = [];
  for (let i = 0; i < connections; i++) {
    clients.push(await connect(peer, host, port, cluster, fail));
  }

  // The window: from --start-at-ms (shared by the processes ceiling.sh starts)
  // or from now.
  let lateMs = 0;
  if (startAtMs > 0) {
    const wait = startAtMs - Date.now();
    if (wait > 0) await sleepMs(wait);
    else lateMs = -wait;
    if (lateMs > 0) {
      process.stderr.write(
        `peer.mjs: ready ${lateMs} ms after --start-at-ms\n`
      );
    }
  }
  const endNs = now() + BigInt(Math.round(seconds * 1e9));

  const grants = new Array(semaphores).fill(0);
  const loop = async (index) => {
    const client = clients[index % clients.length];
    while (now() < endNs) {
      const i = contended
        ? index % semaphores
        : Math.floor(Math.random() * semaphores);
      const sem = new peer.Semaphore(client, `{${named[i]}}`, limit, {
        acquireTimeout: ACQUIRE_TIMEOUT_MS,
      });
      await sem.acquire();
      if (holdUs > 0) await sleepMs(Math.ceil(holdUs / 1000));
      await sem.release();
      if (now() < endNs) grants[i] += 1;
    }
  };
  const loops = [];
  for (let t = 0; t < threads; t++) loops.push(loop(t));
  await Promise.all(loops);
  await Promise.all(clients.map((client) => client.quit()));

  const bySlot = {};
  let total = 0;
  grants.forEach((n, i) => {
    if (n === 0) return;
    total += n;
    const slot = keySlot(`semaphore:{${named[i]}}`);
    bySlot[slot] = (bySlot[slot] ?? 0) + n;
  });
  return {
    impl: 'redis-semaphore',
    version: peer.version,
    ioredis: peer.ioredisVersion,
    mode,
    threads,
    semaphores,
    limit,
    hold_us: holdUs,
    seconds,
    connections,
    grants: total,
    grants_per_s: total / seconds,
    late_ms: lateMs,
    failed_threads: 0,
    grants_by_slot: bySlot,
  };
}
