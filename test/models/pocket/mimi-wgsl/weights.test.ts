import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readMimiWeightsFromOnnx } from "../../../../src/models/pocket/mimi-wgsl/weights.ts";

// A minimal protobuf writer for the few onnx.proto fields these graphs need.
function varint(value: number): number[] {
  const bytes: number[] = [];
  do {
    let byte = value % 128;
    value = Math.floor(value / 128);
    if (value > 0) byte |= 0x80;
    bytes.push(byte);
  } while (value > 0);
  return bytes;
}
const lengthDelimited = (field: number, payload: Uint8Array | number[]) => [...varint(field * 8 + 2), ...varint(payload.length), ...payload];
const varintField = (field: number, value: number) => [...varint(field * 8), ...varint(value)];
const text = (field: number, value: string) => lengthDelimited(field, [...new TextEncoder().encode(value)]);

// onnx.proto TensorProto.DataType
const FLOAT = 1;
const UINT8 = 2;
const INT8 = 3;

function tensor(name: string, dataType: number, dims: number[], raw: ArrayBufferView): number[] {
  return [...dims.flatMap((dim) => varintField(1, dim)), ...varintField(2, dataType), ...text(8, name), ...lengthDelimited(9, [...new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength)])];
}

function node(name: string, opType: string, inputs: string[], outputs: string[]): number[] {
  return [...inputs.flatMap((input) => text(1, input)), ...outputs.flatMap((output) => text(2, output)), ...text(3, name), ...text(4, opType)];
}

function model(nodes: number[][], initializers: number[][]): Uint8Array {
  const graph = [...nodes.flatMap((entry) => lengthDelimited(1, entry)), ...initializers.flatMap((entry) => lengthDelimited(5, entry))];
  return new Uint8Array([...varintField(1, 8), ...lengthDelimited(7, graph)]);
}

const dir = mkdtempSync(join(tmpdir(), "mimi-weights-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("Mimi decoder weights from ONNX graphs", () => {
  test("int8 MatMulInteger weights are dequantised per tensor and returned as [out, in]; fp32 MatMul ones transposed back", async () => {
    // linear1 stored as the quantizer leaves it: [in 3, out 2] int8, scale 0.5, zero point 0 (symmetric, §3.6).
    const linear1 = Int8Array.of(1, -2, 3, -4, 5, -6);
    // in_proj of layer 1 as uint8 with a zero point of 3 (the asymmetric case).
    const inProj = Uint8Array.of(3, 4, 5, 6);
    const outProj = Float32Array.of(1, 2, 3, 4);
    const path = join(dir, "decoder_int8.onnx");
    writeFileSync(
      path,
      model(
        [
          node("/decoder_transformer/transformer/layers.0/linear1/MatMul_quant", "MatMulInteger", ["x_quantized", "onnx::MatMul_7_quantized", "x_zero_point", "onnx::MatMul_7_zero_point"], ["y"]),
          node("/decoder_transformer/transformer/layers.1/self_attn/in_proj/MatMul_quant", "MatMulInteger", ["h_quantized", "onnx::MatMul_8_quantized", "h_zero_point", "onnx::MatMul_8_zero_point"], ["z"]),
          node("/decoder_transformer/transformer/layers.1/self_attn/out_proj/MatMul", "MatMul", ["a", "onnx::MatMul_9"], ["b"]),
          node("/decoder_transformer/transformer/layers.1/self_attn/MatMul", "MatMul", ["q", "k"], ["scores"]),
        ],
        [
          tensor("onnx::MatMul_7_quantized", INT8, [3, 2], linear1),
          tensor("onnx::MatMul_7_scale", FLOAT, [], Float32Array.of(0.5)),
          tensor("onnx::MatMul_7_zero_point", INT8, [], Int8Array.of(0)),
          tensor("onnx::MatMul_8_quantized", UINT8, [2, 2], inProj),
          tensor("onnx::MatMul_8_scale", FLOAT, [], Float32Array.of(0.25)),
          tensor("onnx::MatMul_8_zero_point", UINT8, [], Uint8Array.of(3)),
          tensor("onnx::MatMul_9", FLOAT, [2, 2], outProj),
          tensor("mimi.decoder.model.0.conv.weight", FLOAT, [1, 1, 2], Float32Array.of(7, 8)),
          tensor("emb_std", FLOAT, [1], Float32Array.of(1.5)),
          tensor("mimi.encoder.model.0.conv.weight", FLOAT, [1, 1, 1], Float32Array.of(9)),
        ],
      ),
    );
    const weights = await readMimiWeightsFromOnnx(path);
    expect([...weights.keys()].sort()).toEqual([
      "flow_lm.emb_std",
      "mimi.decoder.model.0.conv.weight",
      "mimi.decoder_transformer.transformer.layers.0.linear1.weight",
      "mimi.decoder_transformer.transformer.layers.1.self_attn.in_proj.weight",
      "mimi.decoder_transformer.transformer.layers.1.self_attn.out_proj.weight",
    ]);
    expect(weights.get("mimi.decoder_transformer.transformer.layers.0.linear1.weight")).toEqual({ dims: [2, 3], values: Float32Array.of(0.5, 1.5, 2.5, -1, -2, -3) });
    expect(weights.get("mimi.decoder_transformer.transformer.layers.1.self_attn.in_proj.weight")).toEqual({ dims: [2, 2], values: Float32Array.of(0, 0.5, 0.25, 0.75) });
    expect(weights.get("mimi.decoder_transformer.transformer.layers.1.self_attn.out_proj.weight")).toEqual({ dims: [2, 2], values: Float32Array.of(1, 3, 2, 4) });
    expect(weights.get("flow_lm.emb_std")).toEqual({ dims: [1], values: Float32Array.of(1.5) });
  });

  test("per-channel scales are refused rather than applied wrongly", async () => {
    const path = join(dir, "per_channel.onnx");
    writeFileSync(
      path,
      model(
        [node("/decoder_transformer/transformer/layers.0/linear2/MatMul_quant", "MatMulInteger", ["x", "w_quantized", "x_zp", "w_zero_point"], ["y"])],
        [tensor("w_quantized", INT8, [2, 2], Int8Array.of(1, 2, 3, 4)), tensor("w_scale", FLOAT, [2], Float32Array.of(1, 2)), tensor("w_zero_point", INT8, [], Int8Array.of(0))],
      ),
    );
    await expect(readMimiWeightsFromOnnx(path)).rejects.toThrow(/per-tensor/);
  });
});
