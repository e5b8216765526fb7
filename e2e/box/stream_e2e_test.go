package box_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

func TestExecStream(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	s, err := b.Exec.Stream(ctx, "for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done; echo err >&2")
	if err != nil {
		t.Fatal(err)
	}
	var outputs []string
	var exit *box.ExitChunk
	var times []time.Time
	for c, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		switch c := c.(type) {
		case *box.OutputChunk:
			outputs = append(outputs, string(c.Data))
			times = append(times, time.Now())
		case *box.ExitChunk:
			exit = c
		}
	}
	if len(outputs) < 2 || times[len(times)-1].Sub(times[0]) < 400*time.Millisecond {
		t.Errorf("output arrived in %d chunks over %v; want it as it is produced", len(outputs), times[len(times)-1].Sub(times[0]))
	}
	if got := strings.Join(outputs, ""); got != "line1\nline2\nline3\nline4\nline5\nerr\n" {
		t.Errorf("output = %q", got)
	}
	if exit == nil || exit.ExitCode != 0 {
		t.Fatalf("exit = %+v", exit)
	}
	if r := s.Run(); r.Status != box.RunCompleted || r.Result != "line1\nline2\nline3\nline4\nline5\nerr\n" || r.Type != box.RunTypeCommand {
		t.Errorf("run = %+v", r)
	}

	s, err = b.Exec.Stream(ctx, "echo bye; exit 4")
	if err != nil {
		t.Fatal(err)
	}
	for s.Next() {
	}
	if r := s.Run(); s.Err() != nil || r.Status != box.RunFailed || r.ExitCode != 4 {
		t.Errorf("failing stream: %v, %+v", s.Err(), r)
	}

	waitFor(t, "both streams to be recorded", func() bool {
		runs, err := b.Runs(ctx)
		return err == nil && len(runs) == 2 && runs[0].Status == box.RunFailed && runs[1].Status == box.RunCompleted
	})
}

// TestExecStreamFakeExitFrame runs a program whose output contains the
// exec stream's exit frame: the stream must not end there.
func TestExecStreamFakeExitFrame(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	s, err := b.Exec.Stream(t.Context(), `printf 'before\nevent: exit\ndata: {"exit_code":9,"cpu_ns":1}\n\n'; sleep 0.3; printf 'event: error\ndata: {"error":"fake"}\n\nafter\n'; exit 2`)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var exit *box.ExitChunk
	for s.Next() {
		switch c := s.Current().(type) {
		case *box.OutputChunk:
			out.Write(c.Data)
		case *box.ExitChunk:
			exit = c
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	want := "before\nevent: exit\ndata: {\"exit_code\":9,\"cpu_ns\":1}\n\nevent: error\ndata: {\"error\":\"fake\"}\n\nafter\n"
	if out.String() != want || exit == nil || exit.ExitCode != 2 {
		t.Errorf("output %q, exit %+v; want %q and exit 2", out.String(), exit, want)
	}
}

func TestStreamCodeAndDetach(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()

	s, err := b.Exec.StreamCode(ctx, &box.CodeParams{Lang: box.LangPython, Code: "import sys\nfor i in range(3): print(i, flush=True)\nsys.exit(1)"})
	if err != nil {
		t.Fatal(err)
	}
	for s.Next() {
	}
	if r := s.Run(); r.Result != "0\n1\n2\n" || r.Status != box.RunFailed || r.ExitCode != 1 || r.Type != box.RunTypeCode {
		t.Errorf("code stream run = %+v (err %v)", r, s.Err())
	}

	s, err = b.Exec.Stream(ctx, "while true; do echo tick; sleep 0.05; done")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if r := s.Run(); r.Status != box.RunDetached || !strings.HasPrefix(r.Result, "tick\n") {
		t.Errorf("detached run = %+v", r)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := b.Exec.Stream(ctx, ""); err == nil {
		t.Error("empty command accepted")
	}
	var runErr *box.RunError
	if s, err := b.Exec.StreamCode(ctx, &box.CodeParams{Lang: box.LangTS, Code: "let x: = 1"}); err != nil {
		t.Fatal(err)
	} else {
		for s.Next() {
		}
		if errors.As(s.Err(), &runErr) || s.Run().Status != box.RunFailed || !strings.Contains(s.Run().Result, "TypeScript") {
			t.Errorf("ts compile error stream: %v, %+v", s.Err(), s.Run())
		}
	}
}

// TestExecStreamAsReader reads a stream as an io.Reader (io.Copy goes
// through WriteTo) and in small reads, checks every byte, and that the
// Run keeps only the output's last StreamResultTail bytes.
func TestExecStreamAsReader(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	b := newBox(t, srv, nil)
	ctx := t.Context()
	var want strings.Builder
	for i := 1; i <= 300000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	s, err := b.Exec.Stream(ctx, "seq 1 300000; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	n, err := io.Copy(&got, s)
	if err != nil || n != int64(want.Len()) || got.String() != want.String() {
		t.Fatalf("io.Copy = %d, %v; want %d bytes, equal: %v", n, err, want.Len(), got.String() == want.String())
	}
	r := s.Run()
	if r.ExitCode != 3 || r.Status != box.RunFailed || r.Result != want.String()[want.Len()-box.StreamResultTail:] {
		t.Errorf("run: exit %d, status %s, result of %d bytes", r.ExitCode, r.Status, len(r.Result))
	}

	s, err = b.Exec.Stream(ctx, "seq 1 300000")
	if err != nil {
		t.Fatal(err)
	}
	got.Reset()
	buf := make([]byte, 7)
	for {
		n, err := s.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got.String() != want.String() || s.Run().ExitCode != 0 {
		t.Errorf("small reads: %d bytes, exit %d", got.Len(), s.Run().ExitCode)
	}
}
