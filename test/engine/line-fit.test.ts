/** The decayed least-squares line the engine's capacity and start estimates share. */
import { expect, test } from "bun:test";
import { DecayedLineFit } from "../../src/engine/line-fit.ts";

test("starts at its prior and follows the points measured once they outweigh it", () => {
  const fit = new DecayedLineFit({ intercept: 1, slope: 1 }, { halfLife: 1000, priorWeight: 4 });
  expect(fit.line).toEqual({ intercept: 1, slope: 1 });
  for (let index = 0; index < 2000; index++) fit.observe(1 + (index % 5), 0.5 + 2 * (1 + (index % 5)));
  expect(fit.line.slope).toBeCloseTo(2, 1);
  // The prior, weighing as much as four points, still leans on it a little.
  expect(fit.line.intercept).toBeGreaterThan(0.45);
  expect(fit.line.intercept).toBeLessThan(0.65);
});

test("recent points count most: the fit follows a change", () => {
  const fit = new DecayedLineFit({ intercept: 0, slope: 1 }, { halfLife: 20, priorWeight: 4 });
  for (let index = 0; index < 400; index++) fit.observe(1 + (index % 5), 1 + (index % 5));
  const before = fit.line.slope;
  for (let index = 0; index < 200; index++) fit.observe(1 + (index % 5), 3 * (1 + (index % 5)));
  expect(before).toBeCloseTo(1, 1);
  expect(fit.line.slope).toBeGreaterThan(before + 0.5);
});

test("a falling line is held at a hundredth of the prior's slope, and the intercept at 0 or more", () => {
  const falling = new DecayedLineFit({ intercept: 0, slope: 1 }, { halfLife: 1000, priorWeight: 4 });
  for (let index = 0; index < 2000; index++) falling.observe(1 + (index % 5), 10 - (1 + (index % 5)));
  expect(falling.line.slope).toBe(0.01);
  const below = new DecayedLineFit({ intercept: 0, slope: 1 }, { halfLife: 1000, priorWeight: 4 });
  for (let index = 0; index < 2000; index++) below.observe(10 + (index % 5), 5 * (10 + (index % 5)) - 40);
  expect(below.line.intercept).toBe(0);
});
