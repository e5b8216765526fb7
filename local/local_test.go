package local_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// rawClient sends requests the SDK would not send (wrong keys, broken
// bodies, unknown routes) and returns what came back, unparsed.
type rawClient struct {
	t    *testing.T
	base string
	key  string
	hc   *http.Client
}

func newRaw(t *testing.T, base, key string) *rawClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &rawClient{t: t, base: base, key: key, hc: &http.Client{Transport: tr}}
}

func rawFor(t *testing.T, srv *boxtest.Server) *rawClient {
	return newRaw(t, srv.URL(), srv.APIKey())
}

// response is a finished raw request.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends a request with the client's key (unless hdr sets
// X-Box-Api-Key, or removes it with an empty value) and reads the whole
// answer. A string or []byte body is sent with a Content-Length; any other
// io.Reader is sent chunked.
func (c *rawClient) do(method, path string, body any, hdr map[string]string) response {
	c.t.Helper()
	return c.doCtx(c.t.Context(), method, path, body, hdr)
}

func (c *rawClient) doCtx(ctx context.Context, method, path string, body any, hdr map[string]string) response {
	c.t.Helper()
	r, err := c.send(ctx, method, path, body, hdr)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (c *rawClient) send(ctx context.Context, method, path string, body any, hdr map[string]string) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return response{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return response{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Box-Api-Key", c.key)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// chunked hides the length of b so that the request is sent without a
// Content-Length and the server only finds out the size by reading.
func chunked(b []byte) io.Reader { return io.MultiReader(bytes.NewReader(b)) }

// wantError checks that r is the API's error body, {"error": "..."} and
// nothing else, with the given status, and that the message contains
// every one of parts.
func wantError(t *testing.T, what string, r response, status int, parts ...string) {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d (body %s)", what, r.status, status, r.body)
		return
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want application/json", what, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, r.body, err)
		return
	}
	msg, ok := body["error"].(string)
	if !ok || len(body) != 1 {
		t.Errorf(`%s: body %s, want {"error": "..."} alone`, what, r.body)
		return
	}
	if msg == "" {
		t.Errorf("%s: empty error message", what)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("%s: error %q does not mention %q", what, msg, p)
		}
	}
}

func wantOK(t *testing.T, what string, r response) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("%s: %s", what, r)
	}
}

// execResult is the body of a successful exec or code call.
type execResult struct {
	ExitCode *int    `json:"exit_code"`
	Output   string  `json:"output"`
	Error    *string `json:"error"`
}

func decodeExec(t *testing.T, what string, r response) execResult {
	t.Helper()
	wantOK(t, what, r)
	var res execResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatalf("%s: %v in %s", what, err, r.body)
	}
	if res.ExitCode == nil {
		t.Fatalf("%s: no exit_code in %s", what, r.body)
	}
	return res
}

func execBody(script string) map[string]any {
	return map[string]any{"command": []string{"sh", "-c", script}}
}

func newBox(t *testing.T, srv *boxtest.Server, params *box.CreateParams) *box.Box {
	t.Helper()
	b, err := srv.Client().Create(t.Context(), params)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return b
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// marker returns a sleep duration that no other process on the machine
// uses, so that /proc can tell whether that sleep is still alive.
func marker() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
	return fmt.Sprintf("3000.%07d", n%10000000)
}

// procsWith returns the pids of processes (other than this one) whose
// command line or working directory contains s. A sandboxed process shows
// its working directory as the sandbox sees it, so the box's host
// directory is found only in bwrap's own command line; without isolation
// the agent runs in the box's host directory.
func procsWith(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if strings.Contains(strings.ReplaceAll(string(raw), "\x00", " "), s) || strings.Contains(cwd, s) {
			out = append(out, pid)
		}
	}
	return out
}

// sandboxOf lists the bubblewrap processes of box id's sandbox: their
// command line sets BOX_ID.
func sandboxOf(id string) []int { return procsWith("BOX_ID " + id) }

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isolation is the mode boxtest would pick on this machine.
func isolation(t *testing.T) string {
	if err := local.CheckIsolation(); err != nil {
		if os.Getenv("BOXTEST_REQUIRE_BWRAP") != "" {
			t.Fatalf("bubblewrap is required: %v", err)
		}
		return local.IsolationNone
	}
	return local.IsolationBwrap
}

