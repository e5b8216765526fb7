// Conformance script: the official @upstash/box 0.5.5 JS SDK's box
// configuration calls (labels, skills, account env, init command) against
// boxd. Same conventions as box05.mjs: BOX_BASE_URL and BOX_API_KEY, one
// "ok - <name>" line per check, non-zero exit on the first failure.

import assert from "node:assert/strict";
import { request } from "node:http";

import { Box, BoxError } from "@upstash/box";

delete process.env.UPSTASH_DISABLE_TELEMETRY;

const baseUrl = process.env.BOX_BASE_URL;
const apiKey = process.env.BOX_API_KEY;
if (!baseUrl || !apiKey) {
  console.error("config05: BOX_BASE_URL and BOX_API_KEY must both be set");
  process.exit(2);
}
const conn = { baseUrl, apiKey };

let passed = 0;
let current = "(setup)";
const boxes = [];

async function check(name, fn) {
  current = name;
  await fn();
  passed++;
  console.log(`ok - ${name}`);
}

async function rejectsWithStatus(promise, status, what) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof BoxError, `${what}: expected a BoxError, got ${err?.name}: ${err?.message}`);
    assert.equal(err.statusCode, status, `${what}: expected statusCode ${status}, got ${err.statusCode} (${err.message})`);
    return true;
  });
}

