/**
 * Runs every golden case of a fixture (../shared/fixtures/{pocket-tiny,mimi-full}, see its README)
 * through the project's own code and reports each comparison.
 *
 * Rules: token ids, texts, EOS decisions, step counts and lengths must match exactly; tensors pass at
 * relRms = rms(actual − golden) / rms(golden) ≤ 1e-4 (report.ts; float32 implementations land near 1e-6, fixture
 * README "Observed differences"). Cases are discovered from golden.json → `cases`, so a case without a
 * runner here, or one whose module is missing, is reported as a failure rather than skipped.
 *
 * Values the ONNX path cannot observe (the encoder's pre-projection latents and the decoder's internal
 * stage outputs) are listed with `observable: false`. With `decoder = "wgsl"` the Mimi decoder cases run
 * on our WGSL kernels (src/models/pocket/mimi-wgsl/decoder.ts, fed the fixture's own mimi_decoder.onnx weights): their
 * stage outputs are checked, and their audio is also compared with the ONNX decoder's.
 *
 * End-to-end runs go through the server's engine and runner (engine/generate.ts, models/pocket/runner.ts), so
 * the plans, loop rule, frame caps and decode schedule checked are the ones the server runs.
 *
 * With `batch` N (`conformance --batch N`), each golden end-to-end request runs in the same runner beside
 * N − 1 other requests (other chunks, seeds and lengths, never stopping at EOS), every tick's AR steps in one
 * batched FlowLM call and one flow head call, and on WGSL equal-sized decodes in one call; the flow_lm case
 * steps the batched step inside calls of N streams, the others random streams at other positions and
 * lengths (crowd.ts); the Mimi decoder cases decode beside N − 1 random streams (in one call on WGSL, call
 * after call on the ONNX graph). Without it the flow_lm case checks the published graph itself and
 * end-to-end runs as the server does with one stream.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { generateTogether } from "../engine/generate.ts";
import { planTextChunks, type TextChunk } from "../models/pocket/text-chunks.ts";
import type { Generation, StepTrace } from "../models/pocket/request-state.ts";
import { generationJob, PocketRunner } from "../models/pocket/runner.ts";
import { replayLatentNoise } from "../models/pocket/noise.ts";
import type { OnnxProviderOptions } from "../onnx/runtime.ts";
import { prepareTextPrompt, splitIntoBestSentences } from "../models/pocket/text-prompt.ts";
import type { PocketStages } from "../models/pocket/pipeline.ts";
import { VoiceEncoder } from "../models/pocket/stages/voice-encoder.ts";
import { voiceStateFromSafetensors } from "../models/pocket/stages/flow-lm.ts";
import { type FlowLmState } from "../models/pocket/stages/state.ts";
import type { MimiGpuDecoder } from "../models/pocket/mimi-wgsl/decoder.ts";
import { concatFloat32 } from "../lib/concat.ts";
import { decodeInCalls, Fixture, loadTokenizer, rows } from "./fixture.ts";
import { exactCase, orNotRun, tensorCase, unobservable, type ConformanceCase, type ConformanceDecoder, type ConformanceReport, type ConformanceStage } from "./report.ts";

export async function runConformance(fixtureDir: string, decoder: ConformanceDecoder, options: OnnxProviderOptions = {}, batch?: number): Promise<ConformanceReport> {
  if (batch !== undefined && (!Number.isInteger(batch) || batch < 1)) throw new RangeError(`batch must be a positive integer, got ${batch}`);
  const fixture = new Fixture(fixtureDir, options, decoder, batch);
  const cases: ConformanceCase[] = [];
  try {
    for (const caseName of Object.keys(fixture.golden.cases)) {
      const runner = CASE_RUNNERS[caseName];
      if (!runner) {
        cases.push({ case: caseName, stage: "end_to_end", maxAbs: null, relRms: null, pass: false, detail: "golden case has no conformance runner" });
        continue;
      }
      try {
        cases.push(...(await runner.run(fixture, fixture.golden.cases[caseName] as never)));
      } catch (error) {
        cases.push({ case: caseName, stage: runner.stage, maxAbs: null, relRms: null, pass: false, detail: `not run: ${(error as Error).message}` });
      }
    }
  } finally {
    await fixture.close();
  }
  const provider = await fixture.provider();
  const executionProvider = await fixture.executionProvider();
  return { fixture: fixture.golden.fixture, decoder, ...(provider ? { provider } : {}), ...(executionProvider ? { executionProvider } : {}), ...(batch ? { batch } : {}), pass: cases.length > 0 && cases.every((entry) => entry.pass), cases };
}

// ---------------------------------------------------------------------------------------------------
// Case runners, keyed by golden.json case name

interface CaseRunner {
  stage: ConformanceStage;
  run(fixture: Fixture, spec: never): Promise<ConformanceCase[]>;
}

function runner<Spec>(stage: ConformanceStage, run: (fixture: Fixture, spec: Spec) => Promise<ConformanceCase[]>): CaseRunner {
  return { stage, run: run as CaseRunner["run"] };
}

interface TokenizerSpec {
  cases: { text: string; tensor: string; ids: number[] }[];
}

interface PrepareSpec {
  cases: { input: string; prepared: string; frames_after_eos_guess: number; pad_with_spaces_for_short_inputs?: boolean; remove_semicolons?: boolean }[];
}

interface SplitSpec {
  input: string;
  max_tokens: number;
  chunks: string[];
  chunk_token_counts: number[];
}

interface IoSpec {
  inputs: Record<string, string>;
  outputs: Record<string, string>;
}

interface VoiceSpec extends IoSpec {
  frames: number;
  padded_samples: number;
  voice_state_file: string;
}

interface FlowLmRunSpec {
  lsd_decode_steps: number;
  outputs: Record<string, string>;
  is_eos: boolean[];
}

interface FlowLmSpec extends IoSpec {
  eos_threshold: number;
  state_offsets: { after_voice_prefill: number; after_text_prefill: number; after_last_step: number };
  runs: Record<string, FlowLmRunSpec>;
}

interface DecoderSpec extends IoSpec {
  chunks?: number[];
  intermediates_first_2_latents?: Record<string, string>;
}

interface DecoderLongSpec extends IoSpec {
  audio_tail_first_sample: number;
  total_samples: number;
}

interface EndToEndChunkSpec {
  text: string;
  token_ids: number[];
  frames_after_eos: number;
  max_gen_len: number;
  eos_step: number | null;
  steps_run: number;
  latents_emitted: number;
}

interface EndToEndSpec {
  cases: { text: string; chunks: EndToEndChunkSpec[]; inputs: { noise: string; voice_waveform: string }; outputs: { eos_logit: string; latent: string; audio: string }; audio_samples: number }[];
}

const CASE_RUNNERS: Readonly<Record<string, CaseRunner>> = {
  tokenizer: runner<TokenizerSpec>("tokenizer", async (fixture, spec) => {
    const names = spec.cases.map((entry, index) => `tokenizer[${index}] ${JSON.stringify(entry.text)}`);
    return orNotRun(names, "tokenizer", async () => {
      const tokenizer = await loadTokenizer(fixture);
      return spec.cases.map((entry, index) => {
        const golden = fixture.ids(entry.tensor);
        const result = exactCase(names[index]!, "tokenizer", tokenizer.encode(entry.text), golden);
        if (golden.join() !== entry.ids.join()) return { ...result, pass: false, detail: "golden.json and golden.safetensors disagree" };
        return result;
      });
    });
  }),

  prepare_text_prompt: runner<PrepareSpec>("tokenizer", async (_fixture, spec) => {
    const names = spec.cases.map((entry, index) => `prepare_text_prompt[${index}] ${JSON.stringify(entry.input)}`);
    return orNotRun(names, "tokenizer", async () => {
      return spec.cases.map((entry, index) => {
        const prepared = prepareTextPrompt(entry.input, {
          padWithSpacesForShortInputs: entry.pad_with_spaces_for_short_inputs ?? false,
          removeSemicolons: entry.remove_semicolons ?? false,
        });
        return exactCase(names[index]!, "tokenizer", [prepared.text, prepared.framesAfterEosGuess], [entry.prepared, entry.frames_after_eos_guess]);
      });
    });
  }),

  split_into_best_sentences: runner<SplitSpec>("tokenizer", async (fixture, spec) => {
    const name = "split_into_best_sentences";
    return orNotRun([name], "tokenizer", async () => {
      const tokenizer = await loadTokenizer(fixture);
      const chunks = splitIntoBestSentences(spec.input, tokenizer, { padWithSpacesForShortInputs: false, removeSemicolons: false }, spec.max_tokens);
      return [
        exactCase(`${name}.chunks`, "tokenizer", chunks, spec.chunks),
        exactCase(`${name}.chunk_token_counts`, "tokenizer", chunks.map((chunk) => tokenizer.encode(chunk).length), spec.chunk_token_counts),
      ];
    });
  }),

  text_conditioner: runner<IoSpec>("text_conditioner", async (fixture, spec) => {
    const stages = await fixture.stages();
    const embeddings = await stages.textConditioner.embed(fixture.ids(spec.inputs.token_ids!));
    return [tensorCase("text_conditioner.embeddings", "text_conditioner", embeddings.data, fixture.float(spec.outputs.embeddings!))];
  }),

  voice_encoding: runner<VoiceSpec>("encoder", async (fixture, spec) => {
    const stages = await fixture.stages();
    const waveform = fixture.float(spec.inputs.waveform!);
    const withBos = fixture.float(spec.outputs.conditioning_with_bos!);
    const withoutBos = fixture.float(spec.outputs.conditioning!);
    const width = fixture.dims(spec.outputs.conditioning!).at(-1)!;
    const encoder = stages.voiceEncoder;
    if (!encoder) throw new Error("the bundle has no voice encoder");
    const padded = new Float32Array(spec.padded_samples);
    padded.set(waveform);

    const cases: ConformanceCase[] = [
      exactCase("voice_encoding.bos_detection(mimi_encoder.onnx baked in)", "encoder", [encoder.bosBakedIn], [true]),
      tensorCase("voice_encoding.conditioning_with_bos(padded)", "encoder", (await encoder.encode(padded)).data, withBos),
      tensorCase("voice_encoding.conditioning_with_bos(unpadded)", "encoder", (await encoder.encode(waveform)).data, withBos),
    ];
    const variantPath = join(fixture.directory, "variants", "mimi_encoder_no_bos.onnx");
    if (existsSync(variantPath)) {
      const { bundle } = await fixture.pipeline();
      const variant = await VoiceEncoder.create(await fixture.session(variantPath), {
        samplesPerFrame: bundle.dims.samplesPerFrame,
        conditioningDim: bundle.dims.conditioningDim,
        bosBeforeVoice: bundle.bosBeforeVoice,
      });
      const encoded = (await variant.encode(padded)).data;
      cases.push(
        exactCase("voice_encoding.bos_detection(variants/mimi_encoder_no_bos.onnx prepended)", "encoder", [variant.bosBakedIn], [false]),
        tensorCase("voice_encoding.conditioning(no-BOS variant)", "encoder", rows(encoded, width, 1, spec.frames + 1), withoutBos),
        tensorCase("voice_encoding.conditioning_with_bos(no-BOS variant + bos_before_voice.npy)", "encoder", encoded, withBos),
      );
    } else {
      cases.push({ case: "voice_encoding.conditioning(no-BOS variant)", stage: "encoder", maxAbs: null, relRms: null, pass: false, detail: `not run: ${variantPath} is missing` });
    }
    cases.push(unobservable("voice_encoding.mimi_latents", "encoder", "pre-projection latents stay inside mimi_encoder.onnx (speaker_proj_weight is applied in the graph)"));

    // The predefined-voice file must give the same FlowLM state as encoding + prefilling the audio.
    const fromAudio = await stages.flowLm.prefill(stages.flowLm.emptyState(), await encoder.encode(waveform));
    const fromFile = await voiceStateFromSafetensors(readFileSync(join(fixture.directory, spec.voice_state_file)), stages.flowLm);
    cases.push(
      exactCase("voice_encoding.voice_state_file.offset", "encoder", [fromFile.positions], [fromAudio.positions]),
      tensorCase("voice_encoding.voice_state_file.cache", "encoder", filledCacheRows(fromFile, stages), filledCacheRows(fromAudio, stages)),
    );
    return cases;
  }),

  flow_lm: runner<FlowLmSpec>("flow_lm", async (fixture, spec) => {
    const stages = await fixture.stages();
    const { latentDim, conditioningDim } = stages.flowLm.config;
    const voice = await stages.flowLm.prefill(stages.flowLm.emptyState(), { data: fixture.float(spec.inputs.voice_conditioning!), dims: fixture.dims(spec.inputs.voice_conditioning!) });
    const text = { data: fixture.float(spec.inputs.text_embeddings!), dims: fixture.dims(spec.inputs.text_embeddings!) };
    const noise = fixture.float(spec.inputs.noise!);
    const cases: ConformanceCase[] = [];
    const flowLmSteps = await fixture.flowLmSteps();
    for (const [runName, run] of Object.entries(spec.runs)) {
      const prefix = `flow_lm.${runName}`;
      let state = await stages.flowLm.prefill(voice, text);
      const slot = flowLmSteps.stepper?.admit(state);
      const offsets = [voice.positions, state.positions];
      const steps = fixture.float(run.outputs.eos_logit!).length;
      const inputLatents = new Float32Array(steps * latentDim);
      const conditioning = new Float32Array(steps * conditioningDim);
      const eosLogits = new Float32Array(steps);
      const latents = new Float32Array(steps * latentDim);
      const flowInputs: number[] = [];
      const flowDirections: number[] = [];
      let input: Float32Array | null = null;
      for (let k = 0; k < steps; k++) {
        inputLatents.set(input ?? new Float32Array(latentDim).fill(NaN), k * latentDim);
        let result: { conditioning: Float32Array; eosLogit: number };
        if (flowLmSteps.stepper && slot) {
          [result] = (await flowLmSteps.stepper.step([{ slot, latent: input }])) as [typeof result];
        } else {
          const stepped = await stages.flowLm.step(state, input);
          state = stepped.state;
          result = stepped;
        }
        conditioning.set(result.conditioning, k * conditioningDim);
        eosLogits[k] = result.eosLogit;
        input = await stages.flowHead.sample(result.conditioning, rows(noise, latentDim, k, k + 1), run.lsd_decode_steps, (substep) => {
          flowInputs.push(...substep.xIn);
          flowDirections.push(...substep.flowDirection);
        });
        latents.set(input, k * latentDim);
      }
      offsets.push(slot ? slot.positions : state.positions);
      if (slot) flowLmSteps.stepper!.release(slot);
      const expectedOffsets = [spec.state_offsets.after_voice_prefill, spec.state_offsets.after_text_prefill, spec.state_offsets.after_last_step];
      cases.push(
        exactCase(`${prefix}.state_offsets`, "flow_lm", offsets, expectedOffsets),
        tensorCase(`${prefix}.input_latent`, "flow_lm", inputLatents, fixture.float(run.outputs.input_latent!)),
        tensorCase(`${prefix}.conditioning`, "flow_lm", conditioning, fixture.float(run.outputs.conditioning!), flowLmSteps.detail),
        tensorCase(`${prefix}.eos_logit`, "flow_lm", eosLogits, fixture.float(run.outputs.eos_logit!)),
        exactCase(`${prefix}.is_eos`, "flow_lm", Array.from(eosLogits, (logit) => logit > spec.eos_threshold), run.is_eos),
        tensorCase(`${prefix}.latent`, "flow_head", latents, fixture.float(run.outputs.latent!)),
      );
      if (run.outputs.flow_x_in) cases.push(tensorCase(`${prefix}.flow_x_in`, "flow_head", flowInputs, fixture.float(run.outputs.flow_x_in)));
      if (run.outputs.flow_dir) cases.push(tensorCase(`${prefix}.flow_dir`, "flow_head", flowDirections, fixture.float(run.outputs.flow_dir)));
    }
    flowLmSteps.close();
    return cases;
  }),

  flow_net: runner<IoSpec>("flow_head", async (fixture, spec) => {
    const stages = await fixture.stages();
    const [c, s, t, x] = (["c", "s", "t", "x"] as const).map((name) => fixture.float(spec.inputs[name]!)) as [Float32Array, Float32Array, Float32Array, Float32Array];
    return [tensorCase("flow_net.flow_dir", "flow_head", await stages.flowHead.velocity(c, s, t, x), fixture.float(spec.outputs.flow_dir!))];
  }),

  mimi_decoder: runner<DecoderSpec>("decoder", async (fixture, spec) => {
    const decoder = await fixture.mimiDecoder();
    const latents = fixture.float(spec.inputs.latents!);
    const frameCount = latents.length / decoder.config.latentDim;
    const cases: ConformanceCase[] = [];
    const single = await fixture.decode(decoder, latents, Array<number>(frameCount).fill(1));
    for (const [output, tensorName] of Object.entries(spec.outputs)) {
      const calls = output === "audio_single" ? null : output === "audio_chunked" ? spec.chunks : output === "audio_whole" ? [frameCount] : undefined;
      if (calls === undefined) {
        cases.push({ case: `mimi_decoder.${output}`, stage: "decoder", maxAbs: null, relRms: null, pass: false, detail: "unknown output: no call pattern" });
        continue;
      }
      if (calls === null) {
        cases.push(tensorCase(`mimi_decoder.${output}`, "decoder", single, fixture.float(tensorName), `one latent per call${fixture.decodeDetail}`));
      } else {
        cases.push(tensorCase(`mimi_decoder.${output}`, "decoder", await fixture.decode(decoder, latents, calls), fixture.float(tensorName), `calls of [${calls.join(", ")}] latents${fixture.decodeDetail}`));
      }
    }
    if (fixture.decoder === "wgsl") {
      const onnxSingle = await decodeInCalls(await fixture.onnxMimiDecoder(), latents, Array<number>(frameCount).fill(1));
      cases.push(tensorCase("mimi_decoder.audio_single_vs_onnx", "decoder", single, onnxSingle, "WGSL against onnxruntime on the same mimi_decoder.onnx, one latent per call"));
      const intermediates = Object.entries(spec.intermediates_first_2_latents ?? {});
      if (intermediates.length > 0) {
        const stages = await decodeStagesOfFirstLatents(await fixture.gpuDecoder(), latents, 2);
        for (const [stage, tensorName] of intermediates) {
          const actual = stages.get(stage);
          if (!actual) cases.push({ case: `mimi_decoder.intermediate.${stage}`, stage: "decoder", maxAbs: null, relRms: null, pass: false, detail: "the WGSL decoder has no such stage" });
          else cases.push(tensorCase(`mimi_decoder.intermediate.${stage}`, "decoder", actual, fixture.float(tensorName), "first 2 latents, one per call, concatenated on time"));
        }
      }
      return cases;
    }
    for (const [stage, tensorName] of Object.entries(spec.intermediates_first_2_latents ?? {})) {
      if (stage === "decoder.model.11") {
        // The last SEANet stage is the audio itself: the first two latents decoded one per call.
        const expected = fixture.float(tensorName);
        cases.push(tensorCase(`mimi_decoder.intermediate.${stage}`, "decoder", single.subarray(0, expected.length), expected));
      } else {
        cases.push(unobservable(`mimi_decoder.intermediate.${stage}`, "decoder", "a stage output inside mimi_decoder.onnx; for localising errors in a hand-written decoder"));
      }
    }
    return cases;
  }),

  mimi_decoder_long: runner<DecoderLongSpec>("decoder", async (fixture, spec) => {
    const decoder = await fixture.mimiDecoder();
    const latents = fixture.float(spec.inputs.latents!);
    const audio = await fixture.decode(decoder, latents, Array<number>(latents.length / decoder.config.latentDim).fill(1));
    return [
      exactCase("mimi_decoder_long.total_samples", "decoder", [audio.length], [spec.total_samples]),
      tensorCase("mimi_decoder_long.audio_tail", "decoder", audio.subarray(spec.audio_tail_first_sample), fixture.float(spec.outputs.audio_tail!), "one latent per call; every KV ring a decoder uses wraps (the export's 1000 slots during latent 62, a resized 384 during latent 24, the WGSL decoder's 250 during latent 16)"),
    ];
  }),

  end_to_end: runner<EndToEndSpec>("end_to_end", async (fixture, spec) => {
    const { bundle, stages } = await fixture.pipeline();
    if (fixture.batch !== undefined && !stages.flowLmSlots) throw new Error(`no batched FlowLM step: ${stages.flowLmSlotsUnavailable}`);
    const eosThreshold = fixture.golden.generation_parameters?.eos_threshold ?? -4;
    // With --decoder wgsl the whole pipeline's audio comes from the WGSL decoder too.
    const runner = PocketRunner.forStages(stages, bundle.dims.sampleRateHz, await fixture.mimiDecoder());
    const toChunks = (chunks: readonly EndToEndChunkSpec[]): TextChunk[] => chunks.map((chunk) => ({ tokenIds: chunk.token_ids, framesAfterEos: chunk.frames_after_eos }));
    const everyChunk = spec.cases.flatMap((golden) => toChunks(golden.chunks));
    const cases: ConformanceCase[] = [];
    for (const [caseIndex, golden] of spec.cases.entries()) {
      const prefix = `end_to_end[${caseIndex}]`;
      cases.push(...(await chunkPlanCases(fixture, prefix, golden.text, golden.chunks)));
      // As in the fixture's ONNX replication: the voice is this pipeline's own encoding of the waveform.
      if (!stages.voiceEncoder) throw new Error("the bundle has no voice encoder");
      const voice = await stages.flowLm.prefill(stages.flowLm.emptyState(), await stages.voiceEncoder.encode(fixture.float(golden.inputs.voice_waveform)));
      const traces: StepTrace[] = [];
      const request: Generation = {
        voice,
        chunks: toChunks(golden.chunks),
        params: { eosThreshold, lsdSteps: 1 },
        noise: replayLatentNoise(fixture.float(golden.inputs.noise)),
        onStep: (trace) => traces.push(trace),
      };
      const goldenSteps = golden.chunks.reduce((sum, chunk) => sum + chunk.steps_run, 0);
      const companions = Array.from({ length: (fixture.batch ?? 1) - 1 }, (_, index) => companionRequest(voice, everyChunk, index, goldenSteps));
      let widestStep = 0;
      let widestDecode = 0;
      const onTick = (_: unknown, batchSizes: Readonly<Record<string, number[]>>) => {
        widestStep = Math.max(widestStep, ...(batchSizes.flow_lm ?? []));
        widestDecode = Math.max(widestDecode, ...(batchSizes.decode ?? []));
      };
      const model = { nativeSampleRateHz: bundle.dims.sampleRateHz, framesPerSecond: bundle.dims.frameRateHz };
      const [audio] = await generateTogether(runner, model, [request, ...companions].map((generation) => generationJob(generation)), onTick);
      const detail = fixture.batch === undefined ? undefined : `beside ${companions.length} other requests in the same runner: FlowLM calls of up to ${widestStep} streams, decoder calls of up to ${widestDecode}`;

      for (const [chunkIndex, chunk] of golden.chunks.entries()) {
        const chunkTraces = traces.filter((trace) => trace.chunkIndex === chunkIndex);
        const eosStep = chunkTraces.find((trace) => trace.isEos)?.step ?? null;
        cases.push(
          exactCase(
            `${prefix}.chunk[${chunkIndex}].eos_step/steps_run/latents_emitted`,
            "end_to_end",
            [eosStep, chunkTraces.length, chunkTraces.filter((trace) => trace.emitted).length],
            [chunk.eos_step, chunk.steps_run, chunk.latents_emitted],
          ),
        );
      }
      const latentDim = stages.flowLm.config.latentDim;
      const latents = new Float32Array(traces.length * latentDim);
      traces.forEach((trace, index) => latents.set(trace.latent, index * latentDim));
      const joined = concatFloat32(audio!.map((chunk) => chunk.samples));
      cases.push(
        tensorCase(`${prefix}.eos_logit`, "end_to_end", traces.map((trace) => trace.eosLogit), fixture.float(golden.outputs.eos_logit), detail),
        tensorCase(`${prefix}.latent`, "end_to_end", latents, fixture.float(golden.outputs.latent), detail),
        exactCase(`${prefix}.audio_samples`, "end_to_end", [joined.length], [golden.audio_samples]),
        tensorCase(`${prefix}.audio`, "end_to_end", joined, fixture.float(golden.outputs.audio), detail),
      );
      // The golden request really stepped beside the others, in calls of all N.
      if (fixture.batch !== undefined) cases.push(exactCase(`${prefix}.widest_flow_lm_call`, "end_to_end", [widestStep], [fixture.batch]));
    }
    return cases;
  }),
};

/**
 * The `index`-th request beside a golden one under `--batch`: every golden chunk, starting at another one (so
 * at another position), its own seed, and EOS out of reach, so it runs each chunk to its frame cap for about
 * as long as the golden request's `goldenSteps` steps, the companions ending one after another.
 */
