/** Polls until `probe` gives a value; the bound only keeps a broken server from hanging the test. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, withinMs = 15_000): Promise<T> {
  const giveUpAt = Date.now() + withinMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > giveUpAt) throw new Error(`gave up waiting: ${what}`);
    await Bun.sleep(20);
  }
}
