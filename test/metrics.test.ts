import { expect, test } from "bun:test";
import { ServiceMetrics } from "../src/metrics.ts";

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
