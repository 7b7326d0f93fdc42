/** Flow head and LSD decode (docs/pocket-tts.md §1.10, §1.11): conditioning c [D] ─▶ latent [32]. */
import type { OnnxSession } from "../../../onnx/runtime.ts";
import { float32Output } from "./state.ts";
import { concatFloat32 as concatRows } from "../../../lib/concat.ts";
import { seededLatentNoise } from "../noise.ts";

export interface FlowHeadConfig {
  latentDim: number;
  conditioningDim: number;
}

/** One Euler sub-step as seen by the flow head, for tracing against golden values. */
export interface LsdSubstep {
  /** x fed to the flow head [latentDim]. */
  xIn: Float32Array;
  /** flow_dir it returned [latentDim]. */
  flowDirection: Float32Array;
}

/** Rows of the load-time check that a batch gives every row what it gives alone. */
const ROW_CHECK_ROWS = 3;

export class FlowHead {
  /** Whether `rowsSession` gives each row of a batch exactly its result alone (checked by `create`). */
  private rowsIndependent = false;

  constructor(
    private readonly session: OnnxSession,
    private readonly config: FlowHeadConfig,
    /** The graph for several rows (per-row quantization, onnx/row-quantization.ts); the published one serves a single row. */
    private readonly rowsSession: OnnxSession = session,
  ) {}

  /**
   * A flow head that samples many rows in one call when a probe shows that rows of a batch come out
   * bit-identical to each row alone (then a stream's latents do not depend on what runs beside it);
   * otherwise rows run one call each.
   */
  static async create(session: OnnxSession, config: FlowHeadConfig, rowsSession: OnnxSession = session): Promise<FlowHead> {
    const head = new FlowHead(session, config, rowsSession);
    head.rowsIndependent = await head.rowsMatchAlone();
    return head;
  }

  /** Whether `sampleRows` puts rows in one call. */
  get batchesRows(): boolean {
    return this.rowsIndependent;
  }

  private async rowsMatchAlone(): Promise<boolean> {
    const { conditioningDim, latentDim } = this.config;
    const noise = seededLatentNoise(7, 1);
    const rows = Array.from({ length: ROW_CHECK_ROWS }, (_, index) => ({ c: noise.next(conditioningDim), x: noise.next(latentDim), s: index / ROW_CHECK_ROWS }));
    // Rows of very different ranges: a per-tensor quantization would couple them.
    rows[1]!.c.forEach((value, index, array) => (array[index] = value * 40));
    const batched = await this.run(
      this.rowsSession,
      concatRows(rows.map((row) => row.c)),
      Float32Array.from(rows, (row) => row.s),
      Float32Array.from(rows, (row) => row.s + 0.5),
      concatRows(rows.map((row) => row.x)),
    );
    for (const [index, row] of rows.entries()) {
      const alone = await this.run(this.session, row.c, Float32Array.of(row.s), Float32Array.of(row.s + 0.5), row.x);
      if (!alone.every((value, channel) => Object.is(value, batched[index * latentDim + channel]))) return false;
    }
    return true;
  }

  /** flow_dir [B, latentDim] = flow_net(c [B, D], s [B], t [B], x [B, latentDim]). */
  async velocity(c: Float32Array, s: Float32Array, t: Float32Array, x: Float32Array): Promise<Float32Array> {
    return this.run(this.session, c, s, t, x);
  }

  private async run(session: OnnxSession, c: Float32Array, s: Float32Array, t: Float32Array, x: Float32Array): Promise<Float32Array> {
    const batch = s.length;
    if (c.length !== batch * this.config.conditioningDim || t.length !== batch || x.length !== batch * this.config.latentDim) {
      throw new Error(`flow head inputs disagree on the batch of ${batch}`);
    }
    const outputs = await session.run({
      c: new session.Tensor("float32", c, [batch, this.config.conditioningDim]),
      s: new session.Tensor("float32", s, [batch, 1]),
      t: new session.Tensor("float32", t, [batch, 1]),
      x: new session.Tensor("float32", x, [batch, this.config.latentDim]),
    });
    return float32Output(outputs, "flow_dir", "flow_lm_flow").data;
  }

  /**
   * `sample` for several rows with the same LSD steps: one call per Euler sub-step for all of them where
   * rows are independent (`batchesRows`), one call per row otherwise; either way each row's latent is the
   * one `sample` gives it alone.
   */
  async sampleRows(rows: ReadonlyArray<{ conditioning: Float32Array; x0: Float32Array }>, lsdSteps: number): Promise<Float32Array[]> {
    if (!this.rowsIndependent || rows.length === 1) {
      const latents: Float32Array[] = [];
      for (const row of rows) latents.push(await this.sample(row.conditioning, row.x0, lsdSteps));
      return latents;
    }
    if (!Number.isInteger(lsdSteps) || lsdSteps < 1) throw new RangeError(`lsd_steps must be a positive integer, got ${lsdSteps}`);
    const { latentDim } = this.config;
    const c = concatRows(rows.map((row) => row.conditioning));
    const x = concatRows(rows.map((row) => row.x0));
    for (let index = 0; index < lsdSteps; index++) {
      const s = new Float32Array(rows.length).fill(index / lsdSteps);
      const t = new Float32Array(rows.length).fill((index + 1) / lsdSteps);
      const direction = await this.run(this.rowsSession, c, s, t, Float32Array.from(x));
      for (let channel = 0; channel < x.length; channel++) x[channel] = x[channel]! + Math.fround(direction[channel]! / lsdSteps);
    }
    return rows.map((_, row) => x.slice(row * latentDim, (row + 1) * latentDim));
  }

  /**
   * LSD decode (§1.11): from x0 = √temperature · z, for i in 0..N−1 with s = i/N and t = (i+1)/N,
   * x += flow_net(c, s, t, x) / N. Float32Array stores round each operation to float32 as PyTorch does.
   * Returns the normalised latent [latentDim]; `x0` is not modified.
   */
  async sample(conditioning: Float32Array, x0: Float32Array, lsdSteps: number, onSubstep?: (substep: LsdSubstep) => void): Promise<Float32Array> {
    if (!Number.isInteger(lsdSteps) || lsdSteps < 1) throw new RangeError(`lsd_steps must be a positive integer, got ${lsdSteps}`);
    const x = Float32Array.from(x0);
    for (let index = 0; index < lsdSteps; index++) {
      const s = Float32Array.of(index / lsdSteps);
      const t = Float32Array.of((index + 1) / lsdSteps);
      const xIn = Float32Array.from(x);
      const direction = await this.velocity(conditioning, s, t, xIn);
      onSubstep?.({ xIn, flowDirection: direction });
      for (let channel = 0; channel < x.length; channel++) x[channel] = x[channel]! + Math.fround(direction[channel]! / lsdSteps);
    }
    return x;
  }
}
