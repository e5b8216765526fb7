//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestUsernsBelongsToTheBox makes a box's user namespace and checks that
// it is the box's host uid's, not root's (the kernel charges a
// namespace's per-user counts, inotify's among them, to its owner), that
// the box user is that uid and nothing else is mapped, and that
// bubblewrap runs in it.
func TestUsernsBelongsToTheBox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a user namespace of another uid's needs root")
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("needs bubblewrap")
	}
	id := 0x6f000000 + os.Getpid()%0x10000
	ns, err := newUserns(id)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	owner, err := nsOwner(ns)
	if err != nil {
		t.Fatalf("NS_GET_OWNER_UID: %v", err)
	}
	if owner != id {
		t.Errorf("the box's user namespace belongs to uid %d, want %d", owner, id)
	}

	args := []string{"--userns", "3", "--uid", strconv.Itoa(UID), "--gid", strconv.Itoa(GID),
		"--unshare-pid", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--proc", "/proc"}
	if fi, err := os.Lstat("/lib64"); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		args = append(args, "--symlink", "usr/lib64", "/lib64")
	}
	args = append(args, "--", "sh", "-c", "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups")
	cmd := exec.Command(bwrap, args...)
	cmd.ExtraFiles = []*os.File{ns}
	st, err := theStage()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := st.start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bubblewrap in the box's namespace: %v: %s", err, out.String())
	}
	got := strings.Fields(out.String())
	want := strings.Fields(fmt.Sprintf("1000 1000 1000 %d 1 1000 %d 1 deny", id, id))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("in the box: %q, want %q", got, want)
	}
}
