package local

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRouteTableGuardsEveryRoute sends a request without credentials to
// every route of the table, and one with the API key to each token route:
// each is refused by what its entry says, before its handler runs.
func TestRouteTableGuardsEveryRoute(t *testing.T) {
	s, err := New(Config{DataDir: t.TempDir(), APIKey: "the-key", Isolation: IsolationNone, Clock: &manualClock{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	h := s.routes()
	for _, rt := range s.routeTable() {
		method, path, ok := strings.Cut(rt.pattern, " ")
		if !ok {
			method, path = http.MethodGet, rt.pattern
		}
		path = strings.NewReplacer("{id}", "box-1", "{rest...}", "json/version", "{rid}", "rec-1", "{name}", "seg.ts").Replace(path)
		if path == "/" {
			path = "/v2/box"
		}
		t.Run(rt.pattern, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s without credentials: %d %s", method, path, rec.Code, rec.Body)
			}
			if rt.access == byAPIKey {
				return
			}
			req := httptest.NewRequest(method, path, nil)
			req.Header.Set(headerAPIKey, "the-key")
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("%s %s with the API key instead of the URL's token: %d %s", method, path, rec.Code, rec.Body)
			}
		})
	}
}
