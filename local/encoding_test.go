package local_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/upstash/box-go/boxtest"
)

// TestBothURLEncodings sends path parameters and query values spelled as
// the official SDKs spell them (encodeURIComponent) and as other clients
// do (a query space as '+', ':' raw in a path): boxd reads both alike.
func TestBothURLEncodings(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	id := b.ID()
	if err := b.Files.WriteText(t.Context(), "/workspace/home/sp ace+plus.txt", "content"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"path=%2Fworkspace%2Fhome%2Fsp%20ace%2Bplus.txt",
		"path=%2Fworkspace%2Fhome%2Fsp+ace%2Bplus.txt",
		"path=/workspace/home/sp%20ace%2Bplus.txt",
	} {
		r := c.do("GET", "/v2/box/"+id+"/files/read?"+q, nil, nil)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"content":"content"`) {
			t.Errorf("read with %s = %s", q, r)
		}
	}
	for i, label := range []string{"env%3Aprod", "env:prod"} {
		wantOK(t, "add label", c.do("POST", "/v2/box/"+id+"/config/labels", map[string]string{"label": "env:prod"}, nil))
		if r := c.do("DELETE", "/v2/box/"+id+"/config/labels/"+label, nil, nil); r.status != http.StatusOK {
			t.Errorf("remove label spelled %d (%s) = %s", i, label, r)
		}
	}
	for _, key := range []string{"A%3AB", "A:B"} {
		// An invalid name either way: the same refusal.
		wantError(t, "env key "+key, c.do("PUT", "/v2/box/settings/env/"+key, map[string]string{"value": "v"}, nil), http.StatusBadRequest, `"A:B"`)
	}
}
