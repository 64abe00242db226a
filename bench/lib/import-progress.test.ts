// An import step's progress for the run's line and ETA: it moves through the read and holds in the
// dedupe, where the import's own percentComplete (merged rows) says 0 for half the step.
import { expect, test } from 'bun:test';
import { importStepFraction } from './import-flow';

test("an import step's progress grows through its phases, from 0 to 1", () => {
  const points: [string, number, number][] = [
    ['upload', 0, 0],
    ['upload', 1, 0],
    ['starting', 0, 0],
    ['read', 0.5, 0],
    ['read', 1, 0],
    ['dedupe', 0, 0],
    ['merge', 0, 0],
    ['merge', 0.5, 0.5],
    ['merge', 0, 1],
    ['finish', 0, 1],
  ];
  const fractions = points.map(([phase, read, merged]) => importStepFraction(phase, read, merged));
  expect(fractions[0]).toBe(0);
  expect(fractions.at(-1)).toBe(1);
  for (let k = 1; k < fractions.length; k++) expect(fractions[k]!).toBeGreaterThanOrEqual(fractions[k - 1]!);
  // Half through the read is not 0, as the merged rows alone would say; the dedupe is about half.
  expect(importStepFraction('read', 0.5, 0)).toBeGreaterThan(0.15);
  expect(importStepFraction('dedupe', 1, 0)).toBeCloseTo(0.35, 2);
});