func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/nope"},
		{"GET", "/v1/box"},
		{"POST", "/v2/nothing"},
		{"GET", "/v2/box/" + b.ID() + "/nope"},
		{"POST", "/v2/box/" + b.ID() + "/files/nope"},
		{"GET", "/v2/box/" + b.ID() + "/exec/extra"},
		// Known paths with a method they do not have.
		{"PUT", "/v2/box/" + b.ID()},
		{"GET", "/v2/box/" + b.ID() + "/exec"},
		{"DELETE", "/v2/box/" + b.ID() + "/files/read"},
	} {
		wantError(t, tc.method+" "+tc.path, c.do(tc.method, tc.path, nil, nil), http.StatusNotFound)
	}
	// A box that does not exist, on the control plane and the data plane.
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v2/box/box-doesnotexist", nil},
		{"DELETE", "/v2/box/box-doesnotexist", nil},
		{"GET", "/v2/box/box-doesnotexist/status", nil},
		{"POST", "/v2/box/box-doesnotexist/exec", execBody("true")},
		{"GET", "/v2/box/box-doesnotexist/files/list", nil},
		{"GET", "/v2/box/box-doesnotexist/files/read?path=/tmp/x", nil},
	} {
		wantError(t, tc.method+" "+tc.path, c.do(tc.method, tc.path, tc.body, nil), http.StatusNotFound, "box not found")
	}
}

func TestUnauthorized(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, &box.CreateParams{Name: "auth-box"})
	good := rawFor(t, srv)
	id := b.ID()

	type req struct {
		method, path string
		body         any
	}
	pwn := execBody("touch /workspace/home/pwned")
	reqs := []req{
		// control plane
		{"GET", "/v2/box", nil},
		{"POST", "/v2/box", map[string]any{"name": "intruder"}},
		{"GET", "/v2/box/" + id, nil},
		{"GET", "/v2/box/auth-box", nil},
		{"GET", "/v2/box/" + id + "/status", nil},
		{"GET", "/v2/box/" + id + "/logs", nil},
		{"GET", "/v2/box/" + id + "/runs", nil},
		{"POST", "/v2/box/" + id + "/pause", nil},
		{"DELETE", "/v2/box/" + id, nil},
		{"DELETE", "/v2/box", map[string]any{"ids": []string{id}}},
		{"POST", "/v2/box/" + id + "/snapshots", map[string]any{"name": "s"}},
		{"GET", "/nope", nil},
		{"GET", "/v2/box/box-doesnotexist", nil},
		// data plane
		{"POST", "/v2/box/" + id + "/exec", pwn},
		{"POST", "/v2/box/auth-box/exec", pwn},
		{"POST", "/v2/box/" + id + "/code", map[string]any{"code": "1", "language": "js"}},
		{"POST", "/v2/box/" + id + "/exec-stream", pwn},
		{"POST", "/v2/box/" + id + "/files/write", map[string]any{"path": "/workspace/home/pwned", "content": "x"}},
		{"GET", "/v2/box/" + id + "/files/read?path=/workspace/home/secret.txt", nil},
		{"GET", "/v2/box/" + id + "/files/list", nil},
		{"GET", "/v2/box/" + id + "/files/download?folder=/workspace/home/secret.txt", nil},
		{"POST", "/v2/box/" + id + "/files/remove", map[string]any{"path": "/workspace/home/secret.txt"}},
		{"POST", "/v2/box/" + id + "/files/upload", "--x--\r\n"},
		{"POST", "/v2/box/box-doesnotexist/exec", pwn},
	}
	if err := b.Files.WriteText(t.Context(), "secret.txt", "s3cret"); err != nil {
		t.Fatal(err)
	}
	keys := map[string]map[string]string{
		"missing key":              {"X-Box-Api-Key": ""},
		"wrong key":                {"X-Box-Api-Key": "box_wrong"},
		"key prefix":               {"X-Box-Api-Key": srv.APIKey()[:len(srv.APIKey())-1]},
		"key extended":             {"X-Box-Api-Key": srv.APIKey() + "x"},
		"wrong bearer":             {"X-Box-Api-Key": "", "Authorization": "Bearer box_wrong"},
		"bearer prefix of the key": {"X-Box-Api-Key": "", "Authorization": "Bearer " + srv.APIKey()[:len(srv.APIKey())-1]},
		"key without a scheme":     {"X-Box-Api-Key": "", "Authorization": srv.APIKey()},
		"key as basic auth":        {"X-Box-Api-Key": "", "Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+srv.APIKey()))},
		"empty bearer":             {"X-Box-Api-Key": "", "Authorization": "Bearer "},
		// X-Box-Api-Key is the credential checked when it is there.
		"wrong key, right bearer": {"X-Box-Api-Key": "box_wrong", "Authorization": "Bearer " + srv.APIKey()},
	}
	for name, hdr := range keys {
		for _, r := range reqs {
			got := good.do(r.method, r.path, r.body, hdr)
			wantError(t, name+": "+r.method+" "+r.path, got, http.StatusUnauthorized)
			if got.status == http.StatusUnauthorized && strings.TrimSpace(string(got.body)) != `{"error":"unauthorized"}` {
				t.Errorf("%s: %s %s: body %s, want {\"error\":\"unauthorized\"}", name, r.method, r.path, got.body)
			}
			if bytes.Contains(got.body, []byte("s3cret")) {
				t.Errorf("%s: %s %s leaked the file: %s", name, r.method, r.path, got.body)
			}
		}
	}

	// Nothing the refused requests asked for happened.
	if _, err := srv.Client().Get(t.Context(), id, nil); err != nil {
		t.Fatalf("box gone after unauthorized deletes: %v", err)
	}
	list, err := srv.Client().List(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("List = %d boxes after an unauthorized create, want 1", len(list))
	}
	if st, err := b.Status(t.Context()); err != nil || st != box.StatusIdle {
		t.Errorf("status after unauthorized pause = %q, %v", st, err)
	}
	files, err := b.Files.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if diff := cmp.Diff([]string{"secret.txt"}, names); diff != "" {
		t.Errorf("files after unauthorized writes (-want +got):\n%s", diff)
	}
	runs, err := b.Runs(t.Context())
	if err != nil || len(runs) != 0 {
		t.Errorf("runs after unauthorized execs = %d, %v", len(runs), err)
	}
}

