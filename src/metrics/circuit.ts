import { Gauge, type Registry } from 'prom-client';
import type { DatabaseCircuit } from '../db';
import { PREFIX } from './registry';

/**
 * The API's database circuit (src/db/circuit.ts): 1 while a probe has found PostgreSQL away and
 * requests that need it are refused with 503, 0 while they go ahead. Read from the process, no query,
 * so it is served while the database is away (when alerts need it most).
 */
export function circuitGauge(registry: Registry, circuit: DatabaseCircuit): void {
  new Gauge({
    name: `${PREFIX}db_circuit_open`,
    help: "1 while the API's database circuit is open (PostgreSQL found away, requests refused with 503), else 0.",
    registers: [registry],
    collect() {
      this.set(circuit.isOpen ? 1 : 0);
    },
  });
}
