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
      t.Union(SUPPRESSION_SORTS.map((s) => t.Literal(s)), { error: `sort must be one of ${SUPPRESSION_SORTS.join(', ')}.` }),
    ),
  },
  { additionalProperties: true },
);

export const SuppressionListPage = listOf(SuppressionList);

export const ListIdParams = t.Object({
  suppressionListId: t.String({ format: 'uuid', error: 'suppressionListId must be a UUID.' }),
});
