package mountinfo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRead(t *testing.T) {
	const table = `22 1 0:21 / /proc rw,nosuid - proc proc rw
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
90 80 8:1 /data/dir /mnt/with\040space rw master:1 - ext4 /dev/sda1 rw,errors=remount-ro
broken line
`
	path := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(path, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("%d mounts, want 3: %+v", len(ms), ms)
	}
	if m := ms[1]; m.Point != "/sys/fs/cgroup/memory" || m.FSType != "cgroup" || !slices.Contains(m.SuperOptions, "memory") {
		t.Errorf("cgroup mount = %+v", m)
	}
	if m := ms[2]; m.Point != "/mnt/with space" || m.Root != "/data/dir" || m.FSType != "ext4" {
		t.Errorf("escaped mount = %+v", m)
	}
	self, err := Self()
	if err != nil || !slices.ContainsFunc(self, func(m Mount) bool { return m.Point == "/" }) {
		t.Errorf("Self() = %d mounts, %v; want / among them", len(self), err)
	}
}
