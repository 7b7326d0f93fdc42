// alawmulaw's package entry is a UMD bundle for Node ("main") and an ESM index for bundlers ("module"); Deno
// takes the bundle, whose exports it cannot see by name, so src/audio/g711.ts imports the two ESM modules
// the index re-exports, which Bun and Deno both load. The package's own types cover only its entry.
declare module "alawmulaw/lib/mulaw.js" {
  export function encode(samples: Int16Array): Uint8Array;
}
declare module "alawmulaw/lib/alaw.js" {
  export function encode(samples: Int16Array): Uint8Array;
}
