import { join } from "node:path";

/** The repository's root folder, wherever the test that asks lives. */
export const REPO_ROOT = join(import.meta.dir, "..", "..");
