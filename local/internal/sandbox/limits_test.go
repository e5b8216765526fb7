package sandbox

import "testing"

func TestNoFileHard(t *testing.T) {
	for _, c := range []struct {
		fileMax, pids int64
		want          uint64
	}{
		{2466093, 1024, 1204},  // this kind of host, a small box
		{2466093, 2048, 1024},  // the floor
		{2466093, 0, 1204},     // no process limit counts as 1,024
		{1 << 62, 1024, 65536}, // a host without a real file-max
		{100000, 1024, 1024},   // a small host
		{16 << 20, 4096, 2048}, // 16M files, a large box
		{16 << 20, 64, 65536},  // the ceiling
		{1, 1, noFileFloor},    // nonsense stays sane
		{-1, -1, noFileFloor},  // and so does this
	} {
		if got := NoFileHard(c.fileMax, c.pids); got != c.want {
			t.Errorf("NoFileHard(%d, %d) = %d, want %d", c.fileMax, c.pids, got, c.want)
		}
	}
}
