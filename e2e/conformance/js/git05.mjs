// Conformance script: the official @upstash/box 0.5.5 JS SDK's git calls
// against boxd, whose GitHub is a loopback git server (smart HTTP) and a
// GitHub API stand-in, both started by e2e/conformance/js_test.go.
// Same conventions as box05.mjs: BOX_BASE_URL and BOX_API_KEY, one
// "ok - <name>" line per check, non-zero exit on the first failure.
//
// Also set by the test: GIT_TOKEN (the token both servers accept),
// GIT_REPO (owner/repo of a repository with README.md on main),
// GIT_BOX_URL (the git server's URL as boxes see it) and GIT_CHECK_URL (a
// URL on the test's side that answers what the servers saw, see below).

import assert from "node:assert/strict";

import { Box, BoxError } from "@upstash/box";

delete process.env.UPSTASH_DISABLE_TELEMETRY;

const { BOX_BASE_URL: baseUrl, BOX_API_KEY: apiKey, GIT_TOKEN: token, GIT_REPO: repo, GIT_BOX_URL: gitURL, GIT_CHECK_URL: checkURL } = process.env;
if (!baseUrl || !apiKey || !token || !repo || !gitURL || !checkURL) {
  console.error("git05: BOX_BASE_URL, BOX_API_KEY, GIT_TOKEN, GIT_REPO, GIT_BOX_URL and GIT_CHECK_URL must be set");
  process.exit(2);
}
const conn = { baseUrl, apiKey };
const name = repo.split("/")[1];

let passed = 0;
let current = "(setup)";
const boxes = [];
const texts = []; // every text the SDK returned, checked for the token

async function check(what, fn) {
  current = what;
  await fn();
  passed++;
  console.log(`ok - ${what}`);
}

async function rejectsWithStatus(promise, status, what, re) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof BoxError, `${what}: expected a BoxError, got ${err?.name}: ${err?.message}`);
    assert.equal(err.statusCode, status, `${what}: expected statusCode ${status}, got ${err.statusCode} (${err.message})`);
    if (re) assert.match(err.message, re);
    texts.push(err.message);
    return true;
  });
}

// What the test's servers saw: {head, branches: {name: sha}, pulls: [...]}.
async function seen() {
  const r = await fetch(checkURL);
  assert.equal(r.status, 200);
  return r.json();
}

async function git(box, ...args) {
  const r = await box.git.exec({ args });
  texts.push(r.output);
  return r;
}

