import { expect, test } from "bun:test";
import { runningPlaces } from "../src/engine/core.ts";
import { engineLoad, ServiceMetrics, type EngineGaugeSource } from "../src/metrics.ts";

test("countStreamEnd counts each streamed response under its delivery mode and outcome", async () => {
  const metrics = new ServiceMetrics();
  metrics.countStreamEnd("websocket", "aborted");
  metrics.countStreamEnd("websocket", "aborted");
  metrics.countStreamEnd("sse", "completed");
  const text = await metrics.render();
  expect(text).toContain('voxedge_streams_total{mode="websocket",outcome="aborted"} 2');
  expect(text).toContain('voxedge_streams_total{mode="sse",outcome="completed"} 1');
  expect(text).not.toContain('outcome="failed"');
});

test("the engine's ticks count model calls per stage beside the rows of each call", async () => {
  const metrics = new ServiceMetrics();
  metrics.engineObserver.tick({ flow_lm: 0.01, decode: 0.005 }, { flow_lm: [4], flow_head: [4, 4], decode: [1, 1, 1] });
  metrics.engineObserver.tick({ flow_lm: 0.01 }, { flow_lm: [2], decode: [] });
  const text = await metrics.render();
  expect(text).toContain('voxedge_engine_model_calls_total{stage="flow_lm"} 2');
  expect(text).toContain('voxedge_engine_model_calls_total{stage="flow_head"} 2');
  expect(text).toContain('voxedge_engine_model_calls_total{stage="decode"} 3');
  // Rows per call is the batch-size sum over the calls: (4 + 2) / 2 FlowLM rows a call.
  expect(text).toContain('voxedge_engine_batch_size_sum{stage="flow_lm"} 6');
});

test("the engine's load is running (paused included) plus waiting over the places it runs at once: --max-streams, or fewer where the capacity estimate says so", async () => {
  const engine = (running: number, waiting: number, maxStreams: number, realtimeStreams?: number, paused = 0): EngineGaugeSource => ({
    counts: { running, waiting, paused },
    stateBytes: 0,
    capacity: realtimeStreams === undefined ? undefined : { streams: realtimeStreams },
    places: runningPlaces(maxStreams, realtimeStreams),
    expectedWaitSeconds: () => (running + paused >= runningPlaces(maxStreams, realtimeStreams) ? 4.5 : 0),
  });
  expect(engineLoad(engine(0, 0, 8))).toBe(0);
  expect(engineLoad(engine(4, 0, 8))).toBe(0.5);
  // A paused stream (its listener behind) still holds its place.
  expect(engineLoad(engine(2, 0, 8, undefined, 2))).toBe(0.5);
  // Queued requests count: a load past 1 is a queue, the signal to add a replica.
  expect(engineLoad(engine(8, 4, 8))).toBe(1.5);
  // The capacity estimate, where it is below --max-streams, is the divisor; above it, --max-streams is.
  expect(engineLoad(engine(3, 3, 8, 4))).toBe(1.5);
  expect(engineLoad(engine(3, 3, 4, 16))).toBe(1.5);
  // An estimate of no streams at all (nothing measured yet) divides by --max-streams, never by 0.
  expect(engineLoad(engine(2, 0, 4, 0))).toBe(0.5);

  const metrics = new ServiceMetrics();
  expect(await metrics.render()).toContain("voxedge_engine_load 0");
  metrics.watchEngine(() => engine(6, 3, 6));
  const exposition = await metrics.render();
  expect(exposition).toContain("voxedge_engine_load 1.5");
  expect(exposition).toContain("voxedge_engine_capacity_streams 6");
  expect(exposition).toContain("voxedge_engine_expected_wait_seconds 4.5");
});
