package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

// childEnv names, in a child test process, the database it writes to and
// what it writes (see runChild).
const childEnv = "STORE_JOURNAL_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec)
		return
	}
	goleak.VerifyTestMain(m)
}

// noFolds are limits under which the folder never folds by itself within
// a test.
var noFolds = journalLimits{delay: time.Hour, maxRecords: 1 << 20, maxBytes: 1 << 30}

// runChild opens the database named in spec ("mode:path"), writes what
// mode says, tells the parent "ready" and waits to be killed: whatever it
// wrote is only in the journal, or where a fold put it.
func runChild(spec string) {
	mode, path, _ := strings.Cut(spec, ":")
	s, err := open(path, noFolds)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	must := func(err error) {
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
	}
	must(s.PutBox(&Box{ID: "box-a", Status: "idle"}))
	switch mode {
	case "crash":
		must(s.PutBox(&Box{ID: "box-b", Status: "idle"}))
		// run-1 is committed running by a fold; its completion, and
		// everything after, is only in the journal.
		must(s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "running", Seq: 1}))
		must(s.fold())
		must(s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "completed", Seq: 1}))
		must(s.PutRun(&Run{ID: "run-2", BoxID: "box-a", Status: "running", Seq: 2}))
		must(s.PutRun(&Run{ID: "run-2", BoxID: "box-a", Status: "failed", Seq: 2}))
		for i := 3; i < 50; i++ {
			must(s.PutRun(&Run{ID: fmt.Sprintf("run-%d", i), BoxID: "box-a", Status: "completed", Seq: int64(i)}))
		}
		// box-b's run is journaled, then the box goes.
		must(s.PutRun(&Run{ID: "run-b", BoxID: "box-b", Status: "completed"}))
		must(s.DeleteBox("box-b"))
	case "torn":
		for i := 1; i <= 5; i++ {
			must(s.PutRun(&Run{ID: fmt.Sprintf("run-%d", i), BoxID: "box-a", Status: "completed", Seq: int64(i)}))
		}
	default:
		must(fmt.Errorf("unknown mode %q", mode))
	}
	fmt.Println("ready")
	select {}
}

// killedChild runs runChild in a child process on a new database in a
// temporary directory, SIGKILLs it once it has written, and returns the
// database's path.
func killedChild(t *testing.T, mode string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boxd.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode+":"+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if line != "ready\n" {
		t.Fatalf("child said %q", line)
	}
	return path
}

func openT(t *testing.T, path string, limits journalLimits) *Store {
	t.Helper()
	s, err := open(path, limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// committedRuns reads a box's runs as the database holds them, without a
// fold first.
func committedRuns(t *testing.T, s *Store, boxID string) map[string]string {
	t.Helper()
	got := map[string]string{}
	runs, err := list[Run](s, bucketRuns, boxPrefix(boxID))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		got[r.ID] = r.Status
	}
	return got
}

func journalSizes(t *testing.T, path string) (sizes [2]int64) {
	t.Helper()
	for i, p := range journalPaths(path) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sizes[i] = fi.Size()
	}
	return sizes
}

// TestRunJournalSurvivesKill: runs PutRun acknowledged in a process that
// was then SIGKILLed are all there after the next Open, the later of two
// writes of a run (also across a fold), and not the run of a box deleted
// after it was journaled.
func TestRunJournalSurvivesKill(t *testing.T) {
	path := killedChild(t, "crash")
	if sz := journalSizes(t, path); sz[0]+sz[1] == 0 {
		t.Fatal("the killed process left an empty journal")
	}
	s := openT(t, path, noFolds)
	rec := s.Recovered()
	if rec.Runs != 49 || rec.Dropped != 1 || len(rec.Ignored) != 0 {
		t.Errorf("Recovered() = %+v, want 49 runs (run-1 to run-49), 1 dropped, nothing ignored", rec)
	}
	if sz := journalSizes(t, path); sz != [2]int64{} {
		t.Errorf("journal after Open: %v bytes, want empty", sz)
	}
	// Committed by Open itself, not waiting in memory.
	got := committedRuns(t, s, "box-a")
	if len(got) != 49 || got["run-1"] != "completed" || got["run-2"] != "failed" || got["run-49"] != "completed" {
		t.Errorf("runs after replay: %d, run-1 %q, run-2 %q, run-49 %q; want 49, completed, failed, completed", len(got), got["run-1"], got["run-2"], got["run-49"])
	}
	if got := committedRuns(t, s, "box-b"); len(got) != 0 {
		t.Errorf("runs of the deleted box after replay: %v", got)
	}
	runs, err := s.Runs("box-a")
	if err != nil || len(runs) != 49 || runs[0].ID != "run-49" {
		t.Fatalf("Runs = %d runs (first %v), %v; want 49, newest first", len(runs), runs[0], err)
	}
	// The next Open starts clean.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, noFolds)
	if rec := s.Recovered(); rec.Runs != 0 || rec.Dropped != 0 || len(rec.Ignored) != 0 {
		t.Errorf("second Open recovered %+v, want nothing", rec)
	}
	if got := committedRuns(t, s, "box-a"); len(got) != 49 || got["run-2"] != "failed" {
		t.Errorf("after the second Open: %d runs, run-2 %q", len(got), got["run-2"])
	}
}

