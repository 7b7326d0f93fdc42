/**
 * deploy/kubernetes/, checked the three ways a cluster would check it, short of a cluster (none can run here):
 * - each object against the published Kubernetes, KEDA and Prometheus Operator schemas (kubernetes-models'
 *   validators: types, enums, required fields);
 * - strictly: those validators let unknown fields through (`readinesProbe` would pass), so each object is
 *   also type-checked as an object literal of the models' declared types, where TypeScript refuses any
 *   property the type does not declare, at any depth;
 * - against voxedge itself: the environment variables are options it has, the ports and grace periods agree
 *   with the configuration they set, the probe paths answer, the metrics the autoscalers read are exported.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Deployment } from "kubernetes-models/apps/v1";
import { PersistentVolumeClaim, Service } from "kubernetes-models/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
import { configOptionRows, loadConfig } from "../../src/config.ts";
import { REPO_ROOT } from "../support/repo.ts";
import { scrapeMetrics } from "../support/metrics.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";

const BASE = join(REPO_ROOT, "deploy", "kubernetes");
const NODE_MODULES = join(REPO_ROOT, "node_modules");

/** Each kind the manifests use: its validating model, and the declared type (file, interface) for the strict check. */
const KINDS: Record<string, { model: new (data: never) => { validate(): void }; declaration: string; type: string }> = {
  "apps/v1 Deployment": { model: Deployment, declaration: "kubernetes-models/apps/v1/Deployment.js", type: "IDeployment" },
  "v1 Service": { model: Service, declaration: "kubernetes-models/v1/Service.js", type: "IService" },
  "v1 PersistentVolumeClaim": { model: PersistentVolumeClaim, declaration: "kubernetes-models/v1/PersistentVolumeClaim.js", type: "IPersistentVolumeClaim" },
  "policy/v1 PodDisruptionBudget": { model: PodDisruptionBudget, declaration: "kubernetes-models/policy/v1/PodDisruptionBudget.js", type: "IPodDisruptionBudget" },
  "autoscaling/v2 HorizontalPodAutoscaler": { model: HorizontalPodAutoscaler, declaration: "kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler.js", type: "IHorizontalPodAutoscaler" },
  "keda.sh/v1alpha1 ScaledObject": { model: ScaledObject, declaration: "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject.js", type: "IScaledObject" },
  "monitoring.coreos.com/v1 ServiceMonitor": { model: ServiceMonitor, declaration: "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor.js", type: "IServiceMonitor" },
};

interface Manifest {
  file: string;
  object: { apiVersion: string; kind: string; metadata: { name: string }; spec: any };
}

interface Kustomization {
  resources: string[];
  patches?: Array<{ target: { group?: string; kind: string; name: string }; patch: string }>;
}

/** The one object a YAML file holds (each file here holds one). */
function readYaml(file: string): unknown {
  const parsed: unknown = Bun.YAML.parse(readFileSync(file, "utf8"));
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error(`${file} holds no single object`);
  return parsed;
}

/** The objects a kustomization's resources hold, their folders' resources included (what `kubectl apply -k` reads). */
function kustomizationObjects(folder: string): Manifest[] {
  const kustomization = readYaml(join(folder, "kustomization.yaml")) as Kustomization;
  return kustomization.resources.flatMap((resource) => {
    const path = join(folder, resource);
    if (existsSync(join(path, "kustomization.yaml"))) return kustomizationObjects(path);
    return [{ file: path, object: readYaml(path) as Manifest["object"] }];
  });
}

const kindOf = (manifest: Manifest) => `${manifest.object.apiVersion} ${manifest.object.kind}`;

