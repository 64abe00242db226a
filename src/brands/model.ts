import { t } from 'elysia';
import { pageParams, listOf } from '../http/pagination';

export const BrandSummary = t.Object({ id: t.String({ format: 'uuid' }), name: t.String(), enabled: t.Boolean() });

export const Brand = t.Object({
  id: t.String({ format: 'uuid' }),
  name: t.String(),
  enabled: t.Boolean(),
  fromAddress: t.Optional(t.String({ description: 'Omitted when not set.' })),
  domain: t.Optional(t.String({ description: 'Sending domain. Omitted when none is configured.' })),
  esps: t.Array(t.Object({ id: t.String({ format: 'uuid' }), name: t.String() })),
  verticals: t.Array(t.Object({ id: t.Integer({ description: 'Numeric vertical code.' }), label: t.String() })),
  unsubscribeHandling: t.Object({
    type: t.Literal('Hosted'),
    useListUnsubscribeHeader: t.Boolean(),
    unsubscribePageId: t.Optional(t.String({ format: 'uuid' })),
  }),
  createdAt: t.String({ format: 'date-time' }),
});

export const BrandList = listOf(BrandSummary);

export const NAME_OPERATORS = [
  'equal',
  'not_equal',
  'starts_with',
  'ends_with',
  'contains',
  'starts_with_case_sensitive',
  'ends_with_case_sensitive',
  'contains_case_sensitive',
] as const;
export type NameOperator = (typeof NAME_OPERATORS)[number];

export const BrandListQuery = t.Object(
  {
    ...pageParams,
    sort: t.Optional(t.Union([t.Literal('name'), t.Literal('-name')], { error: 'sort must be name or -name.' })),
    enabled: t.Optional(t.Boolean({ error: 'enabled must be true or false.' })),
    name: t.Optional(t.String({ description: 'Same as name[equal].' })),
    ...Object.fromEntries(
      NAME_OPERATORS.map((op) => [
        `name[${op}]`,
        t.Optional(t.String({ description: `Name filter: ${op.replaceAll('_', ' ')}. Matched literally.` })),
      ]),
    ),
  },
  { additionalProperties: true },
);

export const BrandIdParams = t.Object({ brandId: t.String({ format: 'uuid', error: 'brandId must be a UUID.' }) });
