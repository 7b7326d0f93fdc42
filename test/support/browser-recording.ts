/** Test fixtures shaped like what browsers upload. */

/**
 * Re-muxes Ogg Opus packets into WebM with mediabunny in append-only mode: written front to back with
 * unknown-size Segment and Clusters, as MediaRecorder does. (Encoding with mediabunny would need WebCodecs.)
 */
export async function muxWebmLikeABrowser(oggOpus: Uint8Array): Promise<Uint8Array> {
  const { BufferSource, BufferTarget, EncodedAudioPacketSource, EncodedPacketSink, Input, OGG, Output, WebMOutputFormat } = await import("mediabunny");
  const input = new Input({ source: new BufferSource(oggOpus), formats: [OGG] });
  const track = await input.getPrimaryAudioTrack();
  const decoderConfig = await track?.getDecoderConfig();
  if (!track || !decoderConfig) throw new Error("the Ogg Opus fixture has no audio track");
  const output = new Output({ format: new WebMOutputFormat({ appendOnly: true }), target: new BufferTarget() });
  const source = new EncodedAudioPacketSource("opus");
  output.addAudioTrack(source);
  await output.start();
  let isFirstPacket = true;
  for await (const packet of new EncodedPacketSink(track).packets()) {
    await source.add(packet, isFirstPacket ? { decoderConfig } : undefined);
    isFirstPacket = false;
  }
  await output.finalize();
  input.dispose();
  return new Uint8Array(output.target.buffer!);
}