/** tsc over the manifests written as object literals of their declared types: its exit code and what it said. */
function typeCheck(manifests: Manifest[]): { status: number; output: string } {
  const folder = mkdtempSync(join(tmpdir(), "voxedge-k8s-types-"));
  try {
    const imports = [...new Set(manifests.map(kindOf))].map((kind) => `import type { ${KINDS[kind]!.type} } from ${JSON.stringify(join(NODE_MODULES, KINDS[kind]!.declaration))};`);
    const literals = manifests.map((manifest, index) => `// ${manifest.file}\nexport const object${index}: ${KINDS[kindOf(manifest)]!.type} = ${JSON.stringify(manifest.object, null, 2)};`);
    const file = join(folder, "manifests.ts");
    writeFileSync(file, [...imports, ...literals].join("\n"));
    const run = spawnSync(join(NODE_MODULES, ".bin", "tsc"), ["--ignoreConfig", "--noEmit", "--strict", "--skipLibCheck", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", file], { encoding: "utf8" });
    if (run.error) throw new Error(`tsc could not run (npm ci installs it): ${run.error.message}`);
    return { status: run.status ?? 1, output: `${run.stdout}${run.stderr}` };
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

const base = kustomizationObjects(BASE);
const withHpa = kustomizationObjects(join(BASE, "hpa"));
const everyObject = [...base, ...withHpa.filter((manifest) => dirname(manifest.file).endsWith("hpa"))];
/** The one object of `kind`; also read while the tests are collected, so it throws rather than expects. */
function only(kind: string, from: Manifest[] = base): Manifest["object"] {
  const found = from.filter((manifest) => manifest.object.kind === kind);
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`);
  return found[0]!.object;
}

describe("deploy/kubernetes against the published schemas", () => {
  test("every YAML file in the folder is a resource of a kustomization, and every resource a file", () => {
    const files = (folder: string): string[] => readdirSync(folder, { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? files(join(folder, entry.name)) : entry.name.endsWith(".yaml") && entry.name !== "kustomization.yaml" ? [join(folder, entry.name)] : []));
    expect([...new Set(everyObject.map((manifest) => manifest.file))].sort()).toEqual(files(BASE).sort());
    expect(base.map(kindOf).sort()).toEqual(["apps/v1 Deployment", "keda.sh/v1alpha1 ScaledObject", "monitoring.coreos.com/v1 ServiceMonitor", "policy/v1 PodDisruptionBudget", "v1 Service"]);
  });

  test("each object passes its kind's schema; a type error does not", () => {
    for (const manifest of everyObject) {
      const kind = KINDS[kindOf(manifest)];
      expect(kind, `${manifest.file}: ${kindOf(manifest)}`).toBeDefined();
      expect(() => new kind!.model(manifest.object as never).validate()).not.toThrow();
    }
    const broken = structuredClone(only("Deployment"));
    broken.spec.template.spec.containers[0].readinessProbe.periodSeconds = "2";
    expect(() => new Deployment(broken).validate()).toThrow(/periodSeconds/);
  });

  test("strictly: no field the types do not declare, at any depth; a misspelt one fails with its name", () => {
    const checked = typeCheck(everyObject);
    expect(checked.output).toBe("");
    expect(checked.status).toBe(0);

    const deployment = structuredClone(base.find((manifest) => manifest.object.kind === "Deployment")!);
    const container = deployment.object.spec.template.spec.containers[0];
    container.readinesProbe = container.readinessProbe;
    delete container.readinessProbe;
    const scaledObject = structuredClone(base.find((manifest) => manifest.object.kind === "ScaledObject")!);
    scaledObject.object.spec.minReplicaCont = scaledObject.object.spec.minReplicaCount;
    const misspelt = typeCheck([deployment, scaledObject]);
    expect(misspelt.status).not.toBe(0);
    expect(misspelt.output).toMatch(/readinesProbe\W+ does not exist in type 'IContainer'/);
    expect(misspelt.output).toMatch(/minReplicaCont\W+ does not exist in type 'IScaledObjectSpec'/);
  });
});

describe("deploy/kubernetes against voxedge", () => {
  const deployment = only("Deployment");
  const pod = deployment.spec.template.spec;
  const container = pod.containers.find((candidate: { name: string }) => candidate.name === "voxedge");
  const environment: Record<string, string> = Object.fromEntries(container.env.map((variable: { name: string; value: string }) => [variable.name, variable.value]));
  const config = loadConfig({}, environment);
  const containerPort = (name: string): number => container.ports.find((port: { name: string }) => port.name === name).containerPort;

  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(new ToneModel());
  });
  afterAll(() => server?.stop());

  test("every environment variable is an option voxedge reads, and they parse", () => {
    const known = new Set(configOptionRows().map((row) => row.env));
    for (const each of [container, ...pod.initContainers]) {
      for (const variable of each.env) expect(known.has(variable.name), variable.name).toBe(true);
    }
    expect(config.port).toBe(8000);
  });

  test("the ports the server listens on are the container's, and the Service's and ServiceMonitor's name them", () => {
    expect(containerPort("http")).toBe(config.port);
    expect(containerPort("wyoming")).toBe(config.wyomingPort!);
    const service = only("Service");
    for (const port of service.spec.ports) expect(containerPort(port.targetPort)).toBe(port.port);
    const monitor = only("ServiceMonitor");
    expect(service.spec.ports.map((port: { name: string }) => port.name)).toContain(monitor.spec.endpoints[0].port);
    expect(monitor.spec.endpoints[0].path).toBe("/metrics");
  });

  test("the Service, the PDB and the ServiceMonitor select the pods; the autoscalers scale the Deployment", () => {
    const labels = deployment.spec.template.metadata.labels;
    expect(labels).toMatchObject(deployment.spec.selector.matchLabels);
    expect(labels).toMatchObject(only("Service").spec.selector);
    expect(labels).toMatchObject(only("PodDisruptionBudget").spec.selector.matchLabels);
    expect(labels).toMatchObject(only("ServiceMonitor").spec.selector.matchLabels);
    expect(only("ScaledObject").spec.scaleTargetRef.name).toBe(deployment.metadata.name);
    expect(only("HorizontalPodAutoscaler", withHpa).spec.scaleTargetRef).toEqual({ apiVersion: "apps/v1", kind: "Deployment", name: deployment.metadata.name });
    // The HPA variant is the base without KEDA: two autoscalers on one Deployment would fight.
    expect(withHpa.map(kindOf).filter((kind) => kind.endsWith("ScaledObject"))).toHaveLength(1);
    const kustomization = readYaml(join(BASE, "hpa", "kustomization.yaml")) as Kustomization;
    expect(kustomization.patches).toEqual([expect.objectContaining({ target: expect.objectContaining({ kind: "ScaledObject", name: only("ScaledObject").metadata.name }), patch: expect.stringContaining("$patch: delete") })]);
  });

  test("the grace period outlasts the preStop sleep and --shutdown-grace together", () => {
    const [command, seconds] = container.lifecycle.preStop.exec.command as string[];
    expect(command).toBe("sleep");
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(Number(seconds) + config.shutdownGraceSeconds);
  });

  test("the probes ask paths that answer, on the container's HTTP port", async () => {
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      expect(probe.httpGet.port).toBe("http");
      expect((await fetch(`${server.url}${probe.httpGet.path}`)).status).toBe(200);
    }
    expect(container.readinessProbe.httpGet.path).toBe("/health/ready");
  });

  test("the model is pulled into the folder the server reads, the graph cache is a volume, voices are in a bucket, the pod runs as non-root in 1 GiB", () => {
    const pull = pod.initContainers.find((candidate: { name: string }) => candidate.name === "pull-model");
    expect(pull.command.slice(-2)).toEqual(["models", "pull"]);
    const mountOf = (each: { volumeMounts: Array<{ name: string; mountPath: string }> }, name: string) => each.volumeMounts.find((mount) => mount.name === name)!.mountPath;
    expect(mountOf(pull, "models")).toBe(pull.env.find((variable: { name: string }) => variable.name === "VOXEDGE_MODEL_CACHE_DIR").value);
    expect(mountOf(container, "models")).toBe(config.modelCacheDir);
    expect(mountOf(container, "graph-cache")).toBe(config.graphCacheDir);
    // Voices in a bucket, not on a volume: most clusters have no ReadWriteMany class.
    expect(config.voiceStore).toMatch(/^s3:\/\/[a-z0-9.-]+\/\S+$/);
    expect(container.envFrom).toEqual([{ secretRef: { name: "voxedge-s3" } }]);
    expect(container.volumeMounts.map((mount: { name: string }) => mount.name).sort()).toEqual(["graph-cache", "models"]);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(container.resources.limits.memory).toBe("1Gi");
  });

  test("the metrics both autoscalers read are ones the server exports: the load, and KEDA the refusals too", async () => {
    const exported = await scrapeMetrics(server.url);
    const queries: string[] = only("ScaledObject").spec.triggers.map((trigger: { metadata: { query: string } }) => trigger.metadata.query);
    const named = queries.flatMap((query) => [...query.matchAll(/voxedge_[a-z_]+/g)].map((match) => match[0]));
    named.push(only("HorizontalPodAutoscaler", withHpa).spec.metrics[0].pods.metric.name);
    expect(named).toEqual(["voxedge_engine_load", "voxedge_engine_rejections_total", "voxedge_engine_load"]);
    for (const name of named) expect(exported).toMatch(new RegExp(`^${name} `, "m"));
  });
});
