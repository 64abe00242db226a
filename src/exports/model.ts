import { t } from 'elysia';
import { listOf, pageParams } from '../http/pagination';

/** Brand ids a filter takes at most. */
export const MAX_FILTER_BRANDS = 100;

export const CREATE_FIELDS = ['columns', 'filter', 'compression'] as const;
export const FILTER_FIELDS = ['brandIds', 'enabled'] as const;

const Compression = t.Union([t.Literal('none'), t.Literal('gzip')], {
  error: 'compression must be none or gzip.',
});

const Filter = t.Object({
  brandIds: t.Optional(
    t.Array(t.String({ format: 'uuid', error: 'Each brandIds entry must be a UUID.' }), {
      minItems: 1,
      maxItems: MAX_FILTER_BRANDS,
      error: `filter.brandIds must be an array of 1 to ${MAX_FILTER_BRANDS} brand ids.`,
      description: 'Only contacts with at least one of these brands (ids of the account, deleted brands included).',
    }),
  ),
  enabled: t.Optional(
    t.Boolean({
      error: 'filter.enabled must be true or false.',
      default: undefined,
      description: 'Only enabled (true) or only disabled (false) contacts.',
    }),
  ),
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
  filter: t.Optional(Filter),
  compression: t.Optional(Compression),
});
export type CreateExportInput = typeof CreateExportBody.static;

export const ContactExport = t.Object({
  id: t.String({ format: 'uuid' }),
  status: t.Union([t.Literal('queued'), t.Literal('exporting'), t.Literal('success'), t.Literal('failed')]),
  columns: t.Array(t.String(), { description: "The file's header: the columns as the schema names them." }),
  filter: Filter,
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
