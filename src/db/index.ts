/**
 * Everything about talking to PostgreSQL, the one door the rest of the service imports it through:
 * the postgres.js pool and its usage count, pinned connections, the circuit and the rules for an
 * unavailable database, LISTEN that outlasts restarts, constraint refusals, binary COPY framing, the
 * Citus node of an account and of a connection, and the advisory lock keys. Nothing here imports a feature module.
 */
export * from './account-nodes';
export * from './circuit';
export * from './citus-node';
export * from './constraint';
export * from './copy-binary';
export * from './keep-listening';
export * from './locks';
export * from './pinned';
export * from './pool';
export * from './pool-usage';
export * from './sql-wrapper';
export * from './unavailable';
