// Conformance script: drives the agent and streaming API of the official
// @upstash/box 0.5.5 JS SDK against a Box API server (normally boxd, started
// by e2e/conformance/js_test.go) with a custom harness (box-sse-v1).
//
// Usage:
//   BOX_BASE_URL=http://127.0.0.1:PORT BOX_API_KEY=... \
//   BOX_TEST_HARNESS=/path/to/testharness node agent05.mjs
//
// BOX_TEST_HARNESS is the local path of internal/testharness built for the
// box (CGO_ENABLED=0). It answers prompts by their first word (review, json,
// flaky, options, sleep, fail, crash, ...).
//
// Prints one "ok - <name>" line per passed check and exits non-zero on the
// first failure. The SDK is given baseUrl/apiKey explicitly; the
// UPSTASH_BOX_* environment variables are never consulted.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFile, stat } from "node:fs/promises";

import { Box, BoxError } from "@upstash/box";
// 0.5.5 converts responseSchema with zod-to-json-schema 3.x, which only
// understands Zod 3 schemas. The lock file installs zod 4 (the SDK's peer
// dependency), so the Zod 3 API that zod 4 ships as "zod/v3" is what makes
// the SDK send a real json_schema. See the "zod 4 schema" checks below.
import { z } from "zod/v3";
import { z as z4 } from "zod";

const EXPECTED_SDK_VERSION = "0.5.5";
const HARNESS_PATH = "/home/boxuser/bin/testharness";
const MODEL = "custom/demo";

// Telemetry headers must reach the server (it has to accept and ignore them),
// so make sure the opt-out variable cannot suppress them.
delete process.env.UPSTASH_DISABLE_TELEMETRY;

const baseUrl = process.env.BOX_BASE_URL;
const apiKey = process.env.BOX_API_KEY;
const harnessBin = process.env.BOX_TEST_HARNESS;
if (!baseUrl || !apiKey || !harnessBin) {
  console.error("agent05: BOX_BASE_URL, BOX_API_KEY and BOX_TEST_HARNESS must all be set");
  process.exit(2);
}
const conn = { baseUrl, apiKey };

// ------------------------------------------------------------ fetch recorder
// The SDK calls the global fetch at call time, so wrapping it lets the
// script check what 0.5.5 actually puts on the wire without a proxy.
const sent = [];
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init = {}) => {
  const url = typeof input === "string" ? input : input.url;
  let body;
  if (typeof init.body === "string") {
    try {
      body = JSON.parse(init.body);
    } catch {
      body = init.body;
    }
  }
  sent.push({ method: init.method ?? "GET", path: new URL(url).pathname, body });
  return realFetch(input, init);
};

/** Requests recorded while fn runs. */
async function recording(fn) {
  const from = sent.length;
  const value = await fn();
  return { value, requests: sent.slice(from) };
}

function only(requests, method, path) {
  const hits = requests.filter((r) => r.method === method && r.path === path);
  assert.equal(hits.length, 1, `expected exactly one ${method} ${path}, got ${hits.length}`);
  return hits[0];
}

// ------------------------------------------------------------------ helpers
let passed = 0;
let current = "(setup)";

/** Run one named check; print "ok - name" on success, rethrow on failure. */
async function check(name, fn) {
  current = name;
  await fn();
  passed++;
  console.log(`ok - ${name}`);
}

