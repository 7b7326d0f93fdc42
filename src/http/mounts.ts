/**
 * Where each protocol's API is mounted on the server: the shared framing (API keys, the root's error shapes)
 * and the protocols' own apps agree on these paths.
 */

/** What the served API's base URL adds to ElevenLabs' paths (`http://host:port/elevenlabs/v1/voices`). */
export const ELEVENLABS_PREFIX = "/elevenlabs";