async function main() {
  const box = await Box.create({ ...conn, git: { token, userName: "JS Bot", userEmail: "js@example.com" } });
  boxes.push(box);

  await check("git.status at the workspace root is empty", async () => {
    assert.equal(await box.git.status(), "");
  });
  await check("git.exec returns output and exit_code (128 outside a repository)", async () => {
    const r = await git(box, "status");
    assert.equal(r.exit_code, 128);
    assert.match(r.output, /not a git repository/);
  });
  await check("git.clone of owner/repo sends the box's token", async () => {
    await box.git.clone({ repo });
    await box.cd(name);
    const r = await git(box, "remote", "get-url", "origin");
    assert.equal(r.output.trim(), `${gitURL}/${repo}`);
    const cfg = await box.files.read(".git/config");
    assert.ok(!cfg.includes(token) && !/extraheader/i.test(cfg), `.git/config holds credentials:\n${cfg}`);
  });
  await check("git.clone of the full URL with a branch", async () => {
    await box.cd("/tmp");
    await box.git.clone({ repo: `${gitURL}/${repo}`, branch: "main" });
    await box.cd(`/workspace/home/${name}`);
  });
  await check("git.status, git.diff", async () => {
    await box.files.write({ path: "README.md", content: "changed by js\n" });
    await box.files.write({ path: "added.txt", content: "new\n" });
    const st = await box.git.status();
    texts.push(st);
    assert.match(st, / M README\.md/);
    assert.match(st, /\?\? added\.txt/);
    const d = await box.git.diff();
    texts.push(d);
    assert.match(d, /\+changed by js/);
  });
  let sha;
  await check("git.commit with the box's identity", async () => {
    const c = await box.git.commit({ message: "js: change" });
    assert.match(c.sha, /^[0-9a-f]{40}$/);
    assert.equal(c.message, "js: change");
    sha = c.sha;
    assert.equal((await git(box, "log", "-1", "--format=%an <%ae>")).output.trim(), "JS Bot <js@example.com>");
  });
  await check("git.commit with nothing to commit is 409", async () => {
    await rejectsWithStatus(box.git.commit({ message: "empty" }), 409, "empty commit", /nothing to commit/);
  });
  await check("git.push reaches the server", async () => {
    await box.git.push();
    assert.equal((await seen()).branches.main, sha);
  });
  await check("git.checkout of a new branch, commit with an author, push it", async () => {
    await box.git.checkout({ branch: "js-feature" });
    assert.equal((await git(box, "branch", "--show-current")).output.trim(), "js-feature");
    await box.files.write({ path: "feature.txt", content: "feature\n" });
    const c = await box.git.commit({ message: "js: feature", authorName: "Jane", authorEmail: "jane@example.com" });
    assert.equal((await git(box, "log", "-1", "--format=%an <%ae>")).output.trim(), "Jane <jane@example.com>");
    await box.git.push({ branch: "js-feature" });
    assert.equal((await seen()).branches["js-feature"], c.sha);
  });
  await check("git.createPR from the current branch", async () => {
    const pr = await box.git.createPR({ title: "JS feature", body: "from the JS SDK" });
    texts.push(JSON.stringify(pr));
    assert.equal(pr.title, "JS feature");
    assert.equal(pr.base, "main");
    assert.ok(pr.number > 0);
    assert.match(pr.url, new RegExp(`/${repo}/pull/${pr.number}$`));
    const sent = (await seen()).pulls.at(-1);
    assert.deepEqual(sent, { title: "JS feature", body: "from the JS SDK", head: "js-feature", base: "main", auth: `Bearer ${token}` });
  });
  await check("git.checkout of an existing branch", async () => {
    await box.git.checkout({ branch: "main" });
    assert.equal((await git(box, "rev-parse", "HEAD")).output.trim(), sha);
  });
  await check("git.updateConfig", async () => {
    const cfg = await box.git.updateConfig({ userName: "Renamed Bot" });
    assert.deepEqual(cfg, { git_user_name: "Renamed Bot", git_user_email: "js@example.com" });
    assert.equal((await git(box, "config", "--global", "user.name")).output.trim(), "Renamed Bot");
    await assert.rejects(box.git.updateConfig({}), /At least one of userName or userEmail is required/);
  });
  await check("git.exec of a failing command is a result", async () => {
    const r = await git(box, "checkout", "no-such-ref");
    assert.notEqual(r.exit_code, 0);
    assert.match(r.output, /no-such-ref/);
  });
  await check("a box reached with Box.get({gitToken}) clones too", async () => {
    const other = await Box.create(conn);
    boxes.push(other);
    await rejectsWithStatus(other.git.clone({ repo }), 400, "clone without a token", /token/);
    const again = await Box.get(other.id, { ...conn, gitToken: token });
    await again.git.clone({ repo });
  });
  await check("no answer holds the token", async () => {
    for (const t of texts) assert.ok(!t.includes(token), `the token leaked: ${t}`);
  });
}

async function cleanup() {
  for (const b of boxes) await b.delete().catch(() => {});
}

try {
  await main();
  await cleanup();
  console.log(`git05: all ${passed} checks passed`);
} catch (err) {
  console.log(`not ok - ${current}`);
  console.error(`git05: FAILED at check "${current}" (${passed} passed before it)`);
  if (err instanceof BoxError) console.error(`  BoxError statusCode=${err.statusCode}: ${err.message}`);
  console.error(err?.stack ?? String(err));
  await cleanup();
  process.exit(1);
}
