/**
 * The Pocket TTS pipeline: its stages (stages/, one file each) over onnxruntime sessions of either CPU provider (onnx/runtime.ts), docs/pocket-tts.md
 * §2, §3.1:
 *
 *   token ids ─ TextConditioner ─▶ text conditioning [1, n, D]
 *   24 kHz audio ─ VoiceEncoder ─▶ voice conditioning [1, T(+1), D] ─ FlowLm.prefill ─▶ voice state
 *   FlowLm.step (state, latent | BOS) ─▶ c [D], EOS logit ─ FlowHead.sample (LSD) ─▶ latent [32]
 *   MimiDecoder (state, latents [1, n, 32]) ─▶ 1920·n samples
 *
 * D is the FlowLM width (1024 released). Stage objects hold only their session and constants, so one set
 * serves every request. Model states (`FlowLmState`, `MimiState`) are values owned by the request: each
 * call returns a new state and leaves its input as it was, so a cached voice state is reused by every
 * chunk without a copy; the one exception is a FlowLM call told `reuseState` by a caller that drops its
 * input state (the generation loop), which then updates the KV caches in place (cache-writes.ts). Tensors are
 * built with the session's own `Tensor` class, never a statically imported one (see onnx/runtime.ts).
 */
import type { PocketBundle } from "./bundle/pocket-bundle.ts";
import type { PocketSessions } from "./sessions.ts";
import type { FlowLmState } from "./stages/state.ts";
import { TextConditioner } from "./stages/text-conditioner.ts";
import { VoiceEncoder } from "./stages/voice-encoder.ts";
import { FlowLm } from "./stages/flow-lm.ts";
import { FlowHead } from "./stages/flow-head.ts";
import { MimiDecoder } from "./stages/mimi-decoder.ts";
import { createFlowLmSlots, type FlowLmSlots } from "./stages/flow-lm-slots.ts";


/** All stages of a bundle, built from its sessions. */
export interface PocketStages {
  textConditioner: TextConditioner;
  voiceEncoder: VoiceEncoder | null;
  flowLm: FlowLm;
  /** FlowLM's AR steps for many streams in one call, or null (with why) where the batched step is not usable. */
  flowLmSlots: FlowLmSlots | null;
  flowLmSlotsUnavailable?: string;
  flowHead: FlowHead;
  mimiDecoder: MimiDecoder;
}

export async function createPocketStages(bundle: PocketBundle, sessions: PocketSessions): Promise<PocketStages> {
  const { latentDim, conditioningDim, samplesPerFrame, flowLmCachePositions } = bundle.dims;
  const flowLm = await FlowLm.create(sessions.flowLmMain, bundle.flowLmStateManifest, { latentDim, conditioningDim, cachePositions: flowLmCachePositions }, sessions.flowLmCacheWrites, sessions.flowLmWindowedInputs);
  const slots = await createFlowLmSlots(sessions.flowLmBatched, flowLm);
  return {
    textConditioner: new TextConditioner(sessions.textConditioner, conditioningDim),
    voiceEncoder: sessions.voiceEncoder ? await VoiceEncoder.create(sessions.voiceEncoder, { samplesPerFrame, conditioningDim, bosBeforeVoice: bundle.bosBeforeVoice }) : null,
    flowLm,
    flowLmSlots: slots.slots,
    ...(slots.slots ? {} : { flowLmSlotsUnavailable: slots.reason }),
    flowHead: await FlowHead.create(sessions.flowLmFlow, { latentDim, conditioningDim }, sessions.flowLmFlowRows),
    // Opened with the others; only a model with decoder workers releases it, after this.
    mimiDecoder: new MimiDecoder(sessions.mimiDecoder!, sessions.mimiDecoderStates, { latentDim, samplesPerFrame }),
  };
}

/** The voice state for cloning (§2.1 steps 2–6): encode, then prefill an empty FlowLM cache with it. */
export async function voiceStateFromAudio(stages: PocketStages, samples24kHz: Float32Array): Promise<FlowLmState> {
  if (!stages.voiceEncoder) throw new Error("this bundle has no mimi_encoder.onnx, so it cannot clone voices");
  const conditioning = await stages.voiceEncoder.encode(samples24kHz);
  return stages.flowLm.prefill(stages.flowLm.emptyState(), conditioning);
}