function companionRequest(voice: FlowLmState, chunks: readonly TextChunk[], index: number, goldenSteps: number): Generation {
  const start = (index + 1) % chunks.length;
  return {
    voice,
    chunks: [...chunks.slice(start), ...chunks.slice(0, start)],
    params: { eosThreshold: Number.POSITIVE_INFINITY, lsdSteps: 1 },
    seed: index + 1,
    maxTotalFrames: goldenSteps + 3 * index,
  };
}

/** Text → chunks by this project's planner must give the golden chunk token ids and frames-after-EOS. */
async function chunkPlanCases(fixture: Fixture, prefix: string, text: string, golden: readonly EndToEndChunkSpec[]): Promise<ConformanceCase[]> {
  const name = `${prefix}.text_to_chunks`;
  return orNotRun([name], "tokenizer", async () => {
    const { bundle } = await fixture.pipeline();
    const plan = planTextChunks(text, await loadTokenizer(fixture), bundle.flags);
    return [
      exactCase(
        name,
        "tokenizer",
        plan.map((chunk) => JSON.stringify([chunk.tokenIds, chunk.framesAfterEos])),
        golden.map((chunk) => JSON.stringify([chunk.token_ids, chunk.frames_after_eos])),
      ),
    ];
  });
}

/**
 * Stage outputs of the first `count` latents decoded one per call from a fresh state, each stage's calls
 * concatenated along time per channel ([C, count·T], the fixture's layout).
 */
