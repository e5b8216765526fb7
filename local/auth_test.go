package local_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/upstash/box-go/boxtest"
)

// echoServer is an app for a box: it answers every GET with the
// credential headers it was sent.
const echoServer = `import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("authorization=%s key=%s" % (self.headers.get("Authorization"), self.headers.get("X-Box-Api-Key"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

// TestBearerAuth checks that boxd takes its API key as an Authorization
// bearer token, as the newest official SDKs send a token, on the control
// plane and the data plane, and that a public URL's app is never handed
// boxd's credential, in either header, while its own Authorization goes
// through. The key is in no answer and no log.
func TestBearerAuth(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	srv := boxtest.NewServer(t, boxtest.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	c := rawFor(t, srv)
	key := srv.APIKey()
	bearer := map[string]string{"X-Box-Api-Key": "", "Authorization": "Bearer " + key}
	var answers []string
	do := func(method, path string, body any, hdr map[string]string) response {
		t.Helper()
		r := c.do(method, path, body, hdr)
		answers = append(answers, string(r.body))
		return r
	}

	r := do("POST", "/v2/box", map[string]any{}, bearer)
	wantOK(t, "create with a bearer token", r)
	id, _ := jsonObject(t, r)["id"].(string)
	p := "/v2/box/" + id
	wantOK(t, "list with a bearer token", do("GET", "/v2/box", nil, bearer))
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		hdr := map[string]string{"X-Box-Api-Key": "", "Authorization": scheme + " " + key}
		if res := decodeExec(t, scheme+" exec", do("POST", p+"/exec", execBody("echo in the box"), hdr)); res.Output != "in the box\n" {
			t.Errorf("exec with %q: output %q", scheme, res.Output)
		}
	}
	wantError(t, "wrong bearer token", do("GET", "/v2/box", nil, map[string]string{"X-Box-Api-Key": "", "Authorization": "Bearer " + key + "x"}), http.StatusUnauthorized, "unauthorized")

	// An app behind an open public URL, and one behind a bearer URL.
	wantOK(t, "write the app", do("POST", p+"/files/write", map[string]any{"path": "/workspace/home/echo.py", "content": echoServer}, bearer))
	start := decodeExec(t, "start the app", do("POST", p+"/exec", execBody(`nohup python3 /workspace/home/echo.py >/tmp/echo.log 2>&1 &
for i in $(seq 100); do curl -s --noproxy '*' -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.1; done
cat /tmp/echo.log; exit 1`), bearer))
	if *start.ExitCode != 0 {
		t.Fatalf("the app did not start: %s", start.Output)
	}
	wantOK(t, "open public URL", do("POST", p+"/preview", map[string]any{"port": 8000}, bearer))
	host := fmt.Sprintf("%s-8000.localhost:%s", id, port(t, srv.URL()))
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   string
	}{
		{"boxd's key as a bearer token", map[string]string{"Authorization": "Bearer " + key}, "authorization=None key=None"},
		{"boxd's key in both headers", map[string]string{"Authorization": "bearer " + key, "X-Box-Api-Key": key}, "authorization=None key=None"},
		{"the app's own token", map[string]string{"Authorization": "Bearer app-token"}, "authorization=Bearer app-token key=None"},
		{"the app's own basic auth", map[string]string{"Authorization": "Basic YXBwOnB3"}, "authorization=Basic YXBwOnB3 key=None"},
	} {
		got := previewGet(t, srv.URL(), host, tc.header)
		answers = append(answers, got)
		if got != tc.want {
			t.Errorf("open public URL, %s: the app saw %q, want %q", tc.name, got, tc.want)
		}
	}
	// A bearer public URL: its token is boxd's too, and is not passed on.
	r = do("POST", p+"/preview", map[string]any{"port": 8000, "bearer_token": true}, bearer)
	wantOK(t, "bearer public URL", r)
	token, _ := jsonObject(t, r)["token"].(string)
	if got := previewGet(t, srv.URL(), host, map[string]string{"Authorization": "Bearer " + token}); got != "authorization=None key=None" {
		t.Errorf("bearer public URL with its token: the app saw %q", got)
	}

	for _, s := range append(answers, logs.String()) {
		if strings.Contains(s, key) {
			t.Errorf("the API key leaked: %s", s)
		}
	}
}

// previewGet GETs a public URL by its Host, with the given headers, and
// returns the body of a 200.
func previewGet(t *testing.T, base, host string, header map[string]string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", base, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s (Host %s): %d %s", base, host, resp.StatusCode, b)
	}
	return string(b)
}
