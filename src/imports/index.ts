import { Elysia } from 'elysia';
import type { Deps } from '../deps';

export function importRoutes(_deps: Deps) {
  return new Elysia({ detail: { tags: ['Contact imports'] } });
}
