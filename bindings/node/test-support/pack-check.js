'use strict';
// The packed package, installed in a fresh directory (APP), takes a lock against a real
// server with nothing from the checkout: no ZKLOCK_LIBRARY (it loads the library bundled in
// its native/), no path into bindings/node. Run by scripts/test-node.sh:
//   node test-support/pack-check.js APP

const { spawnSync } = require('node:child_process');
const { startServer } = require('./server');

const app = process.argv[2];
const program = `
const zklock = require('zklock');
(async () => {
  const client = await zklock.connect(process.argv[1], { sessionTimeout: 10000 });
  const guard = await client.mutex('/nodetest/pack-' + process.pid).acquire({ timeout: 5000 });
  console.log('held', guard.isHeld, 'token', String(guard.fencingToken), 'library', zklock.version());
  await guard.release();
  await client.close();
})().catch((e) => { console.error(e); process.exit(1); });
`;

(async () => {
  const server = await startServer();
  try {
    const env = { ...process.env };
    delete env.ZKLOCK_LIBRARY;
    delete env.NODE_PATH;
    const run = spawnSync(process.execPath, ['-e', program, server.hosts],
      { cwd: app, env, encoding: 'utf8', timeout: 60000 });
    process.stdout.write(run.stdout);
    process.stderr.write(run.stderr);
    if (run.status !== 0 || !/^held true token \d+/m.test(run.stdout)) {
      throw new Error(`the installed package did not lock (exit ${run.status})`);
    }
  } finally {
    await server.close();
  }
})().catch((e) => {
  console.error(`pack-check: ${e.message}`);
  process.exit(1);
});
