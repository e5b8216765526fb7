// Conformance script: the official @upstash/box 0.5.5 JS SDK's snapshot,
// schedule and ephemeral-box calls against boxd. Same conventions as
// box05.mjs: BOX_BASE_URL and BOX_API_KEY, one "ok - <name>" line per
// check, non-zero exit on the first failure.

import assert from "node:assert/strict";

import { Box, BoxError, EphemeralBox } from "@upstash/box";

delete process.env.UPSTASH_DISABLE_TELEMETRY;

const baseUrl = process.env.BOX_BASE_URL;
const apiKey = process.env.BOX_API_KEY;
if (!baseUrl || !apiKey) {
  console.error("snap05: BOX_BASE_URL and BOX_API_KEY must both be set");
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

async function main() {
  const box = await Box.create(conn);
  boxes.push(box);
  await box.files.write({ path: "kept.txt", content: "in the snapshot" });

  let snap;
  await check("snapshot returns a ready snapshot with its size", async () => {
    snap = await box.snapshot({ name: "first" });
    assert.equal(snap.name, "first");
    assert.equal(snap.box_id, box.id);
    assert.equal(snap.status, "ready");
    assert.ok(snap.size_bytes > 0, `size_bytes ${snap.size_bytes}`);
  });
  await check("listSnapshots", async () => {
    const list = await box.listSnapshots();
    assert.deepEqual(list.map((s) => s.id), [snap.id]);
  });
  await check("Box.fromSnapshot restores the files into a new box", async () => {
    await box.files.write({ path: "later.txt", content: "after the snapshot" });
    const restored = await Box.fromSnapshot(snap.id, conn);
    boxes.push(restored);
    assert.notEqual(restored.id, box.id);
    assert.equal(await restored.files.read("kept.txt"), "in the snapshot");
    await assert.rejects(restored.files.read("later.txt"));
    assert.equal(await box.files.read("later.txt"), "after the snapshot");
  });
  await check("Box.fromSnapshot of an unknown snapshot is 404", async () => {
    await rejectsWithStatus(Box.fromSnapshot("snap-nosuchsnap", conn), 404, "unknown snapshot");
  });
  await check("deleteSnapshot and Box.deleteSnapshots", async () => {
    const second = await box.snapshot({ name: "second" });
    await box.deleteSnapshot(snap.id);
    assert.deepEqual((await box.listSnapshots()).map((s) => s.id), [second.id]);
    await rejectsWithStatus(Box.deleteSnapshots({ ...conn, snapshotIds: [] }), 400, "empty id list");
    const res = await Box.deleteSnapshots({ ...conn, snapshotIds: [second.id] });
    assert.deepEqual(res, { deleted: 1 });
    assert.deepEqual(await box.listSnapshots(), []);
  });

  await check("schedule.exec, list, get, pause, resume, delete", async () => {
    const s = await box.schedule.exec({ cron: "*/5 * * * *", command: ["bash", "-c", "date >> cron.log"] });
    assert.equal(s.type, "exec");
    assert.equal(s.status, "active");
    assert.equal(s.folder, "/workspace/home");
    assert.deepEqual(s.command, ["bash", "-c", "date >> cron.log"]);
    assert.deepEqual((await box.schedule.list()).map((x) => x.id), [s.id]);
    assert.equal((await box.schedule.get(s.id)).cron, "*/5 * * * *");
    await box.schedule.pause(s.id);
    assert.equal((await box.schedule.get(s.id)).status, "paused");
    await box.schedule.resume(s.id);
    assert.equal((await box.schedule.get(s.id)).status, "active");
    await box.schedule.delete(s.id);
    assert.deepEqual(await box.schedule.list(), []);
  });
  await check("an invalid cron is 400", async () => {
    await rejectsWithStatus(box.schedule.exec({ cron: "not a cron", command: ["true"] }), 400, "invalid cron");
  });

  let eph;
  await check("EphemeralBox.create with a TTL", async () => {
    eph = await EphemeralBox.create({ ...conn, ttl: 3600 });
    const now = Date.now() / 1000;
    assert.ok(eph.expiresAt > now + 3500 && eph.expiresAt < now + 3700, `expiresAt ${eph.expiresAt}`);
  });
  await check("ephemeral exec, files, status", async () => {
    const r = await eph.exec.command("echo ephemeral");
    assert.equal(r.result, "ephemeral\n");
    await eph.files.write({ path: "e.txt", content: "x" });
    assert.equal(await eph.files.read("e.txt"), "x");
    const st = await eph.getStatus();
    assert.equal(st.status, "idle");
  });
  await check("a TTL above three days is 400", async () => {
    await rejectsWithStatus(EphemeralBox.create({ ...conn, ttl: 259201 }), 400, "ttl too long");
  });
  await check("ephemeral delete", async () => {
    await eph.delete();
    await rejectsWithStatus(Box.get(eph.id, conn), 404, "deleted ephemeral box");
  });
}

async function cleanup() {
  for (const b of boxes) await b.delete().catch(() => {});
}

try {
  await main();
  await cleanup();
  console.log(`snap05: all ${passed} checks passed`);
} catch (err) {
  console.log(`not ok - ${current}`);
  console.error(`snap05: FAILED at check "${current}" (${passed} passed before it)`);
  if (err instanceof BoxError) console.error(`  BoxError statusCode=${err.statusCode}: ${err.message}`);
  console.error(err?.stack ?? String(err));
  await cleanup();
  process.exit(1);
}