// TestRunJournalTornTail: a journal that ends in a torn frame, or has a
// corrupt one, yields the records before it; the rest is reported, not
// applied, and Open succeeds.
func TestRunJournalTornTail(t *testing.T) {
	path := killedChild(t, "torn")
	j0 := journalPaths(path)[0]
	data, err := os.ReadFile(j0)
	if err != nil {
		t.Fatal(err)
	}
	frames, good, why := readFrames(data)
	if len(frames) != 5 || good != len(data) || why != "" {
		t.Fatalf("journal of the killed child: %d frames over %d of %d bytes (%s), want 5 over all", len(frames), good, len(data), why)
	}
	// The offset of the third frame.
	third := 2*frameHeader + len(frames[0].raw) + len(frames[1].raw)

	cases := []struct {
		name    string
		damage  func([]byte) []byte
		want    []string // runs present
		ignored string
	}{
		{"torn last frame", func(b []byte) []byte { return b[:len(b)-3] }, []string{"run-1", "run-2", "run-3", "run-4"}, "remain"},
		{"torn header", func(b []byte) []byte {
			return append(b, appendFrame(nil, 99, []byte(`{"id":"run-x","box_id":"box-a"}`))[:frameHeader-1]...)
		}, []string{"run-1", "run-2", "run-3", "run-4", "run-5"}, "partial frame header"},
		{"corrupt third frame", func(b []byte) []byte { b[third+frameHeader+2] ^= 0x20; return b }, []string{"run-1", "run-2"}, "checksum mismatch"},
		{"zeroed tail", func(b []byte) []byte { clear(b[third:]); return b }, []string{"run-1", "run-2"}, "length 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "boxd.db")
			db, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, db, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(journalPaths(p)[0], tc.damage(bytes.Clone(data)), 0o600); err != nil {
				t.Fatal(err)
			}
			s := openT(t, p, noFolds)
			rec := s.Recovered()
			if rec.Runs != len(tc.want) || len(rec.Ignored) != 1 || !strings.Contains(rec.Ignored[0], tc.ignored) || !strings.Contains(rec.Ignored[0], "journal.0") {
				t.Errorf("Recovered() = %+v, want %d runs and one ignored tail saying %q", rec, len(tc.want), tc.ignored)
			}
			got := committedRuns(t, s, "box-a")
			if len(got) != len(tc.want) {
				t.Errorf("runs %v, want %v", got, tc.want)
			}
			for _, id := range tc.want {
				if got[id] != "completed" {
					t.Errorf("%s: %q, want completed", id, got[id])
				}
			}
			// What was ignored is gone for good: new records go
			// after nothing of it.
			if err := s.PutRun(&Run{ID: "run-new", BoxID: "box-a", Status: "completed"}); err != nil {
				t.Fatal(err)
			}
			if sz := journalSizes(t, p); sz[1] != 0 || sz[0] == 0 || sz[0] >= int64(len(data)) {
				t.Errorf("journal after one new record: %v bytes", sz)
			}
		})
	}
}

