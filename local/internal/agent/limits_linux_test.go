//go:build linux

package agent

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/local/internal/proc"
)

// TestCanTrace: where Yama allows a process to be traced by its parent,
// the probe says the agent may start processes traced, quickly, and
// leaves no process behind: it is killed where it stops, at its exec.
func TestCanTrace(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) >= "2" {
		t.Skip("Yama refuses tracing here")
	}
	t0 := time.Now()
	if !canTrace() {
		t.Fatal("canTrace() = false where tracing is allowed")
	}
	t.Logf("the probe took %v", time.Since(t0))
	if kids := proc.Children(os.Getpid()); len(kids) != 0 {
		t.Errorf("the probe left children %v", kids)
	}
}