func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	id := b.ID()
	for _, tc := range []struct {
		method, path, body string
	}{
		{"POST", "/v2/box", "{bad"},
		{"POST", "/v2/box", `{"name": 5}`},
		{"POST", "/v2/box", `{"labels": "x"}`},
		{"POST", "/v2/box", `[]`},
		{"DELETE", "/v2/box", `{"ids": "box-x"}`},
		{"DELETE", "/v2/box", `{"ids":`},
		{"POST", "/v2/box/" + id + "/exec", "{bad"},
		{"POST", "/v2/box/" + id + "/exec", `{"command": "ls"}`},
		{"POST", "/v2/box/" + id + "/code", `{"code": 1, "language": "js"}`},
		{"POST", "/v2/box/" + id + "/files/write", `{"path": "/tmp/x", "content":`},
		{"POST", "/v2/box/" + id + "/files/mkdir", `not json`},
		{"POST", "/v2/box/" + id + "/files/rename", `{"from": ["a"], "to": "b"}`},
		{"POST", "/v2/box/" + id + "/files/remove", `{`},
	} {
		wantError(t, tc.method+" "+tc.path+" "+tc.body, c.do(tc.method, tc.path, tc.body, nil), http.StatusBadRequest)
	}
	// Well-formed JSON that the API refuses is a 400 too, with a message.
	wantError(t, "bad label", c.do("POST", "/v2/box", `{"labels": ["has space"]}`, nil), http.StatusBadRequest, "has space")
	wantError(t, "empty bulk delete", c.do("DELETE", "/v2/box", `{"ids": []}`, nil), http.StatusBadRequest)
	wantError(t, "empty command", c.do("POST", "/v2/box/"+id+"/exec", `{"command": []}`, nil), http.StatusBadRequest, "command")
	wantError(t, "bad language", c.do("POST", "/v2/box/"+id+"/code", `{"code": "1", "language": "cobol"}`, nil), http.StatusBadRequest, "cobol")
	wantError(t, "bad base64", c.do("POST", "/v2/box/"+id+"/files/write", `{"path": "x", "content": "!!", "encoding": "base64"}`, nil), http.StatusBadRequest, "base64")
	wantError(t, "read without path", c.do("GET", "/v2/box/"+id+"/files/read", nil, nil), http.StatusBadRequest)
	wantError(t, "bad offset", c.do("GET", "/v2/box/"+id+"/files/read?path=x&offset=abc", nil, nil), http.StatusBadRequest)
	wantError(t, "bad log limit", c.do("GET", "/v2/box/"+id+"/logs?limit=-1", nil, nil), http.StatusBadRequest)
	// The box survived all of it.
	if r, err := b.Exec.Command(t.Context(), "echo alive"); err != nil || r.Stdout != "alive\n" {
		t.Fatalf("exec after malformed requests: %+v, %v", r, err)
	}
}

