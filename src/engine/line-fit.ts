/**
 * A line `intercept + slope · x` fitted by exponentially weighted least squares: recent points count most,
 * so the fit follows a machine whose load changes. Each coefficient is pulled toward a prior, as if the
 * prior had been measured `priorWeight` times, half at x = 1 and half at x = 8, so that points that all
 * share one x still give a slope; the slope is kept above a hundredth of the prior's, the intercept at or
 * above 0. Pure: the engine's capacity (tick seconds against streams stepped) and its starts (first audio
 * against streams starting together) are fitted by it.
 */
export interface Line {
  intercept: number;
  slope: number;
}

/** Where the prior is taken as measured. */
const PRIOR_POINTS = [1, 8];

export class DecayedLineFit {
  readonly #prior: Line;
  readonly #priorWeight: number;
  readonly #decay: number;
  // Weighted sums of the points seen: weight, x, y, x², xy.
  #w = 0;
  #x = 0;
  #y = 0;
  #xx = 0;
  #xy = 0;
  #line: Line;

  constructor(prior: Line, options: { halfLife: number; priorWeight: number }) {
    this.#prior = prior;
    this.#priorWeight = options.priorWeight;
    this.#decay = 0.5 ** (1 / options.halfLife);
    this.#line = { ...prior };
  }

  /** The line fitted so far (the prior before any point). */
  get line(): Readonly<Line> {
    return this.#line;
  }

  observe(x: number, y: number): void {
    const decay = this.#decay;
    this.#w = this.#w * decay + 1;
    this.#x = this.#x * decay + x;
    this.#y = this.#y * decay + y;
    this.#xx = this.#xx * decay + x * x;
    this.#xy = this.#xy * decay + x * y;
    this.#line = this.#solve();
  }

  #solve(): Line {
    const prior = this.#prior;
    let [w, x, y, xx, xy] = [this.#w, this.#x, this.#y, this.#xx, this.#xy];
    for (const point of PRIOR_POINTS) {
      const value = prior.intercept + prior.slope * point;
      const weight = this.#priorWeight / PRIOR_POINTS.length;
      w += weight;
      x += weight * point;
      y += weight * value;
      xx += weight * point * point;
      xy += weight * point * value;
    }
    const determinant = w * xx - x * x;
    let slope = determinant > 0 ? (w * xy - x * y) / determinant : prior.slope;
    const floor = prior.slope / 100;
    if (!(slope > floor)) slope = floor;
    const intercept = Math.max(0, (y - slope * x) / w);
    return { intercept, slope };
  }
}
