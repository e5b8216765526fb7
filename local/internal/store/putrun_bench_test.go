package store

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkPutRun measures PutRun of an exec's run record, as boxd writes
// one for every exec.
func BenchmarkPutRun(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "boxd.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		r := &Run{ID: fmt.Sprintf("run-%d", i), BoxID: "box-a", Type: "shell", Status: "completed", Prompt: "sh -c true", CreatedAt: 1, CompletedAt: 1, Seq: int64(i)}
		if err := s.PutRun(r); err != nil {
			b.Fatal(err)
		}
	}
}
