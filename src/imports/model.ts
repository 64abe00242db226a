import { t } from 'elysia';
import { listOf, pageParams } from '../http/pagination';

const Strategy = t.Union([t.Literal('overwrite'), t.Literal('keep'), t.Literal('skip')], {
  error: 'duplicateContactStrategy must be overwrite, keep or skip.',
});

export const CreateImportBody = t.Object({
  columns: t.Array(t.String({ error: 'Each column must be a string.' }), {
    minItems: 1,
    error: 'columns must be a non-empty array of column names.',
    description: "The file's header row, in order. Names match the contact schema case-insensitively.",
  }),
  duplicateContactStrategy: Strategy,
  brandIds: t.Optional(
    t.Array(t.String({ format: 'uuid', error: 'Each brandIds entry must be a UUID.' }), {
      error: 'brandIds must be an array of UUIDs.',
    }),
  ),
  overwriteBrands: t.Optional(t.Boolean({ error: 'overwriteBrands must be true or false.', default: undefined })),
  restoreDisabled: t.Optional(t.Boolean({ error: 'restoreDisabled must be true or false.', default: undefined })),
  publishBrandSubscribeEvents: t.Optional(
    t.Boolean({ error: 'publishBrandSubscribeEvents must be true or false.', default: undefined }),
  ),
});
export type CreateImportInput = typeof CreateImportBody.static;

export const CreatedImport = t.Object({
  id: t.String({ format: 'uuid' }),
  status: t.Literal('awaiting-upload'),
  uploadUrl: t.String({
    description:
      'PUT the CSV file here, without an Authorization header, before `uploadExpiresAt`. Beyond the contract, ' +
      'the file may be gzip-compressed (with `Content-Encoding: gzip` or recognised by its magic bytes); the ' +
      '5 GB limit then applies to the compressed bytes.',
  }),
  uploadExpiresAt: t.String({
    format: 'date-time',
    description: 'The upload must start before this (one hour after creation).',
  }),
});

const count = (description: string) => t.Integer({ minimum: 0, description });

export const ContactImport = t.Object({
  id: t.String({ format: 'uuid' }),
  status: t.Union([
    t.Literal('awaiting-upload'),
    t.Literal('uploaded'),
    t.Literal('importing'),
    t.Literal('failed'),
    t.Literal('success'),
  ]),
  method: t.Union([t.Literal('api'), t.Literal('manual')]),
  percentComplete: t.Optional(t.Integer({ minimum: 0, maximum: 100, description: 'Present only while importing.' })),
  rowCount: t.Optional(count('Total rows, once the file was read.')),
  addedCount: count('Rows that became new contacts.'),
  updatedCount: t.Optional(count('Rows that changed an existing contact.')),
  skippedCount: t.Optional(count('Rows whose contact existed and was left untouched.')),
  malformedCount: count('Rows that could not be read as a contact.'),
  duplicateInFileCount: t.Optional(count('Rows dropped because a later row repeated their email.')),
  failureReason: t.Optional(t.String({ description: 'Present only when failed.' })),
  duplicateContactStrategy: t.Union([t.Literal('overwrite'), t.Literal('keep'), t.Literal('skip')]),
  overwriteBrands: t.Boolean(),
  restoreDisabled: t.Boolean(),
  createdAt: t.String({ format: 'date-time' }),
  completedAt: t.Optional(t.String({ format: 'date-time', description: 'Present once status is success.' })),
  rejectedRowsUrl: t.Optional(
    t.String({
      description:
        'An extension beyond the contract: where to GET the rejected-rows report (a CSV of every row that was ' +
        'not added or updated, and why), with the same API key. Present once the import succeeded and rejected ' +
        'rows, until the report passes its retention.',
    }),
  ),
});

export const ImportPage = listOf(ContactImport);

export const ImportListQuery = t.Object({ ...pageParams }, { additionalProperties: true });

export const ImportIdParams = t.Object({ importId: t.String({ format: 'uuid', error: 'importId must be a UUID.' }) });

/** The cancel extension takes no body; an empty JSON object is accepted, as for a contact's disable. */
export const CancelImportBody = t.Optional(
  t.Object({}, { additionalProperties: false, description: 'No body, or an empty JSON object.' }),
);
