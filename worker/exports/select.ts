import type { AttributeType } from '../../src/schema/service';
import { MAX_CELL } from '../../src/schema/values';
import { compileFilter, inlineParams } from '../../src/search/compile';
import type { FilterNode } from '../../src/search/filter-types';

/** A column of the file: its schema name and type (Email and Brand are the predefined ones). */
export interface ExportColumn {
  name: string;
  type: AttributeType | 'identity' | 'brand';
}

export interface ExportFilter {
  brandIds: readonly string[] | null;
  enabled: boolean | null;
  /** A filter of the search language, parsed against the account's schema (src/search/filter.ts) */
  search?: FilterNode | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A SQL string literal (standard_conforming_strings, PostgreSQL's default: a backslash is itself). */
const literal = (s: string) => `'${s.replaceAll("'", "''")}'`;

function uuids(ids: readonly string[]): string {
  for (const id of ids) if (!UUID.test(id)) throw new Error(`not a uuid: ${id}`);
  return `'{${ids.join(',')}}'::uuid[]`;
}

/**
 * A cell's text as the importer reads it back (worker/import/cells.ts, src/schema/values.ts):
 * - text, email and booleans as stored (`->>` gives true/false), numbers as jsonb prints them, a
 *   plain decimal the importer reads as the same number. A plain decimal over 255 characters
 *   (beyond about 1e255, or a tiny one like 5e-324) would make the row malformed, so that number is
 *   written as float8 prints it, the shortest text of the same double (`5e-324`: extra_float_digits
 *   is 1, PostgreSQL's default): the API read it as a double, so that is the number it stored;
 * - a list: entries joined with `;`, a `;` inside an entry written `\;`. splitList keeps any other
 *   backslash, so an entry's own `\;` stays itself (`\\;` reads as `\` then the literal `;`); only an
 *   entry ENDING in `\` would swallow the separator after it (`a\;b` reads as one entry `a;b`), so
 *   such an entry gets a space before the separator, which the reader trims off the entry again;
 * - Brand: the contact's live brand ids (an import refuses a deleted brand's id, so the row would not
 *   import back), joined with `;` (ids hold no `;`).
 * Absent values are NULL: COPY writes an empty cell, which the importer reads as "not sent".
 */
function cell(c: ExportColumn, deletedBrands: readonly string[]): string {
  if (c.type === 'identity') return 'c.email';
  // nullif: a contact without brands has an empty cell, not the quoted empty string COPY writes for ''.
  if (c.type === 'brand')
    return deletedBrands.length === 0
      ? "nullif(array_to_string(c.brand_ids, ';'), '')"
      : `nullif(array_to_string(array(
          select b from unnest(c.brand_ids) b where b <> all(${uuids(deletedBrands)})), ';'), '')`;
  const value = `c.attributes -> ${literal(c.name)}`;
  if (c.type === 'number')
    return `case when jsonb_typeof(${value}) = 'number' and length((${value})::text) > ${MAX_CELL}
      then (${value})::float8::text else c.attributes ->> ${literal(c.name)} end`;
  if (c.type !== 'array') return `c.attributes ->> ${literal(c.name)}`;
  return `(select string_agg(replace(e, ';', '\\;') || case when right(e, 1) = '\\' then ' ' else '' end, ';'
      order by n)
    from jsonb_array_elements_text(case when jsonb_typeof(${value}) = 'array' then ${value} end)
      with ordinality as l(e, n))`;
}

/** The export's rows: the account's contacts that pass the filter, in no particular order. */
export function whereClause(accountId: string, filter: ExportFilter): string {
  if (!UUID.test(accountId)) throw new Error(`not a uuid: ${accountId}`);
  let where = `c.account_id = '${accountId}'`;
  if (filter.brandIds) where += ` and c.brand_ids && ${uuids(filter.brandIds)}`;
  if (filter.enabled !== null) where += ` and c.enabled = ${filter.enabled ? 'true' : 'false'}`;
  // The search's own SQL, its values as literals made of hex digits (COPY takes no parameters).
  if (filter.search) where += ` and (${compileFilter(filter.search, inlineParams())})`;
  return where;
}

/**
 * The COPY that writes the file's rows: one statement, so one snapshot of the account, and only an
 * ACCESS SHARE lock (writes and imports go on). Values are inlined as literals: COPY runs over the
 * simple protocol (postgres.js readable()), which takes no parameters; every id is checked to be a
 * uuid and every name is quoted. The header is written by the worker (an alias is cut at 63 bytes).
 */
export function copyStatement(
  accountId: string,
  columns: readonly ExportColumn[],
  filter: ExportFilter,
  deletedBrands: readonly string[],
): string {
  const select = columns.map((c) => cell(c, deletedBrands)).join(',\n    ');
  return `copy (select ${select}\n  from contacts c where ${whereClause(accountId, filter)}) to stdout (format csv)`;
}

/** The header row: the schema's names, quoted where CSV needs it. */
export function headerLine(columns: readonly ExportColumn[]): string {
  return (
    columns.map((c) => (/[",\r\n]|^\s|\s$/.test(c.name) ? `"${c.name.replaceAll('"', '""')}"` : c.name)).join(',') +
    '\n'
  );
}
