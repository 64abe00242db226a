/**
 * Whether `e` is PostgreSQL refusing a write by the constraint `name`. On a Citus cluster the
 * refusal comes from a shard and names the shard's copy of the constraint (`name` followed by
 * `_<shard id>`), and the coordinator relays it without the constraint field: only its message
 * (`… violates unique constraint "<name>"`) names it then.
 */
export function violates(e: unknown, name: string): boolean {
  const err = e as { constraint_name?: unknown; message?: unknown } | null;
  const constraint =
    typeof err?.constraint_name === 'string'
      ? err.constraint_name
      : typeof err?.message === 'string'
        ? /violates [a-z ]*constraint "([^"]+)"/.exec(err.message)?.[1]
        : undefined;
  if (constraint === undefined || !constraint.startsWith(name)) return false;
  return constraint.length === name.length || /^_\d+$/.test(constraint.slice(name.length));
}
