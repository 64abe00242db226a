import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';
import { authOf } from '../http/context';
import { errorResponses } from '../http/openapi';
import { getSchema } from './service';

export const SchemaAttributeModel = t.Object({
  name: t.String(),
  type: t.Union([
    t.Literal('string'),
    t.Literal('email'),
    t.Literal('number'),
    t.Literal('boolean'),
    t.Literal('array'),
  ]),
  description: t.Optional(t.String()),
});

export function schemaRoutes({ sql }: Deps) {
  return new Elysia({ detail: { tags: ['Contact schema'] } }).get(
    '/v1/contact-schema',
    async ({ request }) => ({ attributes: await getSchema(sql, authOf(request).accountId) }),
    {
      response: { 200: t.Object({ attributes: t.Array(SchemaAttributeModel) }), ...errorResponses() },
      detail: { summary: 'Get the contact schema' },
    },
  );
}
