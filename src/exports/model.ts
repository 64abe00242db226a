import { t } from 'elysia';
import { listOf, pageParams } from '../http/pagination';

/** Brand ids a filter takes at most. */
export const MAX_FILTER_BRANDS = 100;

export const CREATE_FIELDS = ['columns', 'filter', 'compression'] as const;
export const SHORTHAND_FIELDS = ['brandIds', 'enabled'] as const;

const Compression = t.Union([t.Literal('none'), t.Literal('gzip')], {
  error: 'compression must be none or gzip.',
});

/** The export's own filter, from before the search language: still taken, and shown as it was sent. */
const ShorthandFilter = t.Object({
  brandIds: t.Optional(
    t.Array(t.String({ format: 'uuid' }), {
      minItems: 1,
      maxItems: MAX_FILTER_BRANDS,
      description: 'Only contacts with at least one of these brands (ids of the account, deleted brands included).',
    }),
  ),
  enabled: t.Optional(t.Boolean({ description: 'Only enabled (true) or only disabled (false) contacts.' })),
});

/**
 * `filter`: the shorthand above, or a filter of the search language (docs/searching.md). Validated
 * by the service (service.ts readExportFilter), which tells the two apart by their keys; to the
 * framework any JSON.
 */
const ExportFilter = t.Any({
  anyOf: [ShorthandFilter, { $ref: '#/components/schemas/ContactFilter' }],
  description:
    'Either `{brandIds?, enabled?}` (contacts with at least one of the brands, and/or only enabled or only ' +
    'disabled ones) or a contact filter as POST /v1/contact-searches takes it: the export holds exactly the ' +
    'contacts that search would give. Shown as sent.',
});

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
  filter: ExportFilter,
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
