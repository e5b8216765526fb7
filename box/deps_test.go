package box

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sdkPackages are the packages a user of the SDK imports.
var sdkPackages = []string{
	"github.com/upstash/box-go/box",
	"github.com/upstash/box-go/ephemeral",
	"github.com/upstash/box-go/session",
	"github.com/upstash/box-go/stream",
	"github.com/upstash/box-go/harness",
}

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
		"github.com/upstash/box-go/harness",
		"github.com/upstash/box-go/gen",
		"github.com/upstash/box-go/internal/boxlink",
		"github.com/coder/websocket",
		"github.com/oapi-codegen/runtime",
		"github.com/apapsch/go-jsonmerge/v2",
		"github.com/google/jsonschema-go",
		"github.com/google/uuid",
	}
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, sdkPackages...)
	out, err := exec.Command("go", args...).Output()
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

// TestSDKModuleGraph checks what a user's module inherits: one that
// requires this module and imports every SDK package has none of boxd's or
// the command's modules in its module graph, since every requirement in
// the SDK's go.mod, a test's included, takes part in the user's version
// selection.
func TestSDKModuleGraph(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/user\n\ngo 1.25.0\n\n" +
		"require github.com/upstash/box-go v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/upstash/box-go => " + root + "\n"
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range sdkPackages {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	// The SDK's go.sum vouches for its requirements, so that no lookup
	// beyond the module cache is needed.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"go.mod": gomod, "main.go": src.String(), "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		return string(out)
	}
	// It builds with the SDK alone, and on the Go release the SDK asks for.
	goCmd("build", "-o", os.DevNull, ".")
	modules := strings.Fields(goCmd("list", "-m", "-f", "{{.Path}}", "all"))
	t.Logf("%d modules in the graph of a module that imports the SDK", len(modules))
	forbidden := []string{
		"github.com/upstash/box-go/local",
		"github.com/upstash/box-go/boxtest",
		"github.com/upstash/box-go/cmd",
		"github.com/chromedp/",
		"github.com/evanw/esbuild",
		"github.com/docker/cli",
		"github.com/google/go-containerregistry",
		"go.etcd.io/bbolt",
		"github.com/spf13/cobra",
		"github.com/gliderlabs/ssh",
		"github.com/pkg/sftp",
		"github.com/chzyer/readline",
		"github.com/schollz/progressbar",
		"github.com/creack/pty",
	}
	for _, m := range modules {
		for _, f := range forbidden {
			if m == f || strings.HasPrefix(m, f) && (strings.HasSuffix(f, "/") || strings.HasPrefix(m, f+"/")) {
				t.Errorf("a module that imports only the SDK has %s in its module graph", m)
			}
		}
	}
	// The go directive: users on Go 1.25 need no newer toolchain.
	v := strings.TrimSpace(goCmd("list", "-m", "-f", "{{.GoVersion}}", "github.com/upstash/box-go"))
	minor, _, _ := strings.Cut(strings.TrimPrefix(v, "1."), ".")
	if n, err := strconv.Atoi(minor); err != nil || !strings.HasPrefix(v, "1.") || n > 25 {
		t.Errorf("the SDK's go directive is %q; its users need no newer Go than 1.25", v)
	}
}
