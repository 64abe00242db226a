import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';

/** Liveness and readiness, without auth, for load balancers and the container HEALTHCHECK. */
export function healthRoutes(deps: Deps & { pingRedis?: () => Promise<unknown> }) {
  return new Elysia({ detail: { tags: ['Operations'] } })
    .get('/healthz', () => ({ status: 'ok' }), {
      response: t.Object({ status: t.String() }),
      detail: { summary: 'Liveness' },
    })
    .get(
      '/readyz',
      async ({ set }) => {
        const checks: Record<string, 'ok' | 'down'> = {};
        // While the circuit is open its probe answers (within 1 s), not a statement queued in the pool.
        checks.database = (
          deps.circuit?.isOpen
            ? await deps.circuit.admit().then(
                () => true,
                () => false,
              )
            : await deps.sql`select 1`.then(
                () => true,
                // A session that ended under the check says nothing of the database: the probe does.
                () => (deps.circuit ? deps.circuit.check() : false),
              )
        )
          ? 'ok'
          : 'down';
        if (deps.queue)
          checks.redis = await deps.queue.ping().then(
            () => 'ok' as const,
            () => 'down' as const,
          );
        const ready = Object.values(checks).every((c) => c === 'ok');
        set.status = ready ? 200 : 503;
        return { status: ready ? 'ready' : 'not ready', checks };
      },
      {
        response: t.Object({ status: t.String(), checks: t.Record(t.String(), t.String()) }),
        detail: { summary: 'Readiness: the database (and Redis, when the queue is used) answer' },
      },
    );
}
