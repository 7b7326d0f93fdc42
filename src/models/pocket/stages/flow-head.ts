/** Flow head and LSD decode (§1.10, §1.11): conditioning c [D] ─▶ latent [32]. */
import type { OnnxSession } from "../../../onnx/runtime.ts";
import { float32Output } from "./state.ts";

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

export class FlowHead {
  constructor(
    private readonly session: OnnxSession,
    private readonly config: FlowHeadConfig,
  ) {}

  /** flow_dir [B, latentDim] = flow_net(c [B, D], s [B], t [B], x [B, latentDim]). */
  async velocity(c: Float32Array, s: Float32Array, t: Float32Array, x: Float32Array): Promise<Float32Array> {
    const batch = s.length;
    if (c.length !== batch * this.config.conditioningDim || t.length !== batch || x.length !== batch * this.config.latentDim) {
      throw new Error(`flow head inputs disagree on the batch of ${batch}`);
    }
    const outputs = await this.session.run({
      c: new this.session.Tensor("float32", c, [batch, this.config.conditioningDim]),
      s: new this.session.Tensor("float32", s, [batch, 1]),
      t: new this.session.Tensor("float32", t, [batch, 1]),
      x: new this.session.Tensor("float32", x, [batch, this.config.latentDim]),
    });
    return float32Output(outputs, "flow_dir", "flow_lm_flow").data;
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
