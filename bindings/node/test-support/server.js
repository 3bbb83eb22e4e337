'use strict';
// Real ZooKeeper servers for the tests: the project's starter, tools/testing_server.rs
// ($ZKL_TESTING_SERVER_BIN, else the checkout's target/debug/examples/testing_server, built with
// cargo if missing), or the shared server that ZKLOCK_TEST_SERVER names (127.0.0.1:PORT).
// A started server ends when its standard input closes: when close() is called, or when this
// process ends in any way (the pipe closes with it), so none is left behind.

const { spawn, spawnSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');

const CHECKOUT = path.resolve(__dirname, '..', '..', '..');

/** The C library for the tests, unless ZKLOCK_LIBRARY names one: the checkout's build. */
function useCheckoutLibrary() {
  if (process.env.ZKLOCK_LIBRARY) return;
  for (const profile of ['release', 'debug']) {
    const file = path.join(CHECKOUT, 'target', profile, 'libzklock.so');
    if (fs.existsSync(file)) {
      process.env.ZKLOCK_LIBRARY = file;
      return;
    }
  }
  throw new Error('no libzklock.so in target/: run `cargo build --release --features capi --lib` '
    + '(or scripts/test-node.sh), or set ZKLOCK_LIBRARY');
}

function testingServerBin() {
  if (process.env.ZKL_TESTING_SERVER_BIN) return process.env.ZKL_TESTING_SERVER_BIN;
  const bin = path.join(process.env.CARGO_TARGET_DIR || path.join(CHECKOUT, 'target'),
    'debug', 'examples', 'testing_server');
  if (!fs.existsSync(bin)) {
    const built = spawnSync('cargo', ['build', '--quiet', '--features',
      process.env.ZKL_FEATURES || 'testing,cli,header', '--example', 'testing_server'],
    { cwd: CHECKOUT, stdio: ['ignore', 'inherit', 'inherit'] });
    if (built.status !== 0) throw new Error('cargo build --example testing_server failed');
  }
  return bin;
}

/** Asks the server at hosts "ruok": true for "imok". */
function ruok(hosts) {
  const [host, port] = hosts.replace(/^.*:\/\//, '').split('/')[0].split(',')[0].split(':');
  return new Promise((resolve) => {
    const s = net.connect(Number(port), host);
    let data = '';
    s.setTimeout(2000, () => s.destroy());
    s.on('connect', () => s.end('ruok'));
    s.on('data', (d) => { data += d; });
    s.on('close', () => resolve(data === 'imok'));
    s.on('error', () => resolve(false));
  });
}

/** Starts a server with the starter's `args` (['--tls', 'need'], ['--sasl', 'bob:pw']):
 * resolves to { hosts, files, close() }. Without args, the shared server if there is one. */
async function startServer(args = []) {
  if (!args.length && process.env.ZKLOCK_TEST_SERVER) {
    const hosts = process.env.ZKLOCK_TEST_SERVER;
    if (!(await ruok(hosts))) throw new Error(`ZKLOCK_TEST_SERVER=${hosts} does not answer ruok`);
    return { hosts, files: {}, close: async () => {} };
  }
  const child = spawn(testingServerBin(), args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let log = '';
  child.stderr.on('data', (d) => { log = (log + d).slice(-4000); });
  const lines = await new Promise((resolve, reject) => {
    let buf = '';
    const got = [];
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`testing_server ${args.join(' ')} did not start in 120 s: ${log}`));
    }, 120000);
    child.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line === '') {
          clearTimeout(timer);
          resolve(got);
          return;
        }
        got.push(line);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`testing_server ${args.join(' ')} exited (${code}): ${log}`));
    });
  });
  child.stdout.resume();
  // Not waited for by the test process's event loop: ending the process ends the server.
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr]) s.unref?.();
  const files = Object.fromEntries(lines.slice(1).map((l) => {
    const i = l.indexOf('=');
    return [l.slice(0, i), l.slice(i + 1)];
  }));
  return {
    hosts: lines[0],
    files,
    close() {
      return new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          resolve();
          return;
        }
        const timer = setTimeout(() => child.kill('SIGKILL'), 30000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.stdin.end();
      });
    },
  };
}

/** A lock path of one test alone. */
function uniquePath(name = 'node') {
  return `/nodetest/${name}-${crypto.randomUUID()}`;
}

/** Polls `predicate` (sync or async) until true, every 20 ms, at most `ms`: whether it was. */
async function waitFor(predicate, ms = 10000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await predicate()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

useCheckoutLibrary();

module.exports = { startServer, uniquePath, waitFor, ruok, CHECKOUT };

/** A TCP relay to `target` ("host:port") that a test can cut, as if the server went silent:
 * every relayed connection is destroyed and new ones are refused. { hosts, cut(), close() }. */
async function startProxy(target) {
  const [host, port] = target.split(':');
  const sockets = new Set();
  let cut = false;
  const listener = net.createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(port), host);
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      sockets.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
    }
  });
  await new Promise((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const doCut = () => {
    cut = true;
    for (const s of sockets) s.destroy();
    listener.close();
  };
  return { hosts: `127.0.0.1:${listener.address().port}`, cut: doCut, close: doCut };
}

module.exports.startProxy = startProxy;
