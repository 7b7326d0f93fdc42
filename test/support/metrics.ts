/** Reading a server's /metrics (Prometheus text) in tests: one scraper, one way to read a sample. */

/** The /metrics text of a server listening at `url` (a TestServer's url). */
export async function scrapeMetrics(url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`);
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`);
  return response.text();
}

/** The value of one sample, named with its labels exactly as exposed (`name{a="b"}`); 0 when absent. */
export function sampleValue(metrics: string, series: string): number {
  const line = metrics.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

/** The sum of every sample whose line matches `pattern` (e.g. all label sets of one counter with some label). */
export function sumOfSamples(metrics: string, pattern: RegExp): number {
  return metrics
    .split("\n")
    .filter((line) => !line.startsWith("#") && pattern.test(line))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

/** One sample of a server's /metrics now; 0 when absent. */
export async function metricOf(url: string, series: string): Promise<number> {
  return sampleValue(await scrapeMetrics(url), series);
}