// TestRunJournalReplayOrder: replay applies records in the order of their
// sequence numbers whichever file holds them, and skips those a fold
// committed already (a journal file whose emptying was lost).
func TestRunJournalReplayOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s, err := open(path, noFolds)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(&Run{ID: "run-x", BoxID: "box-a", Status: "completed"}); err != nil { // sequence number 1
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec := func(seq uint64, id, status string) []byte {
		return appendFrame(nil, seq, fmt.Appendf(nil, `{"id":%q,"box_id":"box-a","status":%q}`, id, status))
	}
	j := journalPaths(path)
	if err := os.WriteFile(j[0], slicesConcat(rec(3, "run-y", "completed"), rec(4, "run-z", "running")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(j[1], slicesConcat(rec(1, "run-x", "running"), rec(2, "run-y", "running")), 0o600); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, noFolds)
	if r := s.Recovered(); r.Runs != 2 || r.Dropped != 0 || len(r.Ignored) != 0 {
		t.Errorf("Recovered() = %+v, want 2 runs (run-y, run-z)", r)
	}
	want := map[string]string{"run-x": "completed", "run-y": "completed", "run-z": "running"}
	if got := committedRuns(t, s, "box-a"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	// Sequence numbers go on after the highest seen.
	if err := s.PutRun(&Run{ID: "run-z", BoxID: "box-a", Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	if s.j.seq != 5 {
		t.Errorf("sequence number after replay of 1..4 and one more record: %d, want 5", s.j.seq)
	}
}

func slicesConcat(a, b []byte) []byte { return append(append([]byte(nil), a...), b...) }

// TestRunJournalLaterWriteWins: of two writes of one run, whether both
// wait in the journal or a fold came between, the later is what Run, Runs
// and the next Open see; and PutRun encodes the run before it returns.
func TestRunJournalLaterWriteWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s, err := open(path, noFolds)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	r := &Run{ID: "run-1", BoxID: "box-a", Status: "running"}
	if err := s.PutRun(r); err != nil {
		t.Fatal(err)
	}
	r.Status = "changed after PutRun returned"
	if got, err := s.Run("box-a", "run-1"); err != nil || got.Status != "running" {
		t.Fatalf("Run = %+v, %v; want running", got, err)
	}
	for _, st := range []string{"completed", "failed"} {
		if err := s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.Runs("box-a")
	if err != nil || len(runs) != 1 || runs[0].Status != "failed" {
		t.Fatalf("Runs = %v, %v; want run-1 failed", runs, err)
	}
	// Two writes pending at once, then Close folds them.
	for _, st := range []string{"running", "completed"} {
		if err := s.PutRun(&Run{ID: "run-2", BoxID: "box-a", Status: st}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if sz := journalSizes(t, path); sz != [2]int64{} {
		t.Errorf("journal after Close: %v bytes, want empty", sz)
	}
	if err := s.PutRun(&Run{ID: "run-3", BoxID: "box-a"}); err == nil {
		t.Error("PutRun after Close succeeded")
	}
	s = openT(t, path, noFolds)
	if rec := s.Recovered(); rec.Runs != 0 {
		t.Errorf("Open after Close replayed %+v, want nothing", rec)
	}
	if got := committedRuns(t, s, "box-a"); got["run-1"] != "failed" || got["run-2"] != "completed" || len(got) != 2 {
		t.Errorf("runs after reopening %v", got)
	}
}

// TestRunJournalDeletedBox: the pending runs of a deleted box never reach
// the database, neither those DeleteBox finds pending nor those a fold
// finds without their box.
func TestRunJournalDeletedBox(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "boxd.db"), noFolds)
	for _, id := range []string{"box-a", "box-b", "box-c"} {
		if err := s.PutBox(&Box{ID: id}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRun(&Run{ID: "run-" + id, BoxID: id, Status: "completed"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteBox("box-b"); err != nil {
		t.Fatal(err)
	}
	// box-c goes behind the journal's back, as when its delete commits
	// while a fold that holds its run is under way.
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketBoxes).Delete([]byte("box-c")) }); err != nil {
		t.Fatal(err)
	}
	if err := s.fold(); err != nil {
		t.Fatal(err)
	}
	if got := committedRuns(t, s, "box-a"); len(got) != 1 {
		t.Errorf("box-a's runs: %v", got)
	}
	for _, id := range []string{"box-b", "box-c"} {
		if got := committedRuns(t, s, id); len(got) != 0 {
			t.Errorf("runs of deleted %s: %v", id, got)
		}
	}
	if err := s.PutRun(&Run{ID: "late", BoxID: "box-b"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("PutRun for a deleted box: %v, want ErrNotFound", err)
	}
}

// TestRunJournalBackpressure: past the bound on pending records (or
// bytes), PutRun folds before it appends, so memory stays bounded while
// the folder does not run.
func TestRunJournalBackpressure(t *testing.T) {
	for _, lim := range []journalLimits{
		{delay: time.Hour, maxRecords: 8, maxBytes: 1 << 30},
		{delay: time.Hour, maxRecords: 1 << 20, maxBytes: 1000},
	} {
		s := openT(t, filepath.Join(t.TempDir(), "boxd.db"), lim)
		if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
			t.Fatal(err)
		}
		most := 0
		for i := range 100 {
			if err := s.PutRun(&Run{ID: fmt.Sprintf("run-%03d", i), BoxID: "box-a", Prompt: strings.Repeat("p", 100)}); err != nil {
				t.Fatal(err)
			}
			s.j.mu.Lock()
			n, b := len(s.j.pending), s.j.bytes
			s.j.mu.Unlock()
			if n > lim.maxRecords || b > lim.maxBytes+300 {
				t.Fatalf("%+v: %d records, %d bytes pending", lim, n, b)
			}
			most = max(most, n)
		}
		got := committedRuns(t, s, "box-a")
		s.j.mu.Lock()
		n := len(s.j.pending)
		s.j.mu.Unlock()
		if len(got)+n != 100 || len(got) == 0 || most < 2 {
			t.Errorf("%+v: %d runs committed, %d pending (at most %d), want 100 in all", lim, len(got), n, most)
		}
		if runs, err := s.Runs("box-a"); err != nil || len(runs) != 100 {
			t.Errorf("Runs: %d, %v", len(runs), err)
		}
	}
}

// TestRunJournalWriteFails: where the journal cannot be written (or a
// failed append not taken back), PutRun commits the record itself, and
// nothing goes to that file again until a fold empties it.
func TestRunJournalWriteFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s := openT(t, path, noFolds)
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	// A read-only descriptor in place of the active file: write(2)
	// and ftruncate(2) both fail.
	ro, err := os.Open(journalPaths(path)[0])
	if err != nil {
		t.Fatal(err)
	}
	s.j.mu.Lock()
	rw := s.j.files[0]
	s.j.files[0] = ro
	s.j.mu.Unlock()
	defer rw.Close()
	if err := s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "completed"}); err != nil {
		t.Fatalf("PutRun with an unwritable journal: %v", err)
	}
	if got := committedRuns(t, s, "box-a"); got["run-1"] != "completed" {
		t.Fatalf("run-1 not committed: %v", got)
	}
	// The other file takes records again; a fold makes the broken one
	// active, and PutRun commits by itself again.
	if err := s.PutRun(&Run{ID: "run-2", BoxID: "box-a", Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	if sz := journalSizes(t, path); sz[1] == 0 {
		t.Errorf("run-2 not journaled: %v", sz)
	}
	if err := s.fold(); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(&Run{ID: "run-3", BoxID: "box-a", Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	if got := committedRuns(t, s, "box-a"); len(got) != 3 {
		t.Errorf("runs committed: %v, want run-1 to run-3", got)
	}
	s.j.mu.Lock()
	s.j.files[0] = rw
	s.j.broken[0] = false
	s.j.mu.Unlock()
	ro.Close()
}

// TestRunJournalConcurrent: writers, readers and deletes at once, with a
// folder that folds often and a small bound; every acknowledged run of a
// box that stays is there after Close and Open, as last written.
func TestRunJournalConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s, err := open(path, journalLimits{delay: time.Millisecond, maxRecords: 16, maxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const writers, runs = 8, 60
	for w := range writers {
		if err := s.PutBox(&Box{ID: fmt.Sprintf("box-%d", w)}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	acked := make([]int, writers)
	for w := range writers {
		wg.Go(func() {
			box := fmt.Sprintf("box-%d", w)
			for i := range runs {
				id := fmt.Sprintf("run-%d-%d", w, i)
				for _, st := range []string{"running", "completed"} {
					err := s.PutRun(&Run{ID: id, BoxID: box, Status: st})
					if errors.Is(err, ErrNotFound) && w == 0 {
						return // box-0 is deleted meanwhile
					}
					if err != nil {
						t.Errorf("PutRun %s: %v", id, err)
						return
					}
				}
				acked[w]++
				if i%10 == 0 {
					if _, err := s.Runs(box); err != nil {
						t.Errorf("Runs: %v", err)
					}
				}
			}
		})
	}
	wg.Go(func() {
		time.Sleep(5 * time.Millisecond)
		if err := s.DeleteBox("box-0"); err != nil {
			t.Errorf("DeleteBox: %v", err)
		}
	})
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, noFolds)
	if got := committedRuns(t, s, "box-0"); len(got) != 0 {
		t.Errorf("deleted box-0 has %d runs", len(got))
	}
	for w := 1; w < writers; w++ {
		got := committedRuns(t, s, fmt.Sprintf("box-%d", w))
		if len(got) != runs || acked[w] != runs {
			t.Errorf("box-%d: %d runs stored, %d acknowledged, want %d", w, len(got), acked[w], runs)
		}
		for id, st := range got {
			if st != "completed" {
				t.Errorf("%s: %s, want completed", id, st)
			}
		}
	}
}

// crashImage copies the database and journal at path, as they are now in
// the page cache, to a new directory, as a SIGKILL would leave them: the
// store at path must be between commits (its folder idle).
func crashImage(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "boxd.db")
	jp, jd := journalPaths(path), journalPaths(dst)
	for _, f := range [][2]string{{path, dst}, {jp[0], jd[0]}, {jp[1], jd[1]}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestRunJournalAppendDuringFold: a record acknowledged while a fold
// commits goes to the other journal file, which that fold does not empty,
// so a crash right after the fold keeps it.
func TestRunJournalAppendDuringFold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s := openT(t, path, noFolds)
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "running"}); err != nil {
		t.Fatal(err)
	}
	s.j.folding = func() error {
		s.j.folding = nil
		return s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "completed"})
	}
	if err := s.fold(); err != nil {
		t.Fatal(err)
	}
	if got := committedRuns(t, s, "box-a"); got["run-1"] != "running" {
		t.Fatalf("the fold committed %v, want run-1 running", got)
	}
	c := openT(t, crashImage(t, path), noFolds)
	if got := committedRuns(t, c, "box-a"); got["run-1"] != "completed" || c.Recovered().Runs != 1 {
		t.Errorf("after a crash following the fold: %v (recovered %+v), want run-1 completed", got, c.Recovered())
	}
}

// TestRunJournalFoldFails: records of a fold whose commit fails stay
// pending (a record written meanwhile still wins), stay in the journal,
// and go in with the next fold; the folder retries by itself.
func TestRunJournalFoldFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "boxd.db")
	s := openT(t, path, noFolds)
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run-1", "run-2"} {
		if err := s.PutRun(&Run{ID: id, BoxID: "box-a", Status: "running"}); err != nil {
			t.Fatal(err)
		}
	}
	diskFull := errors.New("disk full")
	s.j.folding = func() error {
		s.j.folding = nil
		if err := s.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "completed"}); err != nil {
			return err
		}
		return diskFull
	}
	if err := s.fold(); !errors.Is(err, diskFull) {
		t.Fatalf("fold = %v, want the commit's error", err)
	}
	if got := committedRuns(t, s, "box-a"); len(got) != 0 {
		t.Fatalf("a failed fold committed %v", got)
	}
	if _, err := s.Runs("box-a"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"run-1": "completed", "run-2": "running"}
	c := openT(t, crashImage(t, path), noFolds) // taken after the successful fold: both files emptied or skipped
	if got := committedRuns(t, c, "box-a"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("crash image after the retried fold: %v, want %v", got, want)
	}
	if got := committedRuns(t, s, "box-a"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the next fold: %v, want %v", got, want)
	}

	// The folder retries a failed fold without being asked again.
	f := openT(t, filepath.Join(t.TempDir(), "boxd.db"), journalLimits{delay: time.Millisecond, maxRecords: 64, maxBytes: 1 << 20})
	if err := f.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	failures := 3
	f.j.foldMu.Lock()
	f.j.folding = func() error {
		if failures > 0 {
			failures--
			return diskFull
		}
		return nil
	}
	f.j.foldMu.Unlock()
	if err := f.PutRun(&Run{ID: "run-1", BoxID: "box-a", Status: "completed"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.j.foldMu.Lock()
		got := committedRuns(t, f, "box-a")
		f.j.foldMu.Unlock()
		if len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the folder did not commit after its failed folds")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunJournalRefusesWhatBboltWould: a run whose key or record bbolt
// would refuse is refused by PutRun, so that it cannot fail every fold.
func TestRunJournalRefusesWhatBboltWould(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "boxd.db"), noFolds)
	if err := s.PutBox(&Box{ID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(&Run{ID: strings.Repeat("r", bolt.MaxKeySize), BoxID: "box-a"}); err == nil {
		t.Fatal("PutRun of a run id longer than bbolt's keys succeeded")
	}
	if err := s.PutRun(&Run{ID: "run-1", BoxID: "box-a"}); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.Runs("box-a"); err != nil || len(runs) != 1 {
		t.Fatalf("Runs = %d, %v", len(runs), err)
	}
}
