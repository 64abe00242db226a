import { t } from 'elysia';
import { listOf, pageParams } from '../http/pagination';

/** Brand ids a filter takes at most. */
export const MAX_FILTER_BRANDS = 100;

export const CREATE_FIELDS = ['columns', 'filter', 'compression'] as const;
export const SHORTHAND_FIELDS = ['brandIds', 'enabled'] as const;

const Compression = t.Union([t.Literal('none'), t.Literal('gzip')], {
  error: 'compression must be none or gzip.',
});

/**
 * `filter`, for the OpenAPI document's components: the export's own shorthand from before the
 * search language, or a filter of that language (docs/searching.md). The service validates it
 * (service.ts readExportFilter tells the two apart by their keys); to the framework it is any JSON,
 * named by $ref (Elysia's body normaliser cannot follow an inline anyOf holding a $ref).
 */
export const EXPORT_FILTER_SCHEMA = {
  description:
    'Either `{brandIds?, enabled?}` (contacts with at least one of the brands, and/or only enabled or only ' +
    'disabled ones) or a contact filter as POST /v1/contact-searches takes it: the export holds exactly the ' +
    'contacts that search would give.',
  anyOf: [
    {
      type: 'object',
      title: 'shorthand',
      additionalProperties: false,
      properties: {
        brandIds: {
          type: 'array',
          minItems: 1,
          maxItems: MAX_FILTER_BRANDS,
          items: { type: 'string', format: 'uuid' },
          description: 'Only contacts with at least one of these brands (ids of the account, deleted brands included).',
        },
        enabled: { type: 'boolean', description: 'Only enabled (true) or only disabled (false) contacts.' },
      },
    },
    { $ref: '#/components/schemas/ContactFilter' },
  ],
} as const;

const ExportFilter = t.Any({ $ref: '#/components/schemas/ExportFilter' });

export const CreateExportBody = t.Object({
  columns: t.Optional(
    t.Array(t.String({ error: 'Each column must be a string.' }), {
      error: 'columns must be an array of attribute names.',
      description:
        'Attribute names of GET /v1/contact-schema (case-insensitive), each once, Email among them; derived ' +
        'sub-attributes (`name:md5`) are not columns. Default: every attribute in schema order, Email and Brand ' +
        'included.',
    }),
  ),
  filter: t.Optional(ExportFilter),
  compression: t.Optional(Compression),
});
export type CreateExportInput = typeof CreateExportBody.static;

export const ContactExport = t.Object({
  id: t.String({ format: 'uuid' }),
  status: t.Union([t.Literal('queued'), t.Literal('exporting'), t.Literal('success'), t.Literal('failed')]),
  columns: t.Array(t.String(), { description: "The file's header: the columns as the schema names them." }),
  // An object, not ExportFilter: Elysia cannot build its response normaliser through a $ref.
  filter: t.Record(t.String(), t.Unknown(), {
    description: 'The filter as it was sent: the brandIds/enabled shorthand, or a filter of the search language.',
  }),
  compression: t.Union([t.Literal('none'), t.Literal('gzip')]),
  rowCount: t.Optional(t.Integer({ minimum: 0, description: 'Rows of the file (the header aside); on success.' })),
  percentComplete: t.Optional(t.Integer({ minimum: 0, maximum: 100, description: 'Present only while exporting.' })),
  downloadUrl: t.Optional(
    t.String({
      description:
        'A link to the file, valid one hour and made afresh by every read; on success while the file is kept ' +
        '(EXPORT_RETENTION_DAYS after completion).',
    }),
  ),
  downloadExpiresAt: t.Optional(t.String({ format: 'date-time', description: 'When this downloadUrl expires.' })),
  failureReason: t.Optional(t.String({ description: 'Why the export failed; present only then.' })),
  createdAt: t.String({ format: 'date-time' }),
  completedAt: t.Optional(t.String({ format: 'date-time', description: 'On success.' })),
});

export const ContactExportPage = listOf(ContactExport);

export const ExportListQuery = t.Object(pageParams, { additionalProperties: true });

export const ExportIdParams = t.Object({
  id: t.String({ format: 'uuid', error: 'id must be a UUID.' }),
});
