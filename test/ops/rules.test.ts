/**
 * The operator's Prometheus files (ops/prometheus/): the scrape config and both rule files pass
 * `promtool check`, and every alert passes its unit tests (`promtool test rules`: series that fire it
 * and series that must not). promtool's output is printed, so a run shows which tests ran.
 */
import { expect, test } from 'bun:test';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from '../../src/embedded/ports';
import { prometheusBinary, RULE_FILES, RULES_DIR } from '../helpers/prometheus';

const UNIT_TESTS = join(RULES_DIR, 'tests', 'alerts.test.yml');

test('promtool check accepts the scrape config and both rule files', async () => {
  const promtool = await prometheusBinary('promtool');
  const config = await run([promtool, 'check', 'config', join(RULES_DIR, 'prometheus.yml')]);
  const rules = await run([promtool, 'check', 'rules', ...RULE_FILES]);
  console.log(`promtool check config:\n${config.out}\npromtool check rules:\n${rules.out}`);
  expect(config.code, config.err).toBe(0);
  expect(rules.code, rules.err).toBe(0);
}, 120_000);

test('promtool test rules: every alert fires on its series and stays quiet on the others', async () => {
  const promtool = await prometheusBinary('promtool');
  const result = await run([promtool, 'test', 'rules', UNIT_TESTS]);
  const names = [...(await readFile(UNIT_TESTS, 'utf8')).matchAll(/^ {2}- name: (.+)$/gm)].map((m) => `  - ${m[1]}`);
  console.log(`promtool test rules (${names.length} tests):\n${names.join('\n')}\n${result.out}\n${result.err}`);
  expect(result.code, result.out + result.err).toBe(0);
  expect(result.out).toContain('SUCCESS');
});

test('every alert has a summary, a description, a runbook section and unit tests that fire it and not', async () => {
  const alerts = await readFile(RULE_FILES[1]!, 'utf8');
  const runbook = await readFile(join(RULES_DIR, '../../docs/alerts.md'), 'utf8');
  const unitTests = await readFile(UNIT_TESTS, 'utf8');
  const names = [...alerts.matchAll(/^\s*- alert: (\w+)$/gm)].map((m) => m[1]!);
  expect(names.length).toBeGreaterThanOrEqual(10);
  for (const name of names) {
    const rule = alerts.slice(alerts.indexOf(`- alert: ${name}\n`)).split(/\n\s*- alert: /)[0]!;
    expect(rule, name).toMatch(/\n\s+summary: \S/);
    expect(rule, name).toMatch(/\n\s+description: >-\n\s+\S/);
    expect(rule, name).toContain(`runbook: docs/alerts.md#${name.toLowerCase()}`);
    expect(runbook, name).toContain(`\n## ${name}\n`);
    // A test that expects it to fire (exp_labels) and one that expects nothing at some time.
    const cases = unitTests.split(/\n {2}- name: /).filter((c) => c.includes(`alertname: ${name}\n`));
    expect(
      cases.some((c) => new RegExp(`alertname: ${name}\\n\\s+exp_alerts:\\n\\s+- exp_labels`).test(c)),
      name,
    ).toBe(true);
    expect(
      cases.some((c) => new RegExp(`alertname: ${name}\\n\\s+exp_alerts: \\[\\]`).test(c)),
      name,
    ).toBe(true);
  }
});
