//go:build linux

package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// TestUsernsLeavesThreadsAlone makes user namespaces of many uids at once
// (each from a thread that takes the box's uid for a moment) and checks
// that every thread of boxd has boxd's credentials afterwards: its uids,
// gids and groups.
func TestUsernsLeavesThreadsAlone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a user namespace of another uid's needs root")
	}
	want := credsOf(t, "/proc/self/status")
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			id := 0x6f100000 + os.Getpid()%0x10000*64 + i
			ns, err := newUserns(id)
			if err != nil {
				t.Error(err)
				return
			}
			defer ns.Close()
			if owner, err := nsOwner(ns); err != nil || owner != id {
				t.Errorf("namespace of uid %d belongs to %d (%v)", id, owner, err)
			}
		})
	}
	wg.Wait()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		got := credsOf(t, "/proc/self/task/"+task.Name()+"/status")
		if got != want {
			t.Errorf("thread %s has %q, want %q", task.Name(), got, want)
		}
	}
}

// credsOf returns the Uid, Gid and Groups lines of a status file.
func credsOf(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "Uid:") || strings.HasPrefix(l, "Gid:") || strings.HasPrefix(l, "Groups:") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, "; ")
}

// TestUsernsHolders makes a box's user namespace with each way of holding
// it: unshare and cat, cat cloned into the namespace, and boxd's own
// binary where cat is missing.
func TestUsernsHolders(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a user namespace of another uid's needs root")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("needs cat")
	}
	self := holderCmd{argv: []string{"/proc/self/exe"}, env: []string{envUserns + "=" + usernsHold}, clone: syscall.CLONE_NEWUSER}
	ways := map[string]holderCmd{
		"cloned cat":  {argv: []string{cat}, clone: syscall.CLONE_NEWUSER},
		"boxd's own":  self,
		"the default": holder(),
	}
	if u, err := exec.LookPath("unshare"); err == nil {
		ways["unshare cat"] = holderCmd{argv: []string{u, "-U", cat}}
	}
	defer func(h func() holderCmd) { holder = h }(holder)
	for name, h := range ways {
		holder = func() holderCmd { return h }
		id := 0x6f200000 + os.Getpid()%0x10000*8 + len(name)
		ns, err := newUserns(id)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if owner, err := nsOwner(ns); err != nil || owner != id {
			t.Errorf("%s: the namespace belongs to %d (%v), want %d", name, owner, err, id)
		}
		ns.Close()
	}
}
