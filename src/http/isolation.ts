/**
 * Cross-origin isolation for the playground page and everything under /playground/ (its modules and the
 * in-browser engine's worker and wasm). onnxruntime-web runs its wasm on several threads only where
 * SharedArrayBuffer exists, and browsers give it only to crossOriginIsolated pages: a document (and its
 * workers) served with COOP same-origin and COEP require-corp. The price is that such a page loads only
 * same-origin resources or ones that opt in (CORP/CORS); the playground loads nothing else, and the model's
 * files it fetches carry `Cross-Origin-Resource-Policy: same-origin` (model-files.ts).
 *
 * The API routes are left alone: COOP/COEP describe documents, and clients of the API are not documents.
 */
import type { Hono, MiddlewareHandler } from "hono";

export const ISOLATED_PATHS = ["/", "/playground/*"] as const;

const isolate: MiddlewareHandler = async (c, next) => {
  await next();
  c.header("Cross-Origin-Opener-Policy", "same-origin");
  c.header("Cross-Origin-Embedder-Policy", "require-corp");
};

/** Registered before the routes it covers, so it wraps their answers. */
export function registerCrossOriginIsolation(app: Hono): void {
  for (const path of ISOLATED_PATHS) app.use(path, isolate);
}
