package boxtest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// TestRemoteServer points BOXTEST_BASE_URL at a boxd running in this test
// (as a Mac user points it at a boxd on a Linux VM): NewServer then starts
// no boxd of its own, and what its client makes lives in that boxd, and
// stays there after the test that made it.
func TestRemoteServer(t *testing.T) {
	first := boxtest.NewServer(t)
	t.Setenv(boxtest.EnvBaseURL, first.URL())
	t.Setenv(boxtest.EnvAPIKey, first.APIKey())
	t.Setenv("UPSTASH_BOX_API_KEY", "")

	var id string
	t.Run("made through the override", func(t *testing.T) {
		second := boxtest.NewServer(t)
		if second.URL() != first.URL() || second.APIKey() != first.APIKey() {
			t.Errorf("override server at %s, first at %s", second.URL(), first.URL())
		}
		if second.Backend() != nil || second.DataDir() != "" {
			t.Errorf("override server has a backend (%v) or a data directory (%q)", second.Backend(), second.DataDir())
		}
		b, err := second.Client().Create(t.Context(), &box.CreateParams{Name: "through-override"})
		if err != nil {
			t.Fatal(err)
		}
		id = b.ID()
		if r, err := b.Exec.Command(t.Context(), "echo remote"); err != nil || r.Stdout != "remote\n" {
			t.Fatalf("exec through the override = %+v, %v", r, err)
		}
	})
	if id == "" {
		t.FailNow()
	}
	// The override's cleanup has run: the boxd and the box are still there.
	got, err := first.Client().Get(t.Context(), id, nil)
	if err != nil {
		t.Fatalf("the box made through the override, from the first server: %v", err)
	}
	if got.Info().Name != "through-override" {
		t.Errorf("box %s is named %q", id, got.Info().Name)
	}

	t.Run("UPSTASH_BOX_API_KEY when BOXTEST_API_KEY is unset", func(t *testing.T) {
		t.Setenv(boxtest.EnvAPIKey, "")
		t.Setenv("UPSTASH_BOX_API_KEY", first.APIKey())
		third := boxtest.NewServer(t)
		if _, err := third.Client().Get(t.Context(), id, nil); err != nil {
			t.Errorf("the box from a server keyed by UPSTASH_BOX_API_KEY: %v", err)
		}
	})

	t.Run("options of an in-process boxd skip", func(t *testing.T) {
		var sub *testing.T
		t.Run("WithClock", func(t *testing.T) {
			sub = t
			boxtest.NewServer(t, boxtest.WithClock(boxtest.NewFakeClock(time.Now())), boxtest.WithDataDir(t.TempDir()))
			t.Error("NewServer with WithClock returned for a remote boxd")
		})
		if !sub.Skipped() {
			t.Error("not skipped")
		}
	})

	for _, tc := range []struct {
		name, key, want string
	}{
		{"no key", "", "neither BOXTEST_API_KEY nor UPSTASH_BOX_API_KEY"},
		{"wrong key", "box_test_wrong", "401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(boxtest.EnvAPIKey, tc.key)
			msg := fatal(t, func(tb testing.TB) { boxtest.NewServer(tb) })
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, boxtest.EnvBaseURL) {
				t.Errorf("NewServer failed with %q, want it to name %s and say %q", msg, boxtest.EnvBaseURL, tc.want)
			}
			if strings.Contains(msg, first.APIKey()) {
				t.Errorf("NewServer's failure %q shows the key", msg)
			}
		})
	}
}

// fatal runs f with a testing.TB whose Fatal ends f, and returns what f
// failed with ("" if it returned).
func fatal(t *testing.T, f func(testing.TB)) string {
	t.Helper()
	tb := &fatalTB{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.msg == "" {
		t.Error("NewServer did not fail")
	}
	return tb.msg
}

// fatalTB records a Fatal instead of failing the test.
type fatalTB struct {
	*testing.T
	mu  sync.Mutex
	msg string
}

func (tb *fatalTB) Fatalf(format string, args ...any) {
	tb.mu.Lock()
	tb.msg = fmt.Sprintf(format, args...)
	tb.mu.Unlock()
	runtime.Goexit()
}

func (tb *fatalTB) Fatal(args ...any) { tb.Fatalf("%s", fmt.Sprint(args...)) }

// TestStart starts boxd as a program that is not a test does: a box runs
// a command, and Close stops boxd and removes the data directory Start
// made for it.
func TestStart(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := boxtest.Start()
		if !errors.Is(err, local.ErrUnsupportedOS) {
			t.Fatalf("Start on %s: %v, want local.ErrUnsupportedOS", runtime.GOOS, err)
		}
		return
	}
	srv, err := boxtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.DataDir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the data directory Start made: %v", err)
	}
	if srv.Isolation() == local.IsolationNone && srv.IsolationFallback() == nil {
		t.Error("boxes run without isolation, and IsolationFallback does not say why")
	}
	b, err := srv.Client().Create(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := b.Exec.Command(t.Context(), "echo started")
	if err != nil || run.Stdout != "started\n" {
		t.Fatalf("exec in a box of a started boxd: %+v, %v", run, err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the data directory after Close: %v, want it gone", err)
	}
	if _, err := srv.Client().List(t.Context(), nil); err == nil {
		t.Error("boxd still answers after Close")
	}
	if err := srv.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}
