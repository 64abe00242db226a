import { Elysia, t } from 'elysia';
import type { Deps } from '../deps';

/** Liveness and readiness, without auth, for load balancers and the container HEALTHCHECK. */
export function healthRoutes(deps: Deps & { pingRedis?: () => Promise<unknown> }) {
  /**
   * While the circuit is open its probe answers (within 1 s), not a statement queued in the pool; a
   * session that ended under the pool's check says nothing of the database, so the probe does then.
   */
  const databaseAnswers = (): Promise<boolean> =>
    deps.circuit?.isOpen
      ? Promise.resolve(deps.circuit.admit()).then(
          () => true,
          () => false,
        )
      : deps.sql`select 1`.then(
          () => true,
          () => deps.circuit?.check() ?? false,
        );
  return new Elysia({ detail: { tags: ['Operations'] } })
    .get('/healthz', () => ({ status: 'ok' }), {
      response: t.Object({ status: t.String() }),
      detail: { summary: 'Liveness' },
    })
    .get(
      '/readyz',
      async ({ set }) => {
        const checks: Record<string, 'ok' | 'down'> = {};
        checks.database = (await databaseAnswers()) ? 'ok' : 'down';
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
