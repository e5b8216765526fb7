//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestLauncherTakesItsChildAlong: bubblewrap's launcher killed before it
// has let its child go takes the child along. The child, cloned into the
// sandbox's namespaces, waits for the launcher's word before anything
// else, and only later arranges to die with it: without the PID namespace
// the launcher heads (launcherAttr), a launcher killed in between (boxd
// killed while a box starts) leaves the child waiting for good. Here the
// launcher waits on --userns-block-fd at that point, for as long as the
// test wants.
func TestLauncherTakesItsChildAlong(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace of the launcher's own needs root")
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("needs bubblewrap")
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer blockW.Close()
	infoR, infoW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer infoR.Close()
	cmd := exec.Command(bwrap, "--unshare-user", "--userns-block-fd", "3", "--info-fd", "4",
		"--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/", "true")
	cmd.ExtraFiles = []*os.File{blockR, infoW}
	cmd.SysProcAttr = launcherAttr(true)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	blockR.Close()
	infoW.Close()
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	nsPID, err := readChildPid(infoR)
	if err != nil {
		t.Fatal(err)
	}
	child, err := hostPID(cmd.Process.Pid, nsPID)
	if err != nil {
		t.Fatal(err)
	}
	living := func() bool { st := stateOf(child); return st != 0 && st != 'Z' && st != 'X' }
	if !living() {
		t.Fatalf("bubblewrap's child %d is not waiting for its launcher", child)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	killed = true
	for deadline := time.Now().Add(10 * time.Second); living(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("bubblewrap's child %d outlived its killed launcher by 10s", child)
		}
	}
}