async function waitFor(what, fn, ms = 15000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// get fetches a public URL. Names under .localhost are not in DNS here, so
// the request goes to boxd's address with the URL's Host header, as a
// browser resolving *.localhost to loopback would send it.
function get(url, headers = {}) {
  const u = new URL(url);
  const api = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: api.hostname, port: api.port, path: u.pathname, headers: { ...headers, host: u.host } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

async function main() {
  const box = await Box.create({ ...conn, labels: ["team-a"], skills: ["upstash/qstash-js/qstash-js"] });
  boxes.push(box);

  await check("labels.add returns the updated set", async () => {
    assert.deepEqual(await box.labels.add("env:prod"), ["team-a", "env:prod"]);
  });
  await check("labels.list", async () => {
    assert.deepEqual(await box.labels.list(), ["team-a", "env:prod"]);
  });
  await check("labels.add of a duplicate is 409", async () => {
    await rejectsWithStatus(box.labels.add("env:prod"), 409, "duplicate label");
  });
  await check("labels.add of an invalid label is 400", async () => {
    await rejectsWithStatus(box.labels.add("has space"), 400, "invalid label");
  });
  await check("Box.list({label}) finds the box", async () => {
    const found = await Box.list({ ...conn, label: "env:prod" });
    assert.deepEqual(found.map((b) => b.id), [box.id]);
  });
  await check("labels.remove (URL-encoded label)", async () => {
    assert.deepEqual(await box.labels.remove("env:prod"), ["team-a"]);
    await rejectsWithStatus(box.labels.remove("env:prod"), 404, "remove missing label");
  });

  await check("skills.list reads enabled_skills", async () => {
    assert.deepEqual(await box.skills.list(), ["upstash/qstash-js/qstash-js"]);
  });
  await check("skills.add and remove (slashes in the path)", async () => {
    await box.skills.add("upstash/workflow-js/workflow-js");
    assert.deepEqual(await box.skills.list(), ["upstash/qstash-js/qstash-js", "upstash/workflow-js/workflow-js"]);
    await rejectsWithStatus(box.skills.add("upstash/workflow-js/workflow-js"), 409, "duplicate skill");
    await rejectsWithStatus(box.skills.add("frontend-design"), 400, "bad skill id");
    await box.skills.remove("upstash/qstash-js/qstash-js");
    assert.deepEqual(await box.skills.list(), ["upstash/workflow-js/workflow-js"]);
    await rejectsWithStatus(box.skills.remove("upstash/qstash-js/qstash-js"), 404, "remove missing skill");
  });

  await check("account env: set, list masked, used by new boxes", async () => {
    await Box.setEnv("CONF_TOKEN", "t0ken", conn);
    await Box.setEnv("MY KEY", "x", conn).then(
      () => assert.fail("a key with a space was accepted"),
      (err) => assert.equal(err.statusCode, 400),
    );
    const env = await Box.listEnv(conn);
    assert.deepEqual(env, { CONF_TOKEN: "****" });
    const fresh = await Box.create(conn);
    boxes.push(fresh);
    const run = await fresh.exec.command("echo $CONF_TOKEN");
    assert.equal(run.result, "t0ken\n");
  });
  await check("account env: setAllEnv replaces, deleteEnv removes", async () => {
    await Box.setAllEnv({ A: "1", B: "2" }, conn);
    assert.deepEqual(await Box.listEnv(conn), { A: "****", B: "****" });
    await Box.deleteEnv("A", conn);
    assert.deepEqual(await Box.listEnv(conn), { B: "****" });
    await rejectsWithStatus(Box.deleteEnv("A", conn), 404, "delete missing env var");
    await Box.setAllEnv({}, conn);
    assert.deepEqual(await Box.listEnv(conn), {});
  });

  await check("getPublicURL reaches a server in the box", async () => {
    const r = await box.exec.command(
      "mkdir -p site && echo hi-from-box > site/index.html && (nohup python3 -m http.server 3000 -d site >/dev/null 2>&1 &) && " +
        "for i in $(seq 100); do curl -s --noproxy '*' -o /dev/null http://127.0.0.1:3000/ && exit 0; sleep 0.1; done; exit 1",
    );
    assert.equal(r.exitCode, 0, r.result);
    const pub = await box.getPublicURL(3000);
    assert.equal(pub.port, 3000);
    assert.match(pub.url, new RegExp(`^http://${box.id}-3000\\.localhost:\\d+$`));
    assert.equal(pub.token, undefined);
    const res = await get(pub.url + "/");
    assert.equal(res.status, 200);
    assert.equal(res.body, "hi-from-box\n");
  });
  await check("getPublicURL with bearer and basic auth", async () => {
    const bearer = await box.getPublicURL(3000, { bearerToken: true });
    assert.equal(typeof bearer.token, "string");
    assert.equal((await get(bearer.url + "/")).status, 401);
    assert.equal((await get(bearer.url + "/", { authorization: `Bearer ${bearer.token}` })).status, 200);
    const basic = await box.getPublicURL(3000, { basicAuth: true });
    assert.equal(typeof basic.username, "string");
    assert.equal(typeof basic.password, "string");
    const cred = Buffer.from(`${basic.username}:${basic.password}`).toString("base64");
    assert.equal((await get(basic.url + "/")).status, 401);
    assert.equal((await get(basic.url + "/", { authorization: `Basic ${cred}` })).status, 200);
  });
  await check("listPublicURLs and deletePublicURL", async () => {
    const { publicURLs } = await box.listPublicURLs();
    assert.deepEqual(publicURLs.map((p) => p.port), [3000]);
    await box.deletePublicURL(3000);
    assert.deepEqual((await box.listPublicURLs()).publicURLs, []);
    assert.equal((await get(publicURLs[0].url + "/")).status, 404);
  });
  await check("updateNetworkPolicy takes effect on the running box", async () => {
    await box.updateNetworkPolicy({ mode: "deny-all" });
    const r = await box.exec.command("curl -s -o /dev/null -w '%{http_code}' http://example.com/ || true");
    assert.equal(r.result, "403");
    await box.updateNetworkPolicy({ mode: "allow-all" });
  });

  await check("init command needs a keep-alive box (client-side)", async () => {
    await assert.rejects(box.getInitCommand(), /keep-alive/);
  });
  const keep = await Box.create({ ...conn, keepAlive: true, initCommand: "echo up >> /workspace/home/init.log; sleep 600" });
  boxes.push(keep);
  await check("the init command runs in a keep-alive box", async () => {
    await waitFor("the init command", async () => (await keep.exec.command("cat init.log 2>/dev/null || true")).result === "up\n");
    assert.equal(await keep.getInitCommand(), "echo up >> /workspace/home/init.log; sleep 600");
  });
  await check("pause is refused for a keep-alive box (client-side)", async () => {
    await assert.rejects(keep.pause(), /Keep-alive boxes cannot be paused/);
  });
  await check("setInitCommand replaces it, deleteInitCommand removes it", async () => {
    await keep.setInitCommand("echo second >> /workspace/home/init.log; sleep 600");
    await waitFor("the new init command", async () => (await keep.exec.command("cat init.log")).result.includes("second"));
    await keep.deleteInitCommand();
    assert.equal(await keep.getInitCommand(), "");
    await assert.rejects(keep.setInitCommand(""), /initCommand is required/);
  });
}

async function cleanup() {
  for (const b of boxes) await b.delete().catch(() => {});
}

try {
  await main();
  await cleanup();
  console.log(`config05: all ${passed} checks passed`);
} catch (err) {
  console.log(`not ok - ${current}`);
  console.error(`config05: FAILED at check "${current}" (${passed} passed before it)`);
  if (err instanceof BoxError) console.error(`  BoxError statusCode=${err.statusCode}: ${err.message}`);
  console.error(err?.stack ?? String(err));
  await cleanup();
  process.exit(1);
}
