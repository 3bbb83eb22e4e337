// A holder of tests/it/every_language.rs, in Node.js: the mutex at PATH, HOLDS times, from when HISTORY.go exists.
//
// Usage: node worker.mjs HOSTS PATH curator|kazoo HOLDS HISTORY WHO
// Each hold appends "enter W WHO TOKEN" after its acquire and "exit W WHO" before its release
// to HISTORY, one fs.writeSync per line on an O_APPEND descriptor.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect } from '../../../bindings/node/lib/index.js';

const [hosts, path, protocol, holds, history, who] = process.argv.slice(2);
const fd = fs.openSync(history, fs.constants.O_WRONLY | fs.constants.O_APPEND);
const append = (line) => {
  const data = Buffer.from(line);
  if (fs.writeSync(fd, data) !== data.length) throw new Error('short append to the history');
};

const client = await connect(hosts, { protocol });
const lock = client.mutex(path);
console.log('READY');
while (!fs.existsSync(`${history}.go`)) await sleep(5); // all holders start at once
for (let i = 0; i < Number(holds); i++) {
  const guard = await lock.acquire();
  append(`enter W ${who} ${guard.fencingToken}\n`);
  await sleep(5);
  append(`exit W ${who}\n`);
  await guard.release();
}
await client.close();
console.log(`DONE ${holds}`);
