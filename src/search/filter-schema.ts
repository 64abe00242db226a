import { t } from 'elysia';
import { FILTER_LIMITS, OPS_OF } from './filter-types';

const REF = '#/components/schemas/ContactFilter';

/**
 * The filter language as JSON Schema, for the OpenAPI document's components (recursive through its
 * own $ref). It documents; filter.ts decides: a body's filter is validated there, against the
 * account's schema, with a pointer to the node at fault, so the routes declare it as `FilterField`.
 */
export const CONTACT_FILTER_SCHEMA = {
  description:
    'A contact filter (docs/searching.md). Exactly one form per object; at most ' +
    `${FILTER_LIMITS.depth} levels deep and ${FILTER_LIMITS.leaves} leaves in all.`,
  oneOf: [
    {
      type: 'object',
      title: 'and',
      required: ['and'],
      additionalProperties: false,
      properties: { and: { type: 'array', minItems: 1, maxItems: FILTER_LIMITS.children, items: { $ref: REF } } },
    },
    {
      type: 'object',
      title: 'or',
      required: ['or'],
      additionalProperties: false,
      properties: { or: { type: 'array', minItems: 1, maxItems: FILTER_LIMITS.children, items: { $ref: REF } } },
    },
    {
      type: 'object',
      title: 'not',
      required: ['not'],
      additionalProperties: false,
      properties: { not: { $ref: REF } },
    },
    {
      type: 'object',
      title: 'enabled',
      required: ['enabled'],
      additionalProperties: false,
      properties: { enabled: { type: 'boolean' } },
    },
    {
      type: 'object',
      title: 'createdAt',
      required: ['createdAt'],
      additionalProperties: false,
      properties: {
        createdAt: {
          type: 'object',
          minProperties: 1,
          additionalProperties: false,
          properties: { gte: { type: 'string', format: 'date-time' }, lt: { type: 'string', format: 'date-time' } },
        },
      },
    },
    {
      type: 'object',
      title: 'attribute',
      required: ['attribute', 'op'],
      additionalProperties: false,
      description:
        'An attribute as GET /v1/contact-schema names it (case-insensitive; Email, Brand and `name:domain`-like ' +
        'derived sub-attributes of email attributes included) compared by an operator its type takes: ' +
        Object.entries(OPS_OF)
          .map(([type, ops]) => `${type}: ${ops.join(', ')}`)
          .join('; ') +
        '. `exists` takes no value; `in` and `containsAny` take 1 to 100 values.',
      properties: {
        attribute: { type: 'string' },
        op: { type: 'string', enum: [...new Set(Object.values(OPS_OF).flat())] },
        value: {
          oneOf: [
            { type: 'string' },
            { type: 'number' },
            { type: 'boolean' },
            {
              type: 'array',
              minItems: 1,
              maxItems: FILTER_LIMITS.values,
              items: { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }] },
            },
          ],
        },
      },
    },
  ],
} as const;

/** A body field holding a filter: any JSON to the framework, the ContactFilter schema in the document. */
export const FilterField = (description: string) => t.Any({ $ref: REF, description });