async function decodeStagesOfFirstLatents(decoder: MimiGpuDecoder, latents: Float32Array, count: number): Promise<Map<string, Float32Array>> {
  const { latentDim } = decoder.config;
  let state = decoder.emptyState();
  const calls: Map<string, { channels: number; values: Float32Array }>[] = [];
  try {
    for (let frame = 0; frame < count; frame++) {
      const result = await decoder.decodeWithStages(state, rows(latents, latentDim, frame, frame + 1));
      state = result.state;
      calls.push(result.stages);
    }
  } finally {
    decoder.release(state);
  }
  const joined = new Map<string, Float32Array>();
  for (const [name, { channels, values: first }] of calls[0]!) {
    const parts = calls.map((stages) => stages.get(name)!.values);
    const length = first.length / channels;
    const out = new Float32Array(first.length * count);
    for (let channel = 0; channel < channels; channel++) {
      parts.forEach((part, call) => out.set(part.subarray(channel * length, (channel + 1) * length), channel * length * count + call * length));
    }
    joined.set(name, out);
  }
  return joined;
}

/** The filled cache rows [0, positions) of every layer, K and V, concatenated. */
function filledCacheRows(state: FlowLmState, stages: PocketStages): Float32Array {
  const pieces: Float32Array[] = [];
  stages.flowLm.manifest.forEach((entry, index) => {
    if (entry.key !== "cache") return;
    // The tensor's own rows: windowed caches hold fewer than the manifest's 1000 (models/pocket/stages/flow-lm.ts).
    const [kv, batch, capacity, heads, headDim] = state.tensors[index]!.dims as [number, number, number, number, number];
    const data = state.tensors[index]!.data as Float32Array;
    const rowValues = heads * headDim;
    for (let plane = 0; plane < kv * batch; plane++) pieces.push(data.subarray(plane * capacity * rowValues, (plane * capacity + state.positions) * rowValues));
  });
  return concatFloat32(pieces);
}
