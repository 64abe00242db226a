import { dirname, join } from 'node:path';
import { Elysia, NotFoundError } from 'elysia';
import { swagger } from '@elysiajs/swagger';
import { finishOpenApi } from './openapi';

const TITLE = 'Contact, Brand and Suppression Management API';

/** swagger-ui-dist's files /docs serves itself, so the page renders with no network. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};
const assetDir = dirname(Bun.resolveSync('swagger-ui-dist/package.json', import.meta.dir));

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${TITLE}</title>
    <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png" />
    <link rel="stylesheet" href="/docs/assets/swagger-ui.css" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="/docs/assets/swagger-ui-bundle.js"></script>
    <script>
      window.ui = SwaggerUIBundle({ url: '/docs/json', dom_id: '#swagger-ui', validatorUrl: null });
    </script>
  </body>
</html>
`;

/**
 * GET /docs (the reference UI, its assets from swagger-ui-dist under /docs/assets/) and GET /docs/json
 * (the OpenAPI document the swagger plugin builds from the routes, finished by finishOpenApi).
 * `schemas` are the document's named schemas, which routes refer to by `$ref`.
 */
export function docsRoutes(publicUrl: string, schemas: Record<string, unknown> = {}) {
  return new Elysia({ name: 'docs' })
    .mapResponse(({ path, response }) => {
      if (path === '/docs') return new Response(PAGE, { headers: { 'content-type': 'text/html; charset=utf-8' } });
      if (path === '/docs/json') return Response.json(finishOpenApi(response as Record<string, unknown>, publicUrl));
    })
    .use(
      swagger({
        path: '/docs',
        documentation: {
          openapi: '3.1.0',
          info: {
            title: TITLE,
            version: '1.0.0',
            description:
              'Account-scoped contacts, brands, suppression lists and bulk contact imports. ' +
              'Errors are RFC 9457 problem details.',
          },
          components: {
            // Schemas the routes name by $ref (a recursive one cannot be written inline).
            schemas,
            securitySchemes: {
              bearer: { type: 'http', scheme: 'bearer', description: 'ck_<id>_<secret> keys issued by the admin CLI' },
            },
          },
          security: [{ bearer: [] }],
        } as never,
        exclude: ['/docs', '/docs/json'],
      }),
    )
    .get(
      '/docs/assets/:file',
      ({ params }) => {
        const type = ASSETS[params.file];
        if (!type) throw new NotFoundError();
        return new Response(Bun.file(join(assetDir, params.file)), {
          headers: { 'content-type': type, 'cache-control': 'public, max-age=86400' },
        });
      },
      { detail: { hide: true } },
    );
}
