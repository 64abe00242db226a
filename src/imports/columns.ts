import { pointer, type FieldError } from '../errors';
import type { SchemaAttribute } from '../schema/service';

/**
 * The declared columns as canonical schema names, in file order, with an error per bad column.
 * Names match case-insensitively and ignoring surrounding whitespace, as the header row will.
 */
export function resolveColumns(
  schema: readonly SchemaAttribute[],
  columns: readonly string[],
): { columns: string[]; errors: FieldError[] } {
  const byName = new Map(schema.map((a) => [a.name.toLowerCase(), a.name]));
  const firstAt = new Map<string, number>();
  const resolved: string[] = [];
  const errors: FieldError[] = [];
  columns.forEach((raw, i) => {
    const name = byName.get(raw.trim().toLowerCase());
    if (name === undefined) {
      errors.push({
        pointer: pointer('columns', i),
        detail: `Column ${i} ("${raw}") is not an attribute of the contact schema.`,
      });
      return;
    }
    const first = firstAt.get(name);
    if (first !== undefined) {
      errors.push({
        pointer: pointer('columns', i),
        detail: `Column ${i} ("${raw}") repeats column ${first} (${name}).`,
      });
      return;
    }
    firstAt.set(name, i);
    resolved.push(name);
  });
  // Email is the first predefined attribute; it is the identity column.
  if (!firstAt.has('Email')) errors.push({ pointer: '/columns', detail: 'The columns must include the Email column.' });
  return { columns: resolved, errors };
}
