// Playwright (playwright-core, from npm, unchanged) driving a box's browser
// over its CDP URL, as users do, while boxd records: a JavaScript redirect
// and a dialog through boxd's REST API, then foreground changes made only
// over CDP (bringToFront, closing the foreground tab), which the recording
// must follow.
//
// BOX_BASE_URL and BOX_API_KEY point at boxd.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";

const base = process.env.BOX_BASE_URL;
const key = process.env.BOX_API_KEY;

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { "X-Box-Api-Key": key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const box = await api("POST", "/v2/box", { browser: true });
const id = box.id;
console.log("box", id);
try {
  // The box serves its own pages on 127.0.0.1:8000.
  const pages = {
    "jsredirect.html": `<script>location.replace('/second.html')</script>`,
    "second.html": `<title>Second</title><p>the second page</p>`,
    "a.html": `<title>Page A</title><button onclick="document.title = 'A clicked'">A</button>`,
    "b.html": `<title>Page B</title><p>b</p>`,
    "c.html": `<title>Page C</title><p>c</p>`,
    "alert.html": `<title>Alerting</title><button id="x" onclick="alert('hi there')">x</button>`,
  };
  const script = ["mkdir -p site"];
  for (const [name, html] of Object.entries(pages)) {
    script.push(`printf '%s' '${html.replaceAll("'", "'\\''")}' > site/${name}`);
  }
  script.push("(nohup python3 -m http.server 8000 --bind 127.0.0.1 -d site >/dev/null 2>&1 &)");
  script.push("for i in $(seq 100); do python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")' 2>/dev/null && exit 0; sleep 0.1; done; exit 1");
  const ex = await api("POST", `/v2/box/${id}/exec`, { command: ["sh", "-c", script.join("\n")] });
  assert.equal(ex.exit_code, 0, `serving the pages: ${JSON.stringify(ex)}`);
  const site = "http://127.0.0.1:8000";

  // A JavaScript redirect: the tab ends on the page it leads to.
  const tab = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/jsredirect.html`, timeout: 10000 });
  assert.equal(tab.url, `${site}/second.html`, `tab after a JS redirect: ${JSON.stringify(tab)}`);
  const went = await api("POST", `/v2/box/${id}/browser/goto`, { tab: tab.id, url: `${site}/jsredirect.html` });
  assert.equal(went.url, `${site}/second.html`);

  // A dialog during act is dismissed and reported; the tab goes on.
  const at = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/alert.html` });
  const act = await api("POST", `/v2/box/${id}/browser/act`, { tab: at.id, action: { selector: "#x", description: "x" } });
  assert.equal(act.success, true, JSON.stringify(act));
  assert.deepEqual(act.dialogs, [{ type: "alert", message: "hi there" }]);
  const content = await api("GET", `/v2/box/${id}/browser/content?tab=${at.id}`);
  assert.equal(content.title, "Alerting");
  await api("DELETE", `/v2/box/${id}/browser/tabs/${at.id}`);
  await api("DELETE", `/v2/box/${id}/browser/tabs/${tab.id}`);

  // Playwright over the CDP URL.
  const { cdp_url } = await api("POST", `/v2/box/${id}/browser/connect`);
  const browser = await chromium.connectOverCDP(cdp_url);
  const context = browser.contexts()[0];
  // The CDP target id of a page, as boxd names tabs.
  const targetOf = async (page) => {
    const s = await context.newCDPSession(page);
    const { targetInfo } = await s.send("Target.getTargetInfo");
    await s.detach();
    return targetInfo.targetId;
  };
  const ids = {};
  const a = await context.newPage();
  await a.goto(`${site}/a.html`);
  ids.a = await targetOf(a);
  const rec = await api("POST", `/v2/box/${id}/browser/recordings`, {});
  await sleep(2500);
  const b = await context.newPage();
  await b.goto(`${site}/b.html`);
  ids.b = await targetOf(b);
  await sleep(2500);
  await a.bringToFront();
  await a.click("button");
  assert.equal(await a.title(), "A clicked");
  await sleep(2500);
  const c = await context.newPage();
  await c.goto(`${site}/c.html`);
  ids.c = await targetOf(c);
  await sleep(2500);
  await c.close(); // the foreground goes back to A, the tab used before
  await sleep(2500);
  const done = await api("POST", `/v2/box/${id}/browser/recordings/stop`);
  await browser.close();

  console.log("markers", JSON.stringify(done.markers));
  const name = { [ids.a]: "A", [ids.b]: "B", [ids.c]: "C" };
  const order = done.markers.map((m) => name[m.tab_id] ?? m.tab_id);
  assert.deepEqual(order, ["A", "B", "A", "C", "A"], `the recording's chapters: ${JSON.stringify(done.markers)}`);
  for (let i = 1; i < done.markers.length; i++) {
    assert.equal(done.markers[i].type, "tab_switch");
    assert.equal(done.markers[i - 1].end_ms, done.markers[i].at_ms);
  }
  console.log("recording", rec.id, "followed", order.length - 1, "foreground changes");
} finally {
  await api("DELETE", `/v2/box/${id}`);
}
