/**
 * Polls until `probe` gives a value (anything but undefined or false); the bound only keeps a broken server
 * or worker from hanging the test, it is never what the test measures.
 */
export async function eventually<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, withinMs = 15_000): Promise<T> {
  const giveUpAt = Date.now() + withinMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > giveUpAt) throw new Error(`gave up waiting: ${what}`);
    await Bun.sleep(10);
  }
}
