import type { Config } from './config';
import type { Sql } from './db';

/**
 * What feature modules need from the process. Storage and the job queue are typed loosely here so
 * that modules which do not use them do not import their drivers.
 */
export interface Deps {
  readonly config: Config;
  readonly sql: Sql;
  readonly storage?: import('./storage/store').ObjectStore;
  readonly queue?: import('./imports/queue').ImportQueue;
}
