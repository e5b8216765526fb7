// Conformance script: drives the official @upstash/box 0.5.5 JS SDK against a
// Box API server (normally boxd, started by e2e/conformance/js_test.go).
//
// Usage:
//   BOX_BASE_URL=http://127.0.0.1:PORT BOX_API_KEY=... node box05.mjs
//
// Prints one "ok - <name>" line per passed check and exits non-zero on the
// first failure. The SDK is given baseUrl/apiKey explicitly; the
// UPSTASH_BOX_* environment variables are never consulted.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Box, BoxError } from "@upstash/box";

const EXPECTED_SDK_VERSION = "0.5.5";
const HOME = "/workspace/home";

// Telemetry headers must reach the server (it has to accept and ignore them),
// so make sure the opt-out variable cannot suppress them. The SDK reads the
// environment at call time, so deleting it here is sufficient.
delete process.env.UPSTASH_DISABLE_TELEMETRY;

const baseUrl = process.env.BOX_BASE_URL;
const apiKey = process.env.BOX_API_KEY;
if (!baseUrl || !apiKey) {
  console.error("box05: BOX_BASE_URL and BOX_API_KEY must both be set");
  process.exit(2);
}
const conn = { baseUrl, apiKey };

let passed = 0;
let current = "(setup)";

/** Run one named check; print "ok - name" on success, rethrow on failure. */
async function check(name, fn) {
  current = name;
  await fn();
  passed++;
  console.log(`ok - ${name}`);
}

/** Assert that promise rejects with a BoxError carrying the given statusCode. */
async function rejectsWithStatus(promise, status, what) {
  await assert.rejects(promise, (err) => {
    assert.ok(
      err instanceof BoxError,
      `${what}: expected a BoxError, got ${err?.name}: ${err?.message}`,
    );
    assert.equal(err.name, "BoxError");
    assert.equal(
      err.statusCode,
      status,
      `${what}: expected statusCode ${status}, got ${err.statusCode} (${err.message})`,
    );
    assert.equal(typeof err.message, "string");
    assert.ok(err.message.length > 0, `${what}: empty error message`);
    return true;
  });
}

function assertFileEntry(entry, { name, path, isDir, size }) {
  assert.ok(entry, `no entry named ${name}`);
  assert.equal(entry.name, name, "entry.name");
  assert.equal(entry.path, path, `entry.path of ${name}`);
  assert.equal(typeof entry.size, "number", `entry.size of ${name} must be a number`);
  if (size !== undefined) assert.equal(entry.size, size, `entry.size of ${name}`);
  assert.equal(entry.is_dir, isDir, `entry.is_dir of ${name}`);
  assert.equal(typeof entry.mod_time, "string", `entry.mod_time of ${name} must be a string`);
  assert.ok(entry.mod_time.length > 0, `entry.mod_time of ${name} is empty`);
  assert.ok(
    !Number.isNaN(Date.parse(entry.mod_time)),
    `entry.mod_time of ${name} is not a parseable timestamp: ${entry.mod_time}`,
  );
}

function byName(entries, name) {
  return entries.find((e) => e.name === name);
}

const allBytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

let box; // the box under test
let deleted = false;
const startDir = process.cwd();
const tempDirs = [];

