/** Text conditioner (docs/pocket-tts.md §1.8, §3.1): token ids ─▶ text conditioning [1, n, D]. */
import type { OnnxSession } from "../../../onnx/runtime.ts";
import { type Float32Tensor, float32Output } from "./state.ts";

export class TextConditioner {
  constructor(
    private readonly session: OnnxSession,
    private readonly conditioningDim: number,
  ) {}

  /** Token ids (no BOS/EOS, §1.8) → conditioning rows [1, n, D]: raw embedding rows, no projection. */
  async embed(tokenIds: readonly number[]): Promise<Float32Tensor> {
    const ids = BigInt64Array.from(tokenIds, (id) => BigInt(id));
    const outputs = await this.session.run({ token_ids: new this.session.Tensor("int64", ids, [1, ids.length]) });
    const embeddings = float32Output(outputs, "embeddings", "text_conditioner");
    if (embeddings.data.length !== tokenIds.length * this.conditioningDim) throw new Error(`text_conditioner returned [${embeddings.dims.join(", ")}], expected [1, ${tokenIds.length}, ${this.conditioningDim}]`);
    return embeddings;
  }
}
