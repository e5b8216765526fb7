package box

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/gen"
)

// TestTabContentWire: a tab's Goto and Content always name the tab, and a
// page's links decode from either generation's names: {text, href}, or
// the desktop branch's {t, h}.
func TestTabContentWire(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		sent []string
	)
	page := `{"title":"P","url":"http://x/","text":"hi","links":[` +
		`{"text":"one","href":"http://x/1","t":"one","h":"http://x/1"},` +
		`{"t":"two","h":"http://x/2"},` +
		`{"text":"three","href":"http://x/3"}]}`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Tab *string `json:"tab"`
		}
		_ = json.Unmarshal(raw, &body)
		tab := r.URL.Query().Get("tab")
		if body.Tab != nil {
			tab = *body.Tab
		}
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.Path+" tab="+tab)
		mu.Unlock()
		_, _ = io.WriteString(w, page)
	}))
	t.Cleanup(ts.Close)
	c := pollClient(t, ts.URL)
	b := c.newBox(&gen.BoxData{ID: "box-1", Browser: ptr(true)})
	tab := b.Browser.GetTab("T1")
	want := &BrowserContent{Title: "P", URL: "http://x/", Text: "hi", Links: []BrowserLink{
		{Text: "one", Href: "http://x/1"}, {Text: "two", Href: "http://x/2"}, {Text: "three", Href: "http://x/3"},
	}}
	got, err := tab.Goto(t.Context(), "http://x/")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Goto (-want +got):\n%s", diff)
	}
	if got, err = tab.Content(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Content (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"POST /v2/box/box-1/browser/goto tab=T1", "GET /v2/box/box-1/browser/content tab=T1"}, sent); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
