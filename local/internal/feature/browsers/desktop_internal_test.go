package browsers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadTarget: the browser target's path comes from /json/version's
// webSocketDebuggerUrl, and anything else there is refused.
func TestReadTarget(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want, err  string
	}{
		{"chromium", `{"Browser":"Chrome/131","webSocketDebuggerUrl":"ws://127.0.0.1:9223/devtools/browser/5f0c-11"}`, 200, "/devtools/browser/5f0c-11", ""},
		{"page target", `{"webSocketDebuggerUrl":"ws://127.0.0.1:9223/devtools/page/1"}`, 200, "", "no browser target"},
		{"no url", `{}`, 200, "", "no browser target"},
		{"not json", `<html>`, 200, "", "/json/version"},
		{"status", `{}`, 404, "", "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/json/version" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			got, err := readTarget(t.Context(), srv.Client(), srv.URL+"/json/version")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("readTarget = %q, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("readTarget = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
