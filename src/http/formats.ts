import { FormatRegistry } from '@sinclair/typebox';

// Elysia's `uuid` format also accepts a `urn:uuid:` prefix, which PostgreSQL's uuid type refuses: such
// an id passed validation and then failed in SQL as a 500. Every `format: 'uuid'` of the app means the
// plain 8-4-4-4-12 hex form (any case), so the format is replaced once, process-wide, on import.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

FormatRegistry.Set('uuid', (value) => UUID.test(value));

export const isUuid = (value: string): boolean => UUID.test(value);
