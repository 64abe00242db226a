import { Elysia } from 'elysia';
import type { Deps } from '../deps';

export function contactRoutes(_deps: Deps) {
  return new Elysia({ detail: { tags: ['Contacts'] } });
}
