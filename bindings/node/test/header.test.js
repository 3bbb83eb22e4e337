'use strict';
// Every prototype this package declares to koffi is the header's (include/zklock.h in the
// checkout; skipped where there is none, as in an installed package).

const { it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { PROTOTYPES } = require('../lib/library');

const HEADER = path.join(__dirname, '..', '..', '..', 'include', 'zklock.h');

/** "ret name(type a, type b)" with whitespace, struct/enum keywords and koffi's _Out_ gone,
 * the status enum as int. */
function normal(proto) {
  return proto.replace(/_Out_ /g, '').replace(/\b(struct|enum) /g, '')
    .replace(/^zkl_status\b/, 'int').replace(/\s+/g, ' ').replace(/\( /g, '(').replace(/ \)/g, ')')
    .replace(/\* +/g, '*').replace(/\s*\*/g, ' *').trim();
}

it('declares every function as include/zklock.h does', { skip: !fs.existsSync(HEADER) }, () => {
  const header = fs.readFileSync(HEADER, 'utf8');
  const declared = new Map();
  for (const m of header.matchAll(/^([a-z][a-z0-9_ ]*?\*?\s*\*?)(zkl_[a-z0-9_]+)\(([^;]*?)\);/gms)) {
    declared.set(m[2], normal(`${m[1].trim()} ${m[2]}(${m[3]})`));
  }
  assert.ok(declared.size > 50, `read ${declared.size} prototypes from the header`);
  for (const proto of PROTOTYPES) {
    const name = /\b(zkl_[a-z0-9_]+)\(/.exec(proto)[1];
    assert.ok(declared.has(name), `${name} is not in zklock.h`);
    assert.equal(normal(proto), declared.get(name));
  }
});
