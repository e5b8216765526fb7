//go:build linux

package agent

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// groupCmd is sh -c script in a process group of its own, as the agent
// starts commands.
func groupCmd(script string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// TestOutputWhole: large outputs on stdout and stderr, written in turns,
// arrive whole and apart, with the exit code.
func TestOutputWhole(t *testing.T) {
	// 4 MiB on each, in 64 KiB turns: more than a pipe holds, so the
	// command blocks on one output while the other is read.
	script := `i=0; while [ $i -lt 64 ]; do head -c 65536 /dev/zero | tr '\0' o; head -c 65536 /dev/zero | tr '\0' e >&2; i=$((i+1)); done; exit 7`
	var out, errOut bytes.Buffer
	res, err := (&Agent{}).runOutput(t.Context(), groupCmd(script), &out, &errOut, time.Minute, false)
	if err != nil || res.ExitCode != 7 {
		t.Fatalf("runOutput: %+v, %v", res, err)
	}
	const n = 64 * 65536
	if out.Len() != n || strings.Trim(out.String(), "o") != "" {
		t.Errorf("stdout: %d bytes, want %d of 'o'", out.Len(), n)
	}
	if errOut.Len() != n || strings.Trim(errOut.String(), "e") != "" {
		t.Errorf("stderr: %d bytes, want %d of 'e'", errOut.Len(), n)
	}
}

// slowWriter holds up its first write, as a slow client does.
type slowWriter struct {
	delay time.Duration
	buf   bytes.Buffer
	slept bool
}

func (s *slowWriter) Write(p []byte) (int, error) {
	if !s.slept {
		s.slept = true
		time.Sleep(s.delay)
	}
	return s.buf.Write(p)
}

// TestOutputOwedBytes: what the command wrote before it exited is read to
// the last byte, though the client takes it slowly and the exit comes
// with most of it still in the pipe, while a silent job holds the output
// open; the call then ends after the quiet time, not with the job.
func TestOutputOwedBytes(t *testing.T) {
	// 48 KiB fit in a pipe: the command exits at once with all of it
	// waiting, and the job keeps the output open, silent.
	script := `head -c 49152 /dev/zero | tr '\0' x; (exec sleep 30) & exit 0`
	w := &slowWriter{delay: 3 * drainQuiet}
	cmd := groupCmd(script)
	start := time.Now()
	res, err := (&Agent{}).runOutput(t.Context(), cmd, w, nil, time.Minute, false)
	killTree(cmd.Process.Pid)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("runOutput: %+v, %v", res, err)
	}
	if w.buf.Len() != 49152 {
		t.Errorf("read %d bytes, want 49152", w.buf.Len())
	}
	if d := time.Since(start); d > drainMax+time.Second {
		t.Errorf("took %s with a silent job holding the output", d)
	}
}

// TestOutputWithoutPidfd: on a kernel without pidfd_open the exit is
// looked for on a tick, and everything else holds.
func TestOutputWithoutPidfd(t *testing.T) {
	pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
	defer func() { pidfdOpen = unix.PidfdOpen }()

	var out, errOut bytes.Buffer
	res, err := (&Agent{}).runOutput(t.Context(), groupCmd(`echo out; echo err >&2; exit 3`), &out, &errOut, time.Minute, false)
	if err != nil || res.ExitCode != 3 || out.String() != "out\n" || errOut.String() != "err\n" {
		t.Errorf("runOutput: %+v, %v, stdout %q, stderr %q", res, err, out.String(), errOut.String())
	}

	start := time.Now()
	res, err = (&Agent{}).runOutput(t.Context(), groupCmd(`exec sleep 30`), &out, nil, 200*time.Millisecond, false)
	if err != nil || !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("timeout: %+v, %v", res, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a 200ms timeout took %s", d)
	}

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = (&Agent{}).runOutput(ctx, groupCmd(`exec sleep 30`), &out, nil, 0, false)
	if err != context.Canceled {
		t.Errorf("cancelled: %v, want %v", err, context.Canceled)
	}
}

// TestOutputChattyJobCannotHoldTheCall: a job the command leaves writing
// without end holds the call for drainMax at most after the exit, and
// what the command itself wrote comes whole.
func TestOutputChattyJobCannotHoldTheCall(t *testing.T) {
	cmd := groupCmd(`echo first; (while :; do echo chatter; done) & exit 4`)
	var out bytes.Buffer
	start := time.Now()
	res, err := (&Agent{}).runOutput(t.Context(), cmd, &out, nil, time.Minute, false)
	d := time.Since(start)
	killTree(cmd.Process.Pid)
	if err != nil || res.ExitCode != 4 {
		t.Fatalf("runOutput: %+v, %v", res, err)
	}
	if !strings.HasPrefix(out.String(), "first\n") {
		t.Errorf("output starts %q, want the command's own line first", out.String()[:min(out.Len(), 40)])
	}
	if d > drainMax+2*time.Second {
		t.Errorf("the call took %s with a chatty job", d)
	}
}

// TestOutputStdinHeldByAJob: a command given more input than a pipe
// holds exits without reading it, leaving a job that holds its standard
// input and reads nothing. The call ends once the output is drained, not
// with the job: the rest of the input is dropped.
func TestOutputStdinHeldByAJob(t *testing.T) {
	cmd := groupCmd(`exec 3<&0; (exec sleep 30 <&3 3<&-) & echo done`)
	cmd.Stdin = bytes.NewReader(make([]byte, 1<<20))
	var out bytes.Buffer
	start := time.Now()
	res, err := (&Agent{}).runOutput(t.Context(), cmd, &out, nil, time.Minute, false)
	d := time.Since(start)
	killTree(cmd.Process.Pid)
	if err != nil || res.ExitCode != 0 || out.String() != "done\n" {
		t.Errorf("runOutput: %+v, %v, output %q", res, err, out.String())
	}
	if d > drainMax+2*time.Second {
		t.Errorf("the call took %s with a job holding its input", d)
	}
}
