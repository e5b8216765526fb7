package box

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestSDKDependencies keeps the SDK's packages to the few modules their
// users inherit: boxd's and the command's libraries (sandboxing, cobra,
// the line editor, chromedp...) stay out of them.
func TestSDKDependencies(t *testing.T) {
	t.Parallel()
	allowed := []string{
		"github.com/upstash/box-go/box",
		"github.com/upstash/box-go/ephemeral",
		"github.com/upstash/box-go/session",
		"github.com/upstash/box-go/stream",
		"github.com/upstash/box-go/gen",
		"github.com/upstash/box-go/internal/boxlink",
		"github.com/coder/websocket",
		"github.com/oapi-codegen/runtime",
		"github.com/apapsch/go-jsonmerge/v2",
		"github.com/google/jsonschema-go",
		"github.com/google/uuid",
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/upstash/box-go/box", "github.com/upstash/box-go/ephemeral",
		"github.com/upstash/box-go/session", "github.com/upstash/box-go/stream").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		ok := slices.ContainsFunc(allowed, func(a string) bool { return pkg == a || strings.HasPrefix(pkg, a+"/") })
		if !ok {
			t.Errorf("the SDK imports %s", pkg)
		}
	}
}