// TestBodyLimit runs a boxd with a 1 KiB JSON body limit: larger JSON
// bodies are refused with 413 whether or not they announce their length,
// on the control plane and the data plane; uploads have their own limit.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	key := "box_test_" + randHex(8)
	srv, err := local.New(local.Config{DataDir: t.TempDir(), APIKey: key, Isolation: isolation(t), MaxBodyBytes: 1024, MaxUploadBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	c := newRaw(t, ts.URL, key)

	pad := strings.Repeat("x", 2000)
	big := []byte(`{"env_vars": {"PAD": "` + pad + `"}}`)
	wantError(t, "create with length", c.do("POST", "/v2/box", big, nil), http.StatusRequestEntityTooLarge, "1024")
	wantError(t, "create chunked", c.do("POST", "/v2/box", chunked(big), nil), http.StatusRequestEntityTooLarge)
	wantError(t, "bulk delete chunked", c.do("DELETE", "/v2/box", chunked([]byte(`{"ids": ["`+pad+`"]}`)), nil), http.StatusRequestEntityTooLarge)

	// Just under the limit is fine.
	small := []byte(`{"name": "limits", "env_vars": {"PAD": "` + strings.Repeat("y", 900) + `"}}`)
	if len(small) > 1024 {
		t.Fatalf("test body is %d bytes", len(small))
	}
	r := c.do("POST", "/v2/box", chunked(small), nil)
	wantOK(t, "create under the limit", r)
	var created struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil || created.ID == "" {
		t.Fatalf("create: %s", r.body)
	}
	base := "/v2/box/" + created.ID

	bigExec, _ := json.Marshal(execBody("echo " + pad))
	wantError(t, "exec with length", c.do("POST", base+"/exec", bigExec, nil), http.StatusRequestEntityTooLarge)
	wantError(t, "exec chunked", c.do("POST", base+"/exec", chunked(bigExec), nil), http.StatusRequestEntityTooLarge)
	bigWrite, _ := json.Marshal(map[string]any{"path": "big.txt", "content": pad})
	wantError(t, "write with length", c.do("POST", base+"/files/write", bigWrite, nil), http.StatusRequestEntityTooLarge)
	wantError(t, "write chunked", c.do("POST", base+"/files/write", chunked(bigWrite), nil), http.StatusRequestEntityTooLarge)

	// The box still works, and none of the refused writes left a file.
	res := decodeExec(t, "exec", c.do("POST", base+"/exec", execBody(`printf %s "$PAD" | wc -c; ls -A`), nil))
	if *res.ExitCode != 0 || res.Output != "900\n" {
		t.Errorf("exec after refused bodies = %+v", res)
	}

	// An upload is bounded by MaxUploadBytes, not by the JSON limit.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("paths", "/workspace/home/up.txt")
	fw, _ := mw.CreateFormFile("files", "up.txt")
	_, _ = fw.Write([]byte(pad))
	_ = mw.Close()
	wantOK(t, "upload", c.do("POST", base+"/files/upload", mp.Bytes(), map[string]string{"Content-Type": mw.FormDataContentType()}))
	r = c.do("GET", base+"/files/read?path=up.txt", nil, nil)
	wantOK(t, "read upload", r)
	var content struct{ Content string }
	_ = json.Unmarshal(r.body, &content)
	if content.Content != pad {
		t.Errorf("uploaded file has %d bytes, want %d", len(content.Content), len(pad))
	}

	// An upload that declares more than the limit is refused by its
	// declared length, before any of its body is sent.
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // against a hang only
	fmt.Fprintf(conn, "POST %s/files/upload HTTP/1.1\r\nHost: boxd\r\nX-Box-Api-Key: %s\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n", base, key, 1<<30+1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("upload declaring 1 GiB + 1: no answer before its body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("upload declaring 1 GiB + 1 = %d, want 413", resp.StatusCode)
	}
	wantOK(t, "delete", c.do("DELETE", base, nil, nil))
}

// TestTelemetryHeaders sends the headers the official SDKs send: the
// server accepts and ignores them.
func TestTelemetryHeaders(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t, boxtest.WithClientOptions(box.WithTelemetry(true)))
	for _, hdr := range []map[string]string{
		{"Upstash-Telemetry-Sdk": "@upstash/box@0.5.5", "Upstash-Telemetry-Runtime": "node@v22.1.0", "Upstash-Telemetry-Platform": "unknown"},
		{"Upstash-Telemetry-Sdk": "@upstash/box@0.5.3,@upstash/box-cli@0.2.12", "Upstash-Telemetry-Runtime": "bun@1.1.0", "Upstash-Telemetry-Platform": "ci"},
		{"Upstash-Telemetry-Sdk": "upstash-box-py@0.2.0", "Upstash-Telemetry-Runtime": "python@3.12.1", "Upstash-Telemetry-Platform": "aws"},
		{"Upstash-Telemetry-Sdk": "@upstash/box@0.5.5", "Upstash-Telemetry-Runtime": "edge-light", "Upstash-Telemetry-Platform": "vercel", "User-Agent": "undici"},
	} {
		c := rawFor(t, srv)
		r := c.do("POST", "/v2/box", `{}`, hdr)
		wantOK(t, "create", r)
		var d struct{ ID string }
		_ = json.Unmarshal(r.body, &d)
		base := "/v2/box/" + d.ID
		wantOK(t, "list", c.do("GET", "/v2/box", nil, hdr))
		wantOK(t, "get", c.do("GET", base, nil, hdr))
		res := decodeExec(t, "exec", c.do("POST", base+"/exec", execBody("echo telemetry"), hdr))
		if res.Output != "telemetry\n" {
			t.Errorf("exec output %q", res.Output)
		}
		wantOK(t, "write", c.do("POST", base+"/files/write", `{"path": "t.txt", "content": "t"}`, hdr))
		wantOK(t, "list files", c.do("GET", base+"/files/list", nil, hdr))
		wantOK(t, "delete", c.do("DELETE", base, nil, hdr))
	}
	// The Go SDK with its own telemetry headers on.
	b := newBox(t, srv, nil)
	if r, err := b.Exec.Command(t.Context(), "echo go"); err != nil || r.Stdout != "go\n" {
		t.Fatalf("exec with Go SDK telemetry: %+v, %v", r, err)
	}
	if err := b.Delete(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestNamesInDataPlane reaches a box by name on data-plane routes too.
func TestNamesInDataPlane(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, &box.CreateParams{Name: "named-box"})

	res := decodeExec(t, "exec by name", c.do("POST", "/v2/box/named-box/exec", execBody(`echo "$BOX_ID"; hostname`), nil))
	if want := b.ID() + "\nnamed-box\n"; *res.ExitCode != 0 || res.Output != want {
		t.Errorf("exec by name = %+v, want output %q", res, want)
	}
	res = decodeExec(t, "code by name", c.do("POST", "/v2/box/named-box/code", map[string]any{"code": "console.log(6*7)", "language": "js"}, nil))
	if res.Output != "42\n" {
		t.Errorf("code by name = %+v", res)
	}
	wantOK(t, "write by name", c.do("POST", "/v2/box/named-box/files/write", `{"path": "n.txt", "content": "by name"}`, nil))
	if got, err := b.Files.ReadText(t.Context(), "n.txt"); err != nil || got != "by name" {
		t.Errorf("file written by name, read by id = %q, %v", got, err)
	}
	r := c.do("GET", "/v2/box/named-box/files/read?path=/workspace/home/n.txt", nil, nil)
	wantOK(t, "read by name", r)
	if !bytes.Contains(r.body, []byte(`"by name"`)) {
		t.Errorf("read by name = %s", r.body)
	}
	r = c.do("GET", "/v2/box/named-box/files/download?folder=/workspace/home/n.txt", nil, nil)
	if r.status != http.StatusOK || string(r.body) != "by name" {
		t.Errorf("download by name = %s", r)
	}
	wantOK(t, "status by name", c.do("GET", "/v2/box/named-box/status", nil, nil))
	r = c.do("GET", "/v2/box/named-box/runs", nil, nil)
	wantOK(t, "runs by name", r)
	var runs struct {
		Runs []struct {
			BoxID string `json:"box_id"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(r.body, &runs); err != nil || len(runs.Runs) != 2 || runs.Runs[0].BoxID != b.ID() {
		t.Errorf("runs by name = %s", r.body)
	}
	wantError(t, "exec by unknown name", c.do("POST", "/v2/box/no-such-name/exec", execBody("true"), nil), http.StatusNotFound, "box not found")

	// Deleting by name frees the name.
	wantOK(t, "delete by name", c.do("DELETE", "/v2/box/named-box", nil, nil))
	wantError(t, "exec after delete", c.do("POST", "/v2/box/named-box/exec", execBody("true"), nil), http.StatusNotFound)
	b2 := newBox(t, srv, &box.CreateParams{Name: "named-box"})
	if b2.ID() == b.ID() {
		t.Fatal("same id reused")
	}
	res = decodeExec(t, "exec by reused name", c.do("POST", "/v2/box/named-box/exec", execBody(`echo "$BOX_ID"; ls -A`), nil))
	if res.Output != b2.ID()+"\n" {
		t.Errorf("reused name reached %q, want the new box %s with no files", res.Output, b2.ID())
	}
}

type listing struct {
	Files []struct {
		Name  string `json:"name"`
		Path  string `json:"path"`
		IsDir bool   `json:"is_dir"`
		Size  int64  `json:"size"`
	} `json:"files"`
}

// TestFilesListFolder checks how files/list resolves `folder`
// (box-api.md §11.3, §18): missing means /workspace/home, a relative value
// is relative to it, an absolute value is used as is (after cleaning), and
// an empty directory is an empty array, not null.
func TestFilesListFolder(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	base := "/v2/box/" + b.ID() + "/files/list"

	list := func(folder *string) (listing, response) {
		t.Helper()
		p := base
		if folder != nil {
			p += "?folder=" + url.QueryEscape(*folder)
		}
		r := c.do("GET", p, nil, nil)
		var l listing
		if r.status == http.StatusOK {
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatalf("list %v: %v in %s", folder, err, r.body)
			}
		}
		return l, r
	}
	paths := func(l listing) []string {
		out := []string{}
		for _, f := range l.Files {
			s := f.Path
			if f.IsDir {
				s += "/"
			}
			out = append(out, s)
		}
		return out
	}
	s := func(v string) *string { return &v }

	// A fresh box's home is empty: the answer is an array.
	_, r := list(nil)
	wantOK(t, "list empty home", r)
	if got := strings.TrimSpace(string(r.body)); got != `{"files":[]}` {
		t.Errorf("empty home lists as %s, want {\"files\":[]}", got)
	}
	wantOK(t, "mkdir", c.do("POST", "/v2/box/"+b.ID()+"/files/mkdir", `{"path": "/workspace/home/empty"}`, nil))
	for _, f := range []string{"empty", "/workspace/home/empty", "/workspace/home/./empty/", "empty/../empty"} {
		_, r := list(s(f))
		wantOK(t, "list "+f, r)
		if got := strings.TrimSpace(string(r.body)); got != `{"files":[]}` {
			t.Errorf("empty dir %q lists as %s, want {\"files\":[]}", f, got)
		}
	}

	for p, content := range map[string]string{
		"a.txt":                       "a",
		"sub/b.txt":                   "bb",
		"/tmp/t.txt":                  "t",
		"/home/boxuser/.profile-box":  "h",
		"/workspace/home/sub/c/d.txt": "d",
	} {
		if err := b.Files.WriteText(t.Context(), p, content); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	home := []string{"/workspace/home/a.txt", "/workspace/home/empty/", "/workspace/home/sub/"}
	sub := []string{"/workspace/home/sub/b.txt", "/workspace/home/sub/c/"}
	for _, tc := range []struct {
		folder *string
		want   []string
	}{
		{nil, home},
		{s(""), home},
		{s("."), home},
		{s("/workspace/home"), home},
		{s("/workspace/home/."), home}, // what files.list(".") sends
		{s("/workspace/home/"), home},
		{s("sub"), sub},
		{s("./sub"), sub},
		{s("sub/"), sub},
		{s("/workspace/home/sub"), sub},
		{s("/workspace/home/sub/../sub/./"), sub},
		{s("sub/c"), []string{"/workspace/home/sub/c/d.txt"}},
		{s(".."), []string{"/workspace/home/"}},
		{s("/workspace"), []string{"/workspace/home/"}},
		{s("/tmp"), []string{"/tmp/t.txt"}},
		{s("/home/boxuser"), []string{"/home/boxuser/.profile-box"}},
	} {
		l, r := list(tc.folder)
		name := "<missing>"
		if tc.folder != nil {
			name = strconv.Quote(*tc.folder)
		}
		if r.status != http.StatusOK {
			t.Errorf("list %s: %s", name, r)
			continue
		}
		if diff := cmp.Diff(tc.want, paths(l)); diff != "" {
			t.Errorf("list %s (-want +got):\n%s", name, diff)
		}
	}
	// Names and sizes of one listing.
	l, _ := list(s("sub"))
	if len(l.Files) == 2 && (l.Files[0].Name != "b.txt" || l.Files[0].Size != 2 || l.Files[1].Name != "c" || !l.Files[1].IsDir) {
		t.Errorf("listing of sub = %+v", l.Files)
	}

	_, r = list(s("missing"))
	wantError(t, "list missing relative dir", r, http.StatusNotFound, "/workspace/home/missing")
	_, r = list(s("/nonexistent/dir"))
	wantError(t, "list missing absolute dir", r, http.StatusNotFound, "/nonexistent/dir")
	_, r = list(s("a.txt"))
	wantError(t, "list a file", r, http.StatusBadRequest, "not a directory")

	// The SDK sees the same.
	got, err := b.Files.List(t.Context(), "empty")
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("SDK List(empty) = %#v, %v", got, err)
	}
}

// TestDeleteDuringExec deletes a box while an exec runs in it: the exec
// call returns promptly and no process of the box is left.
func TestDeleteDuringExec(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	fg, bg := marker(), marker()
	root := filepath.Join(srv.DataDir(), "boxes", b.ID())
	// The box runs before the exec: its start, which takes what it takes
	// on a busy machine, is not what this test is about.
	mustExec(t, b, "true")

	type outcome struct {
		r   response
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := c.send(t.Context(), "POST", "/v2/box/"+b.ID()+"/exec", execBody("sleep "+bg+" & sleep "+fg+"; echo finished"), nil)
		done <- outcome{r, err}
	}()
	// The sleeps start, or the exec ends first, which is wrong: the sleeps
	// last 3,000 seconds. (The bound only keeps a broken boxd from
	// hanging the test.)
	hang := time.After(2 * time.Minute)
	for len(procsWith("sleep "+fg)) == 0 || len(procsWith("sleep "+bg)) == 0 {
		select {
		case o := <-done:
			t.Fatalf("the exec ended before its sleeps were seen: %v %s", o.err, o.r)
		case <-hang:
			t.Fatal("the exec's sleeps did not start in 2 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}

	start := time.Now()
	if err := b.Delete(t.Context()); err != nil {
		t.Fatalf("Delete during exec: %v", err)
	}
	select {
	case o := <-done:
		t.Logf("exec ended %v after the delete with %v %s", time.Since(start).Round(time.Millisecond), o.err, o.r)
		if o.err == nil && o.r.status == http.StatusOK {
			var res execResult
			if err := json.Unmarshal(o.r.body, &res); err != nil || res.ExitCode == nil || *res.ExitCode == 0 || strings.Contains(res.Output, "finished") {
				t.Errorf("exec of a deleted box reported success: %s", o.r)
			}
		} else if o.err == nil {
			wantError(t, "exec of a deleted box", o.r, o.r.status)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("exec still running 15s after its box was deleted")
	}
	if !waitFor(5*time.Second, func() bool {
		return len(procsWith("sleep "+fg))+len(procsWith("sleep "+bg))+len(sandboxOf(b.ID())) == 0
	}) {
		t.Errorf("processes left after delete: fg %v, bg %v, sandbox %v", procsWith("sleep "+fg), procsWith("sleep "+bg), sandboxOf(b.ID()))
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("box directory after delete: %v", err)
	}
	if _, err := srv.Client().Get(t.Context(), b.ID(), nil); !box.IsNotFound(err) {
		t.Errorf("Get after delete: %v", err)
	}
}

// TestSandboxKilledFromOutside kills a running box's sandbox behind
// boxd's back: the next call starts a new one, with the box's files.
func TestSandboxKilledFromOutside(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	if err := b.Files.WriteText(t.Context(), "kept.txt", "kept"); err != nil {
		t.Fatal(err)
	}
	pids := sandboxOf(b.ID())
	if len(pids) == 0 {
		t.Fatal("no sandbox process found")
	}
	for _, pid := range pids {
		_ = killPid(pid)
	}
	// Gone from /proc means reaped by boxd, not only dead.
	if !waitFor(5*time.Second, func() bool {
		for _, pid := range pids {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("sandbox processes %v still there after SIGKILL", pids)
	}
	time.Sleep(100 * time.Millisecond) // let boxd's waiter record the exit
	r, err := b.Exec.Command(t.Context(), "cat kept.txt")
	if err != nil || r.Stdout != "kept" {
		t.Fatalf("exec after the sandbox was killed = %+v, %v", r, err)
	}
	logs, err := b.Logs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, l := range logs {
		msgs = append(msgs, l.Message)
	}
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "restarting") }) {
		t.Errorf("box log does not mention the restart: %q", msgs)
	}
}

// TestConcurrentBoxes: 20 clients each create a box, run five commands in
// it and delete it, all at once.
func TestConcurrentBoxes(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	const n, runs = 20, 5
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			ctx := t.Context()
			b, err := srv.Client().Create(ctx, &box.CreateParams{Name: fmt.Sprintf("conc-%d", i), Env: map[string]string{"N": strconv.Itoa(i)}})
			if err != nil {
				errs <- fmt.Errorf("box %d: create: %w", i, err)
				return
			}
			for j := range runs {
				r, err := b.Exec.Command(ctx, fmt.Sprintf(`echo "$N-%d"; hostname`, j))
				if err != nil {
					errs <- fmt.Errorf("box %d: exec %d: %w", i, j, err)
					return
				}
				if want := fmt.Sprintf("%d-%d\nconc-%d\n", i, j, i); r.Stdout != want || r.ExitCode != 0 {
					errs <- fmt.Errorf("box %d: exec %d = %+v, want output %q", i, j, r, want)
					return
				}
			}
			if err := b.Delete(ctx); err != nil {
				errs <- fmt.Errorf("box %d: delete: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d boxes × %d commands in %v", n, runs, time.Since(start).Round(time.Millisecond))
	list, err := srv.Client().List(t.Context(), nil)
	if err != nil || len(list) != 0 {
		t.Errorf("List after all deletes = %d boxes, %v", len(list), err)
	}
	boxesDir := filepath.Join(srv.DataDir(), "boxes")
	if !waitFor(5*time.Second, func() bool { return len(procsWith(boxesDir)) == 0 }) {
		t.Errorf("sandboxes left: %v", procsWith(boxesDir))
	}
	if ents, _ := os.ReadDir(boxesDir); len(ents) != 0 {
		t.Errorf("%d box directories left", len(ents))
	}
}

// TestIsolationNone runs boxes without a sandbox. Box paths /workspace,
// /home/boxuser and /tmp are mapped onto the box's host directory for the
// files API and for the folder of exec and code, but the processes see the
// host's file system: `pwd` prints the host path of the box's workspace
// home, <data>/boxes/<id>/fs/workspace/home, and $HOME is
// <data>/boxes/<id>/fs/home.
// Nothing outside those directories is protected, so this test does not
// look for isolation.
func TestIsolationNone(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t, boxtest.WithIsolation(local.IsolationNone))
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Env: map[string]string{"GREETING": "hi"}})
	root := filepath.Join(srv.DataDir(), "boxes", b.ID(), "fs")
	hostHome := filepath.Join(root, "workspace", "home")

	r, err := b.Exec.Command(ctx, `pwd; echo "$HOME"; echo "$GREETING $BOX_ID"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := hostHome + "\n" + filepath.Join(root, "home") + "\nhi " + b.ID() + "\n"; r.Stdout != want || r.ExitCode != 0 {
		t.Errorf("exec = %+v, want stdout %q", r, want)
	}
	r, err = b.Exec.Command(ctx, "exit 7")
	if err != nil || r.ExitCode != 7 || r.Status != box.RunFailed {
		t.Errorf("exit 7 = %+v, %v", r, err)
	}
	code, err := b.Exec.Code(ctx, &box.CodeParams{Lang: box.LangJS, Code: "console.log(process.cwd())"})
	if err != nil || code.Stdout != hostHome+"\n" {
		log, _ := os.ReadFile(filepath.Join(srv.DataDir(), "boxes", b.ID(), "agent.log"))
		t.Errorf("js code = %+v, %v; the agent's log:\n%s", code, err, log)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		code, err = b.Exec.Code(ctx, &box.CodeParams{Lang: box.LangPython, Code: "print(6 * 7)"})
		if err != nil || code.Stdout != "42\n" {
			t.Errorf("python code = %+v, %v", code, err)
		}
	}

	// Files: the API speaks box paths, the bytes land in the box's host
	// directory.
	bin := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0x80}
	if err := b.Files.Write(ctx, "bin/data.bin", bin); err != nil {
		t.Fatal(err)
	}
	if err := b.Files.WriteText(ctx, "/workspace/home/hello.txt", "héllo\n"); err != nil {
		t.Fatal(err)
	}
	if err := b.Files.WriteText(ctx, "/tmp/t.txt", "tmp"); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(hostHome, "bin", "data.bin")); err != nil || !bytes.Equal(got, bin) {
		t.Errorf("host copy of data.bin = %x, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "tmp", "t.txt")); err != nil || string(got) != "tmp" {
		t.Errorf("host copy of /tmp/t.txt = %q, %v", got, err)
	}
	if got, err := b.Files.Read(ctx, "bin/data.bin"); err != nil || !bytes.Equal(got, bin) {
		t.Errorf("Read = %x, %v", got, err)
	}
	if got, err := b.Files.ReadText(ctx, "hello.txt"); err != nil || got != "héllo\n" {
		t.Errorf("ReadText = %q, %v", got, err)
	}
	r, err = b.Exec.Command(ctx, "cat hello.txt")
	if err != nil || r.Stdout != "héllo\n" {
		t.Errorf("cat = %+v, %v", r, err)
	}

	localFile := filepath.Join(t.TempDir(), "up.bin")
	payload := bytes.Repeat([]byte("upload\x00"), 10000)
	if err := os.WriteFile(localFile, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.Files.Upload(ctx, []box.UploadFile{{LocalPath: localFile, Destination: "up/up.bin"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Files.Read(ctx, "/workspace/home/up/up.bin"); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("uploaded file read back %d bytes, %v", len(got), err)
	}

	list, err := b.Files.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range list {
		got = append(got, fmt.Sprintf("%s %s %v", e.Name, e.Path, e.IsDir))
	}
	want := []string{"bin /workspace/home/bin true", "hello.txt /workspace/home/hello.txt false", "up /workspace/home/up true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}

	dest := t.TempDir()
	written, err := b.Files.Download(ctx, &box.DownloadParams{Folder: "up", Dest: dest})
	if err != nil || len(written) != 1 {
		t.Fatalf("Download = %v, %v", written, err)
	}
	if got, err := os.ReadFile(filepath.Join(dest, "up.bin")); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("downloaded %d bytes, %v", len(got), err)
	}

	// A background process outlives its exec and dies with the box.
	m := marker()
	r, err = b.Exec.Command(ctx, "sleep "+m+" >/dev/null 2>&1 & echo $!")
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("background exec = %+v, %v", r, err)
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep "+m)) > 0 }) {
		pid := strings.TrimSpace(r.Stdout)
		status, err := os.ReadFile("/proc/" + pid + "/status")
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		t.Fatalf("background sleep %s not running: cmdline %q, status %s %v", pid, cmdline, status, err)
	}
	if err := b.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return len(procsWith("sleep "+m))+len(procsWith(root)) == 0 }) {
		t.Errorf("processes left after delete: %v %v", procsWith("sleep "+m), procsWith(root))
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("box directory after delete: %v", err)
	}
}
