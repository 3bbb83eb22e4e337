// Types of the zklock package (lib/index.js).

export type HoldState = 'none' | 'held' | 'uncertain' | 'lost';
export type SessionState = 'connected' | 'suspended' | 'expired' | 'closed';

export interface TlsOptions {
  /** PEM of the CAs that sign the servers' certificates (as node:tls takes it). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** The client's certificate chain, PEM (mutual TLS). */
  cert?: string | Buffer;
  /** The client's private key, PEM (PKCS#8, PKCS#1 or SEC1). */
  key?: string | Buffer;
  /** The password of an encrypted PKCS#8 key. */
  passphrase?: string;
  /** The same as files, read at each new session (certificates rotated on disk). */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  /** DANGEROUS: accept a server certificate from the trusted CA whatever name it was issued for. */
  dangerAcceptAnyServerName?: boolean;
  /** Only `true` (the default): the servers' certificates are always checked against the CA. */
  rejectUnauthorized?: true;
}

export interface ConnectOptions {
  /** Milliseconds (100 to 3,600,000; default 10,000; the server may grant less). */
  sessionTimeout?: number;
  /** Milliseconds the connect waits for the first session (default: the session timeout). */
  connectTimeout?: number;
  /** Stored in every lock node of this client (default "HOSTNAME:PID"). */
  holderId?: string;
  /** Lock-node layout: Curator's (default) or kazoo's. */
  protocol?: 'curator' | 'kazoo';
  /** ACL of the nodes created (default 'open'). */
  acl?: 'open' | 'creator-all' | 'creator-all-read-all';
  /** The servers' tickTime in milliseconds (default: read from the servers). */
  serverTick?: number;
  /** ZooKeeper addAuth at every new session, e.g. [{ scheme: 'digest', auth: 'user:pw' }]. */
  auth?: Array<{ scheme: string; auth: string }>;
  /** TLS to every server: true (the system's CAs) or node:tls-like options. */
  tls?: boolean | TlsOptions;
  /** SASL DIGEST-MD5 at connect. */
  sasl?: { mechanism?: 'DIGEST-MD5'; username: string; password: string };
}

export interface AcquireOptions {
  /** Milliseconds; undefined waits as long as it takes, 0 tries once. */
  timeout?: number;
  /** Gives up this acquire alone (AbortError). */
  signal?: AbortSignal;
}

export interface Participant {
  node: string;
  holderId: string;
  sequence: number;
  isHolder: boolean;
  isReader: boolean;
  created: Date;
}

export interface Percentiles { count: number; p50: number; p90: number; p99: number; max: number }
export interface Stats {
  acquisitions: number; timeouts: number; cancels: number; failures: number;
  releases: number; losses: number; wait: Percentiles; hold: Percentiles;
}

export class Guard {
  readonly lock: Lock;
  readonly fencingToken: bigint;
  readonly isHeld: boolean;
  readonly holdState: HoldState;
  readonly released: boolean;
  onLost(callback: (state: 'uncertain' | 'lost', guard: Guard) => void): () => void;
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class Lock {
  readonly client: Client;
  readonly kind: 'mutex' | 'semaphoreMutex' | 'readLock' | 'writeLock' | 'semaphore' | 'simpleLock';
  readonly path: string;
  readonly isHeld: boolean;
  readonly holdState: HoldState;
  readonly leaseRemaining: number;
  acquire(options?: AcquireOptions): Promise<Guard>;
  tryAcquire(options?: AcquireOptions): Promise<Guard | null>;
  cancel(): void;
  resetCancel(): boolean;
  participants(): Promise<Participant[]>;
  stats(): Stats;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export class Client {
  readonly hosts: string;
  readonly holderId: string;
  readonly sessionState: SessionState;
  mutex(path: string): Lock;
  semaphoreMutex(path: string): Lock;
  readLock(path: string): Lock;
  writeLock(path: string): Lock;
  rwLock(path: string): { read: Lock; write: Lock };
  semaphore(path: string, maxLeases: number): Lock;
  simpleLock(path: string): Lock;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export function connect(hosts: string, options?: ConnectOptions): Promise<Client>;
export function version(): string;
export function configure(settings?: { maxAcquires?: number }): { maxAcquires: number };

export const STATUS: Readonly<Record<string, number>>;

export class ZkLockError extends Error {
  readonly status: number;
  readonly code: string;
}
export class TimeoutError extends ZkLockError {}
export class InvalidArgumentError extends ZkLockError {}
export class NotHeldError extends ZkLockError {}
export class ConnectionLossError extends ZkLockError {}
export class SessionExpiredError extends ZkLockError {}
export class ZooKeeperError extends ZkLockError {}
export class InternalError extends ZkLockError {}
export class CancelledError extends ZkLockError {}
export class LockLostError extends ZkLockError {}
export class ClosedError extends ZkLockError {}
export class WouldDeadlockError extends ZkLockError {}
export class AuthFailedError extends ZkLockError {}
export class AbortError extends CancelledError {}
