export const ALL_SCOPES = [
  'contacts:read',
  'contacts:write',
  'imports:read',
  'imports:write',
  'brands:read',
  'suppressions:read',
  'suppressions:write',
  'events:read',
  'webhooks:read',
  'webhooks:write',
] as const;
export type Scope = (typeof ALL_SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (ALL_SCOPES as readonly string[]).includes(value);
}

/**
 * The scope a /v1 request needs, from its method and path. Authorisation happens before the body
 * is parsed (401 → 403 → 400), when the router has not matched yet, so this reads the raw path.
 */
export function requiredScope(method: string, path: string): Scope | undefined {
  const read = method === 'GET' || method === 'HEAD';
  if (path === '/v1/contact-schema') return 'contacts:read';
  if (path === '/v1/contact-exports' || path.startsWith('/v1/contact-exports/')) return 'contacts:read';
  if (path === '/v1/contact-searches' || path === '/v1/contact-counts' || path === '/v1/contact-stats')
    return 'contacts:read';
  if (path.startsWith('/v1/contacts/') || path === '/v1/contacts') return read ? 'contacts:read' : 'contacts:write';
  if (path === '/v1/contact-erasures') return 'contacts:write';
  if (path.startsWith('/v1/contact-imports')) return read ? 'imports:read' : 'imports:write';
  if (path.startsWith('/v1/brands')) return 'brands:read';
  if (path.startsWith('/v1/suppression-lists')) return read ? 'suppressions:read' : 'suppressions:write';
  if (path === '/v1/suppression-checks') return 'suppressions:read';
  if (path === '/v1/events') return 'events:read';
  if (path === '/v1/webhook-endpoints' || path.startsWith('/v1/webhook-endpoints/'))
    return read ? 'webhooks:read' : 'webhooks:write';
  return undefined;
}
