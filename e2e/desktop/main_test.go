// Package desktop_test drives desktop boxes end to end through the SDK
// against boxd: a real X display, window manager, Chromium and VNC server
// in a box, and a scripted computer-use model. It is a package of its own
// so that its tests, which each run a desktop, run beside the others.
package desktop_test

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/internal/modeltest"
	"github.com/upstash/box-go/local"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction(local.MountThreadFunction)) // boxd's, for the process
}

// desktopSlots bounds the desktops that run at once: each runs an X
// server and a Chromium, and CI machines have two cores.
var desktopSlots = make(chan struct{}, 1)

// modelServer is boxd whose Anthropic provider is the scripted server.
func modelServer(t *testing.T, models *modeltest.Server) *boxtest.Server {
	return boxtest.NewServer(t, boxtest.WithConfig(func(c *local.Config) {
		c.ModelProviderURLs = map[string]string{"anthropic": models.URL}
	}))
}

func newBox(t *testing.T, srv *boxtest.Server, p *box.CreateParams) *box.Box {
	t.Helper()
	b, err := srv.Client().Create(t.Context(), p)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return b
}

func mustRun(t *testing.T, b *box.Box, cmd string) *box.Run {
	t.Helper()
	r, err := b.Exec.Command(t.Context(), cmd)
	if err != nil {
		t.Fatalf("Exec.Command(%q): %v", cmd, err)
	}
	return r
}

func jsonText(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
