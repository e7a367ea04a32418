// Compiled by .ci/generated-clients with `tsc --strict --noEmit` against lark.ts, the types
// openapi-typescript generates from Lark's OpenAPI document: a registration body and an invocation
// request written with the generated types alone (no escape hatch, no cast), as a strict TypeScript user
// would write them.
import type { components, paths } from "./lark";

type Definition = components["schemas"]["EntrypointDefinition"];
type StartRequest = components["schemas"]["StartRequest"];
type RegisterBody =
  paths["/api/serverless-runtime/v1/entrypoints"]["post"]["requestBody"] extends infer B
    ? B extends { content: { "application/json": infer J } } ? J : never
    : never;
type Invocation = components["schemas"]["Invocation"];

const source = 'def main(ctx, input):\n  return {"greeting": "hello, " + input["name"]}\n';

export const hello: Definition = {
  entrypoint_id:
    "gts.x.core.serverless.entrypoint.v1~x.core.serverless.function.v1~acme.ci.clients.hello.v1~",
  title: "Hello",
  tags: ["ci"],
  schema: {
    params: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
    returns: null,
  },
  traits: {
    invocation: { supported: ["sync", "async"], default: "sync" },
    retry: { max_attempts: 3, initial_delay_ms: 200, backoff_multiplier: 2 },
    limits: { timeout_seconds: 10, memory_mb: 64 },
    caching: { max_age_seconds: 0 },
    rate_limit: null,
  },
  implementation: {
    adapter: "gts.x.core.serverless.adapter.starlark.v1~",
    kind: "code",
    code: { language: "starlark", source },
  },
};

export const order: RegisterBody = {
  entrypoint_id:
    "gts.x.core.serverless.entrypoint.v1~x.core.serverless.workflow.v1~acme.ci.clients.order.v1~",
  title: "Order",
  schema: {},
  traits: {
    invocation: { supported: ["async"], default: "async" },
    retry: { max_attempts: 1 },
    workflow: {
      compensation: { on_failure: null, on_cancel: null },
      checkpointing: { strategy: "automatic" },
      max_suspension_days: 7,
    },
  },
  implementation: {
    adapter: "gts.x.core.serverless.adapter.worker.v1~",
    kind: "adapter_ref",
    adapter_ref: { definition_id: "orders" },
  },
};

export const start: StartRequest = {
  entrypoint_id: hello.entrypoint_id,
  mode: "sync",
  params: { name: "typescript" },
};

// A field the server requires cannot be left out:
// @ts-expect-error traits.retry is required
export const incomplete: Definition = { ...hello, traits: { invocation: hello.traits.invocation } };

export function greeting(inv: Invocation): string | undefined {
  const r: unknown = inv.result;
  if (inv.status === "succeeded" && typeof r === "object" && r !== null && "greeting" in r) {
    const g: unknown = r.greeting;
    return typeof g === "string" ? g : undefined;
  }
  return undefined;
}
