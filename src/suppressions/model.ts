import { t } from 'elysia';
import { listOf, pageParams } from '../http/pagination';

export const SuppressionList = t.Object({
  id: t.String({ format: 'uuid' }),
  name: t.String(),
  format: t.Union([t.Literal('plain text'), t.Literal('md5'), t.Literal('sha512')]),
  isGlobal: t.Boolean(),
  recordCount: t.Integer(),
  createdAt: t.String({ format: 'date-time' }),
  updatedAt: t.String({ format: 'date-time' }),
});

export const SUPPRESSION_SORTS = ['name', '-name', 'createdAt', '-createdAt', 'updatedAt', '-updatedAt'] as const;

export const SuppressionListQuery = t.Object(
  {
    ...pageParams,
    sort: t.Optional(
      t.Union(
        SUPPRESSION_SORTS.map((s) => t.Literal(s)),
        { error: `sort must be one of ${SUPPRESSION_SORTS.join(', ')}.` },
      ),
    ),
  },
  { additionalProperties: true },
);

export const SuppressionListPage = listOf(SuppressionList);

export const ListIdParams = t.Object({
  suppressionListId: t.String({ format: 'uuid', error: 'suppressionListId must be a UUID.' }),
});

export const ImportIdParams = t.Object({
  suppressionListId: t.String({ format: 'uuid', error: 'suppressionListId must be a UUID.' }),
  importId: t.String({ format: 'uuid', error: 'importId must be a UUID.' }),
});

export const MAX_RECORDS_PER_REQUEST = 1000;

export const AddRecordsBody = t.Object(
  {
    records: t.Array(t.String({ error: 'Every record must be a string.' }), {
      minItems: 1,
      maxItems: MAX_RECORDS_PER_REQUEST,
      description:
        `1 to ${MAX_RECORDS_PER_REQUEST} records of the list's format, unique as sent. ` +
        'Trimmed and lowercased before storing.',
      error: `records must be an array of 1 to ${MAX_RECORDS_PER_REQUEST} strings.`,
    }),
  },
  { error: 'The request body must be an object with a records array.' },
);

export const AddRecordsResult = t.Object({
  importId: t.String({ format: 'uuid' }),
  totalCount: t.Integer({ description: 'Records sent.' }),
  addedCount: t.Integer({ description: 'Records that became new records of the list.' }),
  duplicateCount: t.Integer({
    description:
      'Records already on the list, or equal to an earlier record of the request after trimming and lowercasing.',
  }),
});

export const SuppressionImport = t.Object({
  id: t.String({ format: 'uuid' }),
  suppressionListId: t.String({ format: 'uuid' }),
  status: t.Union([t.Literal('importing'), t.Literal('completed'), t.Literal('failed')]),
  method: t.Union([t.Literal('api'), t.Literal('manual')]),
  totalCount: t.Integer({ description: 'Records supplied (valid records read, for a manual import).' }),
  addedCount: t.Integer(),
  duplicateCount: t.Integer(),
  malformedCount: t.Integer(),
  createdAt: t.String({ format: 'date-time' }),
  completedAt: t.Optional(t.String({ format: 'date-time', description: 'Absent while running.' })),
});

export const SuppressionImportPage = listOf(SuppressionImport);

export const ImportListQuery = t.Object(pageParams, { additionalProperties: true });
