/**
 * What every route's OpenAPI description shares: the error body and its responses, the security
 * requirements, and the media helpers. Each route module describes its own routes with these, beside its
 * handlers (a `describe…Routes(registry)` function); openapi.ts assembles the document from those.
 */
import type { OpenAPIRegistry, RouteConfig } from "@asteasolutions/zod-to-openapi";
import { z } from "zod";

/** Adds a module's routes to the document. */
export type DescribeRoutes = (registry: OpenAPIRegistry) => void;

export const errorSchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.number().int() }),
});

export const ERROR_DESCRIPTIONS: Readonly<Record<number, string>> = {
  400: "a caller mistake, naming the field in `param`",
  401: "missing or wrong API key",
  404: "unknown model or voice",
  416: "the Range starts past the end of the file (`Content-Range: bytes */<size>`)",
  408: "the body did not arrive within --body-timeout",
  413: "the body is larger than --max-body-bytes",
  415: "wrong Content-Type",
  429: "the engine is full; retry after `Retry-After` seconds",
  500: "server fault (no internals)",
  503: "the model is loading or failed, or the server is shutting down",
  507: "the speaker folder could not take the change (store or delete the voice)",
};

/** The error responses of the given statuses, each in OpenAI's error shape. */
export const errorResponses = (...statuses: number[]): RouteConfig["responses"] =>
  Object.fromEntries(statuses.map((status) => [status, { description: ERROR_DESCRIPTIONS[status] ?? "error", ...json(errorSchema) }]));

export const json = (schema: z.ZodType) => ({ content: { "application/json": { schema } } });
export const binary = { type: "string", format: "binary" } as const;

/** A media type's schema written as JSON Schema, for what zod cannot express (a multipart form's file parts). */
export type MediaSchema = Extract<NonNullable<NonNullable<RouteConfig["request"]>["body"]>["content"][string], { schema?: unknown }>["schema"];

export type SecurityRequirement = Record<string, string[]>;
export const bearer: SecurityRequirement[] = [{ bearerAuth: [] }, { apiKeyHeader: [] }];
/** Open unless the operator protects them (--protect-health, --protect-metrics, no --public-listings); the key is accepted as elsewhere. */
export const openByDefault: SecurityRequirement[] = [{}, ...bearer];
/** Pages and their code, and this document: never behind a key. */
export const open: SecurityRequirement[] = [{}];
