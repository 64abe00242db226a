/**
 * Every target of the run with its verdict, as the text report prints them: PASS, MISS, or SKIP for
 * a figure shown without a verdict (too few samples to judge).
 */
import { esc, figure, type Chart } from './svg';
import type { ResultData, TargetData } from './model';

export const verdict = (t: TargetData) => (!t.pass ? 'MISS' : t.judged === false ? 'SKIP' : 'PASS');

export function targetsChart(targets: readonly TargetData[]): Chart {
  const missed = targets.filter((t) => !t.pass).length;
  const title = `Targets: ${targets.length - missed} of ${targets.length} met`;
  const rows = targets.map((t) => {
    const v = verdict(t);
    return (
      `<tr class="point ${v.toLowerCase()}"><td class="verdict">${v}</td><td>${esc(t.name)}</td>` +
      `<td>${esc(t.value)}</td><td>${esc(t.target)}</td></tr>`
    );
  });
  const body =
    '<table class="targets"><thead><tr><th></th><th>target</th><th>value</th><th>aim</th></tr></thead>' +
    `<tbody>${rows.join('')}</tbody></table>`;
  return { kind: 'targets', title, points: targets.length, body, notes: [] };
}

export const targetsSection = (r: ResultData): string =>
  figure(
    r.targets?.length
      ? targetsChart(r.targets)
      : { kind: 'targets', title: 'Targets', points: 0, body: '', notes: ['This run recorded no targets.'] },
  );
