// Playwright (playwright-core, from npm, unchanged) driving a box's browser
// over its CDP URL, as users do, while boxd records: JavaScript redirects
// and dialogs through boxd's REST API, then foreground changes made only
// over CDP (bringToFront, closing the foreground tab), which the recording
// must follow.
//
// BOX_BASE_URL and BOX_API_KEY point at boxd.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";

const base = process.env.BOX_BASE_URL;
const key = process.env.BOX_API_KEY;

// api calls boxd; within is how long the call may take, in ms, for the
// calls that would otherwise hang until boxd's own deadline.
async function api(method, path, body, within) {
  const res = await fetch(base + path, {
    method,
    headers: { "X-Box-Api-Key": key, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: within === undefined ? undefined : AbortSignal.timeout(within),
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
    "dclredirect.html": `<script>addEventListener('DOMContentLoaded', () => location.replace('/second.html'))</script>`,
    "link.html": `<title>Link</title><a id="go" href="/jsredirect.html">go</a>`,
    "alertload.html": `<title>Alerting on load</title><script>alert('loading')</script><p>after the alert</p>`,
    "opener.html": `<title>Opener</title><button id="open" onclick="window.open('/alertload.html')">open</button>`,
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
  // A redirect on DOMContentLoaded: the load that is waited for is the
  // second page's.
  const dcl = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/dclredirect.html`, timeout: 10000 });
  assert.equal(dcl.url, `${site}/second.html`, `tab after a redirect on DOMContentLoaded: ${JSON.stringify(dcl)}`);
  const dclWent = await api("POST", `/v2/box/${id}/browser/goto`, { tab: dcl.id, url: `${site}/dclredirect.html` });
  assert.equal(dclWent.url, `${site}/second.html`);
  await api("DELETE", `/v2/box/${id}/browser/tabs/${dcl.id}`);
  // A click on a link to a page that redirects from script waits for the
  // page it leads to, not for the first page's load, which never comes.
  const lt = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/link.html` });
  const clickedAt = Date.now();
  const clicked = await api("POST", `/v2/box/${id}/browser/act`, { tab: lt.id, action: { selector: "#go", description: "go" } });
  const clickTook = Date.now() - clickedAt;
  assert.equal(clicked.success, true, JSON.stringify(clicked));
  assert.ok(clickTook < 5000, `the click on a link to a JS redirect took ${clickTook} ms`);
  const landed = await api("GET", `/v2/box/${id}/browser/content?tab=${lt.id}`);
  assert.equal(landed.url, `${site}/second.html`);
  await api("DELETE", `/v2/box/${id}/browser/tabs/${lt.id}`);

  // alert() while the page loads: the tab opens, and its content reads.
  const al = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/alertload.html`, timeout: 10000 }, 15000);
  assert.equal(al.title, "Alerting on load", JSON.stringify(al));
  const alc = await api("GET", `/v2/box/${id}/browser/content?tab=${al.id}`, undefined, 10000);
  assert.match(alc.text, /after the alert/);
  await api("DELETE", `/v2/box/${id}/browser/tabs/${al.id}`);

  // A dialog during act is dismissed and reported; the tab goes on.
  const at = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/alert.html` });
  const act = await api("POST", `/v2/box/${id}/browser/act`, { tab: at.id, action: { selector: "#x", description: "x" } });
  assert.equal(act.success, true, JSON.stringify(act));
  assert.deepEqual(act.dialogs, [{ type: "alert", message: "hi there" }]);
  const content = await api("GET", `/v2/box/${id}/browser/content?tab=${at.id}`, undefined, 10000);
  assert.equal(content.title, "Alerting");
  const shot = await api("GET", `/v2/box/${id}/browser/screenshot?tab=${at.id}&encoding=base64`, undefined, 10000);
  assert.ok(Buffer.from(shot.data, "base64").subarray(1, 4).toString() === "PNG", "a screenshot after the dialog is a PNG");
  await api("DELETE", `/v2/box/${id}/browser/tabs/${at.id}`);

  // A popup that alerts while it loads, which boxd had not attached to:
  // its dialog blocks it and its opener, and boxd's calls dismiss it.
  const op = await api("POST", `/v2/box/${id}/browser/tabs`, { url: `${site}/opener.html` });
  const opened = await api("POST", `/v2/box/${id}/browser/act`, { tab: op.id, action: { selector: "#open", description: "open" } });
  assert.equal(opened.success, true, JSON.stringify(opened));
  let popup;
  for (let i = 0; i < 100 && !popup; i++) {
    const { tabs } = await api("GET", `/v2/box/${id}/browser/tabs`);
    popup = tabs.find((t) => t.url === `${site}/alertload.html`);
    if (!popup) await sleep(100);
  }
  assert.ok(popup, "the popup did not open");
  const opc = await api("GET", `/v2/box/${id}/browser/content?tab=${op.id}`, undefined, 10000);
  assert.equal(opc.title, "Opener");
  const popc = await api("GET", `/v2/box/${id}/browser/content?tab=${popup.id}`, undefined, 10000);
  assert.match(popc.text, /after the alert/);
  await api("DELETE", `/v2/box/${id}/browser/tabs/${popup.id}`);
  await api("DELETE", `/v2/box/${id}/browser/tabs/${op.id}`);
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