async function main() {
  await check("sdk version is 0.5.5", async () => {
    // "./package.json" is not in the package's exports map; read it directly.
    const url = new URL("./node_modules/@upstash/box/package.json", import.meta.url);
    const pkg = JSON.parse(await readFile(url, "utf8"));
    assert.equal(pkg.version, EXPECTED_SDK_VERSION);
  });

  // ---------------------------------------------------------------- boxes
  const suffix = `${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`;
  const name = `conf-js-${suffix}`;
  const label = `conf:${suffix}`;

  await check("Box.create without agent", async () => {
    box = await Box.create({ ...conn, name, labels: ["conformance", label] });
    assert.ok(box instanceof Box);
    assert.equal(typeof box.id, "string");
    assert.ok(box.id.length > 0, "box.id is empty");
    assert.equal(box.cwd, HOME);
  });

  await check("box.getStatus is ready", async () => {
    const st = await box.getStatus();
    assert.equal(typeof st.status, "string");
    assert.notEqual(st.status, "creating");
    assert.notEqual(st.status, "error");
    assert.notEqual(st.status, "deleted");
  });

  await check("Box.get(id) returns the same box", async () => {
    const got = await Box.get(box.id, conn);
    assert.equal(got.id, box.id);
  });

  await check("Box.getByName(name) returns the same box", async () => {
    const got = await Box.getByName(name, conn);
    assert.equal(got.id, box.id);
  });

  await check("Box.list contains the box", async () => {
    const all = await Box.list(conn);
    assert.ok(Array.isArray(all), "Box.list must return an array");
    const mine = all.find((b) => b.id === box.id);
    assert.ok(mine, `box ${box.id} missing from Box.list()`);
    assert.equal(mine.name, name);
    assert.notEqual(mine.status, "creating");
    assert.ok(Array.isArray(mine.labels), "labels must be an array");
    assert.ok(mine.labels.includes("conformance"), "label conformance missing");
    assert.ok(mine.labels.includes(label), `label ${label} missing`);
  });

  await check("Box.list({label}) filters by label", async () => {
    const filtered = await Box.list({ ...conn, label });
    assert.ok(Array.isArray(filtered));
    assert.deepEqual(
      filtered.map((b) => b.id),
      [box.id],
    );
  });

  // ----------------------------------------------------------------- exec
  await check("exec.command stdout/stderr", async () => {
    const run = await box.exec.command("echo hello && echo err 1>&2");
    assert.equal(run.type, "command");
    assert.equal(run.status, "completed");
    assert.equal(run.exitCode, 0);
    // 0.5.5 passes the server's output through untouched (no trimming).
    assert.equal(run.stdout, "hello\n");
    assert.equal(run.result, "hello\n");
    assert.match(run.stderr, /err/);
    assert.doesNotMatch(run.stdout, /err/, "stderr leaked into stdout");
  });

  await check("exec.command failing exit code", async () => {
    const run = await box.exec.command("exit 3");
    assert.equal(run.status, "failed");
    assert.equal(run.exitCode, 3);
  });

  await check("exec.command failure result is stderr", async () => {
    const run = await box.exec.command("echo out; echo boom 1>&2; exit 1");
    assert.equal(run.status, "failed");
    assert.equal(run.exitCode, 1);
    assert.equal(run.stdout, "out\n");
    assert.match(run.stderr, /boom/);
    assert.match(run.result, /boom/);
  });

  await check("exec.code python", async () => {
    const run = await box.exec.code({ code: "print(1+1)", lang: "python" });
    assert.equal(run.type, "code");
    assert.equal(run.status, "completed", `stderr: ${run.stderr}`);
    assert.equal(run.exitCode, 0);
    assert.equal(run.result, "2\n");
  });

  await check("exec.code js", async () => {
    const run = await box.exec.code({ code: "console.log(6*7)", lang: "js" });
    assert.equal(run.status, "completed", `stderr: ${run.stderr}`);
    assert.equal(run.exitCode, 0);
    assert.equal(run.result, "42\n");
  });

  await check("exec.code ts", async () => {
    const run = await box.exec.code({
      code: "const x: number = 5;\nconsole.log(x * 2);",
      lang: "ts",
    });
    assert.equal(run.status, "completed", `stderr: ${run.stderr}`);
    assert.equal(run.exitCode, 0);
    assert.equal(run.result, "10\n");
  });

  await check("exec.code failure", async () => {
    const run = await box.exec.code({ code: "import sys\nsys.exit(4)", lang: "python" });
    assert.equal(run.status, "failed");
    assert.equal(run.exitCode, 4);
  });

  // ------------------------------------------------------------------- cd
  await check("cd into a missing dir fails", async () => {
    await assert.rejects(box.cd("sub"), (err) => {
      assert.ok(err instanceof BoxError, `expected BoxError, got ${err}`);
      assert.equal(err.message, "cd: sub: No such file or directory");
      return true;
    });
    assert.equal(box.cwd, HOME);
  });

  await check("cd into an existing dir", async () => {
    const mk = await box.exec.command("mkdir -p sub/deeper");
    assert.equal(mk.exitCode, 0, `mkdir failed: ${mk.stderr}`);
    await box.cd("sub");
    assert.equal(box.cwd, `${HOME}/sub`);
  });

  await check("exec.command runs in the relative cwd", async () => {
    const run = await box.exec.command("pwd");
    assert.equal(run.exitCode, 0);
    assert.equal(run.stdout, `${HOME}/sub\n`);
  });

  await check("exec.code runs in the relative cwd", async () => {
    const run = await box.exec.code({ code: "import os\nprint(os.getcwd())", lang: "python" });
    assert.equal(run.exitCode, 0, `stderr: ${run.stderr}`);
    assert.equal(run.stdout, `${HOME}/sub\n`);
  });

  await check("files.list() without path lists the cwd", async () => {
    const entries = await box.files.list();
    assertFileEntry(byName(entries, "deeper"), {
      name: "deeper",
      path: `${HOME}/sub/deeper`,
      isDir: true,
    });
  });

  await check("cd .. goes back", async () => {
    await box.cd("..");
    assert.equal(box.cwd, HOME);
    const run = await box.exec.command("pwd");
    assert.equal(run.stdout, `${HOME}\n`);
  });

  await check("cd to an absolute dir outside the workspace", async () => {
    await box.cd("/tmp");
    assert.equal(box.cwd, "/tmp");
    const run = await box.exec.command("pwd");
    assert.equal(run.exitCode, 0);
    assert.equal(run.stdout, "/tmp\n");
  });

  await check("cd back to /workspace/home", async () => {
    await box.cd(HOME);
    assert.equal(box.cwd, HOME);
    const run = await box.exec.command("pwd");
    assert.equal(run.stdout, `${HOME}\n`);
  });

  // ---------------------------------------------------------------- files
  await check("files.write + files.read text", async () => {
    await box.files.write({ path: "hello.txt", content: "hi there" });
    assert.equal(await box.files.read("hello.txt"), "hi there");
    assert.equal(await box.files.read(`${HOME}/hello.txt`), "hi there");
  });

  await check("files.write + files.read utf-8", async () => {
    const text = "grüße, 世界 ✓\nline two\n";
    await box.files.write({ path: "sub/utf8.txt", content: text });
    assert.equal(await box.files.read("sub/utf8.txt"), text);
    const run = await box.exec.command("cat sub/utf8.txt");
    assert.equal(run.stdout, text);
  });

  await check("files.write + files.read base64 (all byte values)", async () => {
    await box.files.write({
      path: "bytes.bin",
      content: allBytes.toString("base64"),
      encoding: "base64",
    });
    const b64 = await box.files.read("bytes.bin", { encoding: "base64" });
    assert.equal(typeof b64, "string");
    assert.ok(Buffer.from(b64, "base64").equals(allBytes), "binary round trip differs");
    const run = await box.exec.command("wc -c < bytes.bin");
    assert.equal(run.stdout.trim(), "256");
  });

  await check("files.list() at the workspace root", async () => {
    const entries = await box.files.list();
    assert.ok(Array.isArray(entries));
    assertFileEntry(byName(entries, "hello.txt"), {
      name: "hello.txt",
      path: `${HOME}/hello.txt`,
      isDir: false,
      size: 8,
    });
    assertFileEntry(byName(entries, "bytes.bin"), {
      name: "bytes.bin",
      path: `${HOME}/bytes.bin`,
      isDir: false,
      size: 256,
    });
    assertFileEntry(byName(entries, "sub"), { name: "sub", path: `${HOME}/sub`, isDir: true });
  });

  await check("files.list(/workspace/home)", async () => {
    const entries = await box.files.list(HOME);
    assertFileEntry(byName(entries, "hello.txt"), {
      name: "hello.txt",
      path: `${HOME}/hello.txt`,
      isDir: false,
      size: 8,
    });
    assertFileEntry(byName(entries, "sub"), { name: "sub", path: `${HOME}/sub`, isDir: true });
  });

  await check("files.list of a relative subdir", async () => {
    const entries = await box.files.list("sub");
    assertFileEntry(byName(entries, "utf8.txt"), {
      name: "utf8.txt",
      path: `${HOME}/sub/utf8.txt`,
      isDir: false,
      size: Buffer.byteLength("grüße, 世界 ✓\nline two\n"),
    });
    assertFileEntry(byName(entries, "deeper"), {
      name: "deeper",
      path: `${HOME}/sub/deeper`,
      isDir: true,
    });
  });

  await check("files.read of a missing file is a BoxError", async () => {
    await assert.rejects(box.files.read("does-not-exist.txt"), (err) => {
      assert.ok(err instanceof BoxError, `expected BoxError, got ${err}`);
      assert.equal(typeof err.statusCode, "number");
      assert.ok(err.statusCode >= 400 && err.statusCode < 500, `status ${err.statusCode}`);
      return true;
    });
  });

  // --------------------------------------------------- upload / download
  const localA = "alpha\nbeta\n";
  const localB = Buffer.concat([allBytes, randomBytes(4096), allBytes]);

  await check("files.upload creates parent dirs", async () => {
    const src = await mkdtemp(join(tmpdir(), "box05-src-"));
    tempDirs.push(src);
    const pathA = join(src, "local-a.txt");
    const pathB = join(src, "local-b.bin");
    await writeFile(pathA, localA);
    await writeFile(pathB, localB);
    await box.files.upload([
      { path: pathA, destination: "up/a.txt" },
      { path: pathB, destination: `${HOME}/up/b.bin` },
    ]);
    assert.equal(await box.files.read("up/a.txt"), localA);
    const b64 = await box.files.read(`${HOME}/up/b.bin`, { encoding: "base64" });
    assert.ok(Buffer.from(b64, "base64").equals(localB), "uploaded binary differs");
  });

  await check("files.download({folder})", async () => {
    const dst = await mkdtemp(join(tmpdir(), "box05-dl-"));
    tempDirs.push(dst);
    process.chdir(dst);
    try {
      await box.files.download({ folder: "up" });
      // 0.5.5 writes into ./<basename of folder>/<entry name>.
      assert.deepEqual((await readdir(dst)).sort(), ["up"]);
      assert.deepEqual((await readdir(join(dst, "up"))).sort(), ["a.txt", "b.bin"]);
      assert.equal(await readFile(join(dst, "up", "a.txt"), "utf8"), localA);
      assert.ok(
        (await readFile(join(dst, "up", "b.bin"))).equals(localB),
        "downloaded binary differs",
      );
    } finally {
      process.chdir(startDir);
    }
  });

  // --------------------------------------------------------------- errors
  await check("Box.get of an unknown box is 404", async () => {
    await rejectsWithStatus(Box.get("no-such-box", conn), 404, "Box.get(no-such-box)");
  });

  await check("wrong api key is 401", async () => {
    const bad = { baseUrl, apiKey: `wrong-${apiKey}-key` };
    await rejectsWithStatus(Box.get(box.id, bad), 401, "Box.get with a wrong key");
    await rejectsWithStatus(Box.list(bad), 401, "Box.list with a wrong key");
    await rejectsWithStatus(Box.create({ ...bad }), 401, "Box.create with a wrong key");
  });

  // --------------------------------------------------------------- delete
  await check("box.delete", async () => {
    await box.delete();
    deleted = true;
  });

  await check("Box.get after delete is 404", async () => {
    await rejectsWithStatus(Box.get(box.id, conn), 404, "Box.get(deleted box)");
  });
}

async function cleanup() {
  process.chdir(startDir);
  for (const d of tempDirs) {
    await rm(d, { recursive: true, force: true }).catch(() => {});
  }
  if (box && !deleted) {
    await box.delete().catch(() => {});
  }
}

try {
  await main();
  await cleanup();
  console.log(`box05: all ${passed} checks passed`);
} catch (err) {
  console.log(`not ok - ${current}`);
  console.error(`box05: FAILED at check "${current}" (${passed} passed before it)`);
  if (err instanceof BoxError) {
    console.error(`  BoxError statusCode=${err.statusCode}: ${err.message}`);
  }
  console.error(err?.stack ?? String(err));
  await cleanup();
  process.exit(1);
}