/** Assert that promise rejects with a BoxError; returns the error. */
async function rejectsBoxError(promise, what) {
  let caught;
  await assert.rejects(promise, (err) => {
    assert.ok(
      err instanceof BoxError,
      `${what}: expected a BoxError, got ${err?.name}: ${err?.message}`,
    );
    caught = err;
    return true;
  });
  return caught;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The structured answer of the harness's "review" prompt.
const REVIEW = {
  verdict: "changes_requested",
  findings: [{ severity: "high", file: "main.go", issue: "no tests" }],
};
const REVIEW_TEXT = JSON.stringify(REVIEW);

const reviewSchema = z.object({
  verdict: z.enum(["approved", "changes_requested"]),
  findings: z.array(
    z.object({
      severity: z.enum(["high", "medium", "low"]),
      file: z.string(),
      issue: z.string(),
    }),
  ),
});
const reviewSchemaZod4 = z4.object({
  verdict: z4.enum(["approved", "changes_requested"]),
  findings: z4.array(
    z4.object({
      severity: z4.enum(["high", "medium", "low"]),
      file: z4.string(),
      issue: z4.string(),
    }),
  ),
});
// What zod-to-json-schema makes of reviewSchema, minus $schema.
const REVIEW_JSON_SCHEMA = {
  type: "object",
  properties: {
    verdict: { type: "string", enum: ["approved", "changes_requested"] },
    findings: {
      type: "array",
      items: {
        type: "object",
        properties: {
          severity: { type: "string", enum: ["high", "medium", "low"] },
          file: { type: "string" },
          issue: { type: "string" },
        },
        required: ["severity", "file", "issue"],
        additionalProperties: false,
      },
    },
  },
  required: ["verdict", "findings"],
  additionalProperties: false,
};

const boxes = []; // every box created, for cleanup
let box; // the box under test
const agentRunIds = new Set(); // server run ids of the agent runs

function assertStartRunId(run) {
  assert.equal(typeof run.id, "string");
  // run_start replaces the SDK's local random UUID with the server's run id.
  assert.ok(run.id.length > 0, "run.id is empty");
  agentRunIds.add(run.id);
}

async function main() {
  await check("sdk version is 0.5.5", async () => {
    const url = new URL("./node_modules/@upstash/box/package.json", import.meta.url);
    const pkg = JSON.parse(await readFile(url, "utf8"));
    assert.equal(pkg.version, EXPECTED_SDK_VERSION);
  });

  await check("test harness binary exists", async () => {
    const st = await stat(harnessBin);
    assert.ok(st.isFile(), `${harnessBin} is not a file`);
    assert.ok(st.size > 0, `${harnessBin} is empty`);
  });

  const suffix = `${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`;

  // ----------------------------------------------------------- create
  await check("Box.create with a custom harness", async () => {
    const { value, requests } = await recording(() =>
      Box.create({
        ...conn,
        name: `conf-agent-${suffix}`,
        agent: { harness: "custom", model: MODEL, customHarness: { command: HARNESS_PATH } },
      }),
    );
    box = value;
    boxes.push(box);
    const create = only(requests, "POST", "/v2/box");
    // 0.5.5 sends the harness as `agent`, the model label as `model`, the
    // customHarness object verbatim as `custom_runner`, and no agent_api_key.
    assert.deepEqual(create.body, {
      name: `conf-agent-${suffix}`,
      model: MODEL,
      agent: "custom",
      custom_runner: { command: HARNESS_PATH },
    });
    assert.ok(box instanceof Box);
    // Box.create enables box.agent iff the response echoes `agent`.
    assert.deepEqual(box.modelConfig, {
      harness: "custom",
      provider: "custom",
      runner: "custom",
      model: MODEL,
    });
  });

  await check("Box.create custom harness without model defaults to \"custom\"", async () => {
    const { value, requests } = await recording(() =>
      Box.create({
        ...conn,
        agent: { harness: "custom", customHarness: { command: HARNESS_PATH, args: ["--x", "y"] } },
      }),
    );
    boxes.push(value);
    const create = only(requests, "POST", "/v2/box");
    assert.deepEqual(create.body, {
      model: "custom",
      agent: "custom",
      custom_runner: { command: HARNESS_PATH, args: ["--x", "y"] },
    });
    assert.equal(value.modelConfig.harness, "custom");
    assert.equal(value.modelConfig.model, "custom");
    await value.delete();
    boxes.splice(boxes.indexOf(value), 1);
  });

  await check("Box.create custom harness without customHarness is refused client-side", async () => {
    const { value: err, requests } = await recording(() =>
      rejectsBoxError(Box.create({ ...conn, agent: { harness: "custom", model: MODEL } }), "create"),
    );
    assert.equal(err.message, "agent.customHarness is required when agent.harness is custom");
    assert.equal(requests.length, 0, "nothing must be sent");
  });

  await check("Box.get keeps the agent usable", async () => {
    const got = await Box.get(box.id, conn);
    // Box.get enables box.agent iff the response has `model`.
    assert.equal(got.modelConfig.model, MODEL);
    assert.equal(got.modelConfig.harness, "custom");
  });

  await check("upload the harness and chmod +x", async () => {
    await box.files.upload([{ path: harnessBin, destination: HARNESS_PATH }]);
    const run = await box.exec.command(`chmod +x ${HARNESS_PATH} && test -x ${HARNESS_PATH}`);
    assert.equal(run.exitCode, 0, `chmod failed: ${run.stderr}`);
  });

  // ------------------------------------------------------- agent.run
  await check("agent.run with responseSchema, cost and tool callbacks", async () => {
    const uses = [];
    const results = [];
    const { value: run, requests } = await recording(() =>
      box.agent.run({
        prompt: "review",
        responseSchema: reviewSchema,
        onToolUse: (c) => uses.push(c),
        onToolResult: (r) => results.push(r),
      }),
    );
    const req = only(requests, "POST", `/v2/box/${box.id}/run/stream`);
    assert.deepEqual(req.body, { prompt: "review", json_schema: REVIEW_JSON_SCHEMA });
    assert.equal(run.type, "agent");
    assert.equal(run.status, "completed");
    assertStartRunId(run);
    assert.deepEqual(run.result, REVIEW);
    assert.equal(run.exitCode, null);
    assert.equal(run.cost.inputTokens, 120);
    assert.equal(run.cost.outputTokens, 45);
    assert.equal(run.cost.cachedInputTokens, 7);
    assert.equal(run.cost.totalUsd, 0.0125);
    assert.equal(typeof run.cost.computeMs, "number");
    assert.deepEqual(uses, [{ toolCallId: "call-1", name: "Read", input: { path: "main.go" } }]);
    assert.deepEqual(results, [{ toolCallId: "call-1", output: "package main" }]);
  });

  await check("agent.run without schema returns the final text", async () => {
    const run = await box.agent.run({ prompt: "review" });
    assert.equal(run.status, "completed");
    assertStartRunId(run);
    assert.equal(run.result, REVIEW_TEXT);
  });

  await check("agent.run schema mismatch is rejected by the server", async () => {
    const bad = '{"verdict":"maybe","findings":[]}';
    const { value: err, requests } = await recording(() =>
      rejectsBoxError(
        box.agent.run({ prompt: `json ${bad}`, responseSchema: reviewSchema }),
        "schema mismatch",
      ),
    );
    assert.equal(requests.filter((r) => r.path.endsWith("/run/stream")).length, 1);
    // An `error` SSE event becomes a BoxError without a status code; a
    // client-side zod failure would say "Failed to parse structured output".
    assert.equal(err.statusCode, undefined);
    assert.doesNotMatch(err.message, /^Failed to parse structured output/);
    assert.match(err.message, /verdict/, `error does not name the field: ${err.message}`);
  });

  await check("agent.run maxRetries retries a schema mismatch", async () => {
    const bad = '{"verdict":"maybe","findings":[]}';
    const good = { verdict: "approved", findings: [] };
    const t0 = Date.now();
    const { value: run, requests } = await recording(() =>
      box.agent.run({
        prompt: `flaky ${bad} ${JSON.stringify(good)}`,
        responseSchema: reviewSchema,
        maxRetries: 1,
      }),
    );
    // Each attempt is a new POST .../run/stream, 1 s apart.
    assert.equal(requests.filter((r) => r.path.endsWith("/run/stream")).length, 2);
    assert.ok(Date.now() - t0 >= 1000, "the retry did not wait for the backoff");
    assert.equal(run.status, "completed");
    assertStartRunId(run);
    assert.deepEqual(run.result, good);
  });

  await check("agent.run options are passed through to the custom harness", async () => {
    const options = { maxTurns: 3, effort: "high", nested: { budgetTokens: 100 } };
    const { value: run, requests } = await recording(() =>
      box.agent.run({ prompt: "options", options }),
    );
    const req = only(requests, "POST", `/v2/box/${box.id}/run/stream`);
    // Only a codex box renames option keys; custom gets them verbatim.
    assert.deepEqual(req.body, { prompt: "options", agent_options: options });
    assert.equal(run.status, "completed");
    assertStartRunId(run);
    assert.deepEqual(JSON.parse(run.result), options);
  });

  // zod 4 (what npm installs for the peer dependency) is not understood by
  // zod-to-json-schema 3.x: 0.5.5 sends `json_schema: {}` and validates the
  // output only client-side.
  await check("zod 4 schema: 0.5.5 sends an empty json_schema", async () => {
    const { value: run, requests } = await recording(() =>
      box.agent.run({ prompt: "review", responseSchema: reviewSchemaZod4 }),
    );
    const req = only(requests, "POST", `/v2/box/${box.id}/run/stream`);
    assert.deepEqual(req.body, { prompt: "review", json_schema: {} });
    assert.equal(run.status, "completed");
    assertStartRunId(run);
    assert.deepEqual(run.result, REVIEW);
  });

  await check("zod 4 schema: a mismatch fails client-side", async () => {
    const err = await rejectsBoxError(
      box.agent.run({
        prompt: 'json {"verdict":"maybe","findings":[]}',
        responseSchema: reviewSchemaZod4,
      }),
      "zod 4 mismatch",
    );
    assert.match(err.message, /^Failed to parse structured output: /);
    assert.match(err.message, /Raw output: \{"verdict":"maybe","findings":\[\]\}$/);
  });

  await check("agent.run of a failing harness rejects with its message", async () => {
    const err = await rejectsBoxError(box.agent.run({ prompt: "fail" }), "fail");
    assert.equal(err.message, "the harness failed on purpose");
    assert.equal(err.statusCode, undefined);
  });

  await check("agent.run of a crashing harness rejects", async () => {
    const err = await rejectsBoxError(box.agent.run({ prompt: "crash" }), "crash");
    assert.match(err.message, /3/, `exit status missing: ${err.message}`);
    assert.match(err.message, /something broke/, `stderr missing: ${err.message}`);
  });

  await check("agent.run with an empty prompt is refused client-side", async () => {
    const { value: err, requests } = await recording(() =>
      rejectsBoxError(box.agent.run({ prompt: "" }), "empty prompt"),
    );
    assert.equal(err.message, "prompt is required");
    assert.equal(requests.length, 0);
  });

  // ---------------------------------------------------- agent.stream
  let streamRunId;
  await check("agent.stream yields start, reasoning, tools, text, finish, stats", async () => {
    const uses = [];
    const results = [];
    const { value: stream, requests } = await recording(() =>
      box.agent.stream({
        prompt: "review",
        onToolUse: (c) => uses.push(c),
        onToolResult: (r) => results.push(r),
      }),
    );
    const req = only(requests, "POST", `/v2/box/${box.id}/run/stream`);
    assert.deepEqual(req.body, { prompt: "review" });
    assert.equal(stream.status, "running");
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.deepEqual(
      chunks.map((c) => c.type),
      ["start", "reasoning", "tool-call", "tool-result", "text-delta", "finish", "stats"],
    );
    const [start, reasoning, toolCall, toolResult, text, finish, stats] = chunks;
    assert.equal(typeof start.runId, "string");
    assert.ok(start.runId.length > 0, "start.runId is empty");
    assert.equal(stream.id, start.runId);
    streamRunId = start.runId;
    agentRunIds.add(start.runId);
    assert.deepEqual(reasoning, { type: "reasoning", text: "Looking at the code." });
    assert.deepEqual(toolCall, {
      type: "tool-call",
      toolCallId: "call-1",
      toolName: "Read",
      input: { path: "main.go" },
    });
    assert.deepEqual(toolResult, { type: "tool-result", toolCallId: "call-1", output: "package main" });
    assert.deepEqual(text, { type: "text-delta", text: REVIEW_TEXT });
    assert.deepEqual(finish, {
      type: "finish",
      output: REVIEW_TEXT,
      usage: { inputTokens: 120, outputTokens: 45, cachedInputTokens: 7 },
      sessionId: "sess-custom/demo",
    });
    assert.equal(typeof stats.cpuNs, "number");
    assert.equal(typeof stats.memoryPeakBytes, "number");
    assert.ok(stats.cpuNs > 0, `stats.cpuNs = ${stats.cpuNs}`);
    assert.ok(stats.memoryPeakBytes > 0, `stats.memoryPeakBytes = ${stats.memoryPeakBytes}`);
    assert.deepEqual(uses, [{ toolCallId: "call-1", name: "Read", input: { path: "main.go" } }]);
    assert.deepEqual(results, [{ toolCallId: "call-1", output: "package main" }]);

    assert.equal(stream.status, "completed");
    assert.equal(stream.result, REVIEW_TEXT);
    assert.equal(stream.cost.inputTokens, 120);
    assert.equal(stream.cost.outputTokens, 45);
    assert.equal(stream.cost.cachedInputTokens, 7);
    assert.equal(stream.cost.totalUsd, 0.0125);
  });

  let detachedRunId;
  await check("agent.stream early break detaches", async () => {
    const stream = await box.agent.stream({ prompt: "sleep 2" });
    const chunks = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      if (chunks.length === 2) break;
    }
    assert.deepEqual(
      chunks.map((c) => c.type),
      ["start", "text-delta"],
    );
    assert.equal(chunks[1].text, ".");
    assert.equal(stream.status, "detached");
    assert.equal(stream.result, ".");
    detachedRunId = chunks[0].runId;
    agentRunIds.add(detachedRunId);
  });

  await check("agent.stream of a failing harness throws while iterating", async () => {
    const stream = await box.agent.stream({ prompt: "fail" });
    const types = [];
    const err = await rejectsBoxError(
      (async () => {
        for await (const chunk of stream) types.push(chunk.type);
      })(),
      "stream fail",
    );
    assert.equal(err.message, "the harness failed on purpose");
    assert.deepEqual(types, ["start"]);
    assert.equal(stream.status, "failed");
    agentRunIds.add(stream.id);
  });

  // ----------------------------------------------------- exec streams
  await check("exec.stream yields output chunks and an exit chunk", async () => {
    const { value: stream, requests } = await recording(() =>
      box.exec.stream("for i in 1 2 3; do echo $i; sleep 0.2; done"),
    );
    const req = only(requests, "POST", `/v2/box/${box.id}/exec-stream`);
    assert.deepEqual(req.body, {
      command: ["sh", "-c", "for i in 1 2 3; do echo $i; sleep 0.2; done"],
    });
    assert.equal(stream.type, "command");
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const outputs = chunks.filter((c) => c.type === "output");
    const exits = chunks.filter((c) => c.type === "exit");
    assert.ok(outputs.length >= 2, `want >= 2 output chunks, got ${JSON.stringify(chunks)}`);
    assert.equal(outputs.map((c) => c.data).join(""), "1\n2\n3\n");
    assert.equal(exits.length, 1, `want one exit chunk, got ${JSON.stringify(chunks)}`);
    assert.equal(chunks.at(-1).type, "exit", "exit must be the last chunk");
    assert.equal(exits[0].exitCode, 0);
    assert.equal(typeof exits[0].cpuNs, "number");
    assert.equal(stream.status, "completed");
    assert.equal(stream.exitCode, 0);
    assert.equal(stream.result, "1\n2\n3\n");
  });

  await check("exec.stream failing exit code", async () => {
    const stream = await box.exec.stream("echo out; exit 3");
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.equal(chunks.at(-1).type, "exit");
    assert.equal(chunks.at(-1).exitCode, 3);
    assert.equal(stream.status, "failed");
    assert.equal(stream.exitCode, 3);
    assert.equal(stream.result, "out\n");
  });

  await check("exec.streamCode python", async () => {
    const { value: stream, requests } = await recording(() =>
      box.exec.streamCode({ code: "print(42)", lang: "python" }),
    );
    const req = only(requests, "POST", `/v2/box/${box.id}/code-stream`);
    assert.deepEqual(req.body, { code: "print(42)", language: "python" });
    assert.equal(stream.type, "code");
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const output = chunks
      .filter((c) => c.type === "output")
      .map((c) => c.data)
      .join("");
    assert.equal(output, "42\n");
    assert.equal(chunks.at(-1).type, "exit");
    assert.equal(chunks.at(-1).exitCode, 0);
    assert.equal(stream.status, "completed");
    assert.equal(stream.result, "42\n");
  });

  // ----------------------------------------------------------- runs
  await check("listRuns contains the agent runs", async () => {
    // The detached run goes on server-side; wait for it to be recorded.
    let runs;
    for (let i = 0; i < 50; i++) {
      runs = await box.listRuns();
      const d = runs.find((r) => r.id === detachedRunId);
      if (d && d.status !== "running") break;
      await sleep(200);
    }
    assert.ok(Array.isArray(runs), "listRuns must return an array");
    const byId = new Map(runs.map((r) => [r.id, r]));
    for (const id of agentRunIds) {
      const r = byId.get(id);
      assert.ok(r, `run ${id} missing from listRuns()`);
      assert.equal(r.type, "agent", `type of run ${id}`);
      assert.equal(r.box_id, box.id, `box_id of run ${id}`);
    }
    const streamed = byId.get(streamRunId);
    assert.equal(streamed.status, "completed");
    assert.equal(streamed.prompt, "review");
    assert.equal(streamed.input_tokens, 120);
    assert.equal(streamed.output_tokens, 45);
    assert.equal(streamed.cached_input_tokens, 7);
    assert.equal(streamed.cost_usd, 0.0125);
    const detached = byId.get(detachedRunId);
    // A client that went away is not an error: the run finishes.
    assert.equal(detached.status, "completed", `detached run: ${JSON.stringify(detached)}`);
    const failed = runs.find((r) => r.type === "agent" && r.prompt === "fail");
    assert.ok(failed, "the failed run is missing");
    assert.equal(failed.status, "failed");
    assert.equal(failed.error_message, "the harness failed on purpose");
    // Newest first.
    const created = runs.map((r) => r.created_at);
    assert.deepEqual(created, [...created].sort((a, b) => b - a), "runs are not newest first");
  });

  // --------------------------------------------------------- delete
  await check("box.delete", async () => {
    await box.delete();
    boxes.splice(boxes.indexOf(box), 1);
    await assert.rejects(Box.get(box.id, conn), (err) => err instanceof BoxError && err.statusCode === 404);
  });
}

async function cleanup() {
  for (const b of boxes.splice(0)) {
    await b.delete().catch(() => {});
  }
}

try {
  await main();
  await cleanup();
  console.log(`agent05: all ${passed} checks passed`);
} catch (err) {
  console.log(`not ok - ${current}`);
  console.error(`agent05: FAILED at check "${current}" (${passed} passed before it)`);
  if (err instanceof BoxError) {
    console.error(`  BoxError statusCode=${err.statusCode}: ${err.message}`);
  }
  console.error(err?.stack ?? String(err));
  await cleanup();
  process.exit(1);
}
