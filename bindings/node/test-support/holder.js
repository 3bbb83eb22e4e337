'use strict';
// A child process for test/exit.test.js: connects (with a session timeout of 30 s, so that a
// node left behind would stay long after the process), holds or waits for the mutex at PATH,
// says "ready", then ends the way MODE says.
//   node holder.js HOSTS PATH hold|wait normal|exit|signal|throw

const zklock = require('..');

const [hosts, path, role, mode] = process.argv.slice(2);

(async () => {
  const client = await zklock.connect(hosts, { sessionTimeout: 30000 });
  const lock = client.mutex(path);
  if (role === 'hold') {
    await lock.acquire({ timeout: 10000 });
  } else {
    lock.acquire().then(() => process.stdout.write('acquired\n'), () => {});
  }
  process.stdout.write('ready\n');
  if (mode === 'exit') process.exit(3);
  if (mode === 'signal') {
    // Until the parent's signal; and no longer than the parent: its end closes our stdin.
    process.stdin.on('end', () => process.exit(4));
    process.stdin.resume();
  }
  if (mode === 'throw') setImmediate(() => { throw new Error('uncaught, on purpose'); });
  // 'normal': nothing is left to do; with a hold only, the event loop runs dry and the
  // process ends.
})().catch((e) => {
  process.stderr.write(`holder: ${e.stack}\n`);
  process.exit(2);
});
