'use strict';
// The library on the main thread: the calls that never block (constructors, queries, cancels)
// are made here, synchronously; the pool's workers load the same file for the others.

const { open } = require('./library');
const { errorOf } = require('./errors');
const pool = require('./pool');

const { spec, c } = open();
pool.setLibrary(spec);

/** Throws the error of a status other than ZKL_OK, with this thread's message of it. */
function check(status) {
  if (status !== 0) throw errorOf(status, c.zkl_last_error_message());
}

/** The error of a worker's reply (status -1: the worker itself failed). */
function replyError(reply) {
  return errorOf(reply.status < 0 ? 7 : reply.status, reply.message);
}

module.exports = { c, check, replyError, spec };
