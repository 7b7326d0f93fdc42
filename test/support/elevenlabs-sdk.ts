/** For tests through ElevenLabs' official SDK. */
import { ElevenLabsError } from "@elevenlabs/elevenlabs-js";

/** The SDK's error for a call expected to fail: its status and the body the server answered. */
export async function refusal(call: () => Promise<unknown>): Promise<{ statusCode: number | undefined; body: any }> {
  try {
    await call();
  } catch (error) {
    if (error instanceof ElevenLabsError) return { statusCode: error.statusCode, body: error.body };
    throw error;
  }
  throw new Error("the call succeeded");
}
