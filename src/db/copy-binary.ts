/**
 * PostgreSQL's binary COPY framing (the "Binary Format" of the COPY reference): a statement's data
 * is HEADER (signature, flags, header extension length), the tuples, then TRAILER (a field count
 * of -1). The one home of it for every binary COPY the service sends: the import's staged rows
 * (worker/import/staging-binary.ts) and the suppression lists' records (src/suppressions/bulk/).
 */
export const COPY_BINARY_HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
export const COPY_BINARY_TRAILER = Buffer.from([0xff, 0xff]);
