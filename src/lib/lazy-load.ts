/**
 * A value loaded on first use and shared by every later caller: the codecs' wasm modules and packages, loaded
 * only when a request first needs one, never at import.
 *
 * Concurrent first callers share one load. Only a success is kept: a load that fails is forgotten, so the
 * next call tries again. A failure is often passing (a file briefly unreadable, memory short during a
 * compile), and a cached rejection would fail that codec on every request until a restart. The callers of
 * the failed load all see its error.
 */
export function lazyLoad<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () => {
    if (loading) return loading;
    let attempt: Promise<T>;
    try {
      attempt = load();
    } catch (error) {
      attempt = Promise.reject(error);
    }
    loading = attempt;
    // Registered before any caller's reaction, so a caller that retries from its catch starts a fresh load.
    attempt.catch(() => {
      if (loading === attempt) loading = undefined;
    });
    return attempt;
  };
}
