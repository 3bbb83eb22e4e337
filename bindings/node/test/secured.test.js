'use strict';
// TLS and SASL with the options as Node users name them, against secured servers started by
// tools/testing_server.rs (a TLS-only port needing a client certificate; SASL DIGEST-MD5).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const { startServer, uniquePath } = require('../test-support/server');
const zklock = require('..');

async function lockOnce(client) {
  const guard = await client.mutex(uniquePath('secured')).acquire({ timeout: 5000 });
  assert.equal(guard.isHeld, true);
  await guard.release();
}

describe('mutual TLS', () => {
  let server;
  before(async () => {
    server = await startServer(['--tls', 'need']);
  });
  after(async () => server?.close());

  it('connects with tls: { ca, cert, key } as PEM Buffers, as node:tls takes them', async () => {
    const { ca, cert, key } = server.files;
    const client = await zklock.connect(server.hosts, {
      tls: { ca: fs.readFileSync(ca), cert: fs.readFileSync(cert), key: fs.readFileSync(key) },
    });
    await lockOnce(client);
    await client.close();
  });

  it('connects with tls: { caFile, certFile, keyFile } (read at each new session)', async () => {
    const { ca, cert, key } = server.files;
    const client = await zklock.connect(server.hosts.replace('tcp+tls://', ''),
      { tls: { caFile: ca, certFile: cert, keyFile: key } });
    await lockOnce(client);
    await client.close();
  });

  it('says what to fix when the client certificate is missing: AuthFailedError', async () => {
    const err = await zklock.connect(server.hosts,
      { connectTimeout: 5000, tls: { ca: fs.readFileSync(server.files.ca, 'utf8') } })
      .catch((e) => e);
    assert.ok(err instanceof zklock.AuthFailedError, String(err));
    assert.equal(err.code, 'ZKL_AUTH_FAILED');
    assert.match(err.message, /certificate/);
  });

  it('says so when the server is signed by a CA the client does not trust', async () => {
    // The client's own certificate as the only CA: not the one that signed the server's.
    const { cert, key } = server.files;
    const err = await zklock.connect(server.hosts, {
      connectTimeout: 5000,
      tls: { ca: fs.readFileSync(cert), cert: fs.readFileSync(cert), key: fs.readFileSync(key) },
    }).catch((e) => e);
    assert.ok(err instanceof zklock.AuthFailedError, String(err));
    assert.match(err.message, /not signed by a CA this client trusts/);
  });
});

describe('SASL DIGEST-MD5', () => {
  let server;
  before(async () => {
    server = await startServer(['--sasl', 'bob:s3cret']);
  });
  after(async () => server?.close());

  it("connects with sasl: { mechanism, username, password }", async () => {
    const client = await zklock.connect(server.hosts,
      { sasl: { mechanism: 'DIGEST-MD5', username: 'bob', password: 's3cret' } });
    await lockOnce(client);
    await client.close();
  });

  it('names the user whose password was refused: AuthFailedError', async () => {
    const err = await zklock.connect(server.hosts,
      { connectTimeout: 5000, sasl: { username: 'bob', password: 'wrong' } }).catch((e) => e);
    assert.ok(err instanceof zklock.AuthFailedError, String(err));
    assert.match(err.message, /bob/);
  });

  it('refuses another mechanism before connecting', async () => {
    await assert.rejects(zklock.connect(server.hosts,
      { sasl: { mechanism: 'GSSAPI', username: 'bob', password: 'x' } }),
    zklock.InvalidArgumentError);
  });
});
