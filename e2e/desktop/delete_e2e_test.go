//go:build linux

// The processes of a box are read from /proc: Linux only.

package desktop_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
)

// hostProc is a process of this machine, seen in /proc: its pid and
// start time (which tell it from a later process given the same pid),
// its parent, its real uid, its name and its control group.
type hostProc struct {
	pid, ppid int
	start     string
	uid       int
	comm      string
	cgroup    string
	cmdline   string
	zombie    bool
}

func (p hostProc) String() string { return fmt.Sprintf("%d (%s, uid %d)", p.pid, p.comm, p.uid) }

// readProc reads the process pid from /proc; ok is false when it is not
// there.
func readProc(pid int) (p hostProc, ok bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return p, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return p, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return p, false
	}
	p = hostProc{pid: pid, comm: s[open+1 : end], zombie: f[0] == "Z" || f[0] == "X", start: f[19]}
	p.ppid, _ = strconv.Atoi(f[1])
	if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			p.uid = int(st.Uid)
		}
	}
	cg, _ := os.ReadFile(filepath.Join(dir, "cgroup"))
	p.cgroup = string(cg)
	cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
	p.cmdline = string(cmd)
	return p, true
}

// hostProcs lists the processes alive now.
func hostProcs() []hostProc {
	ents, _ := os.ReadDir("/proc")
	var out []hostProc
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			if p, ok := readProc(pid); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// boxProcs are the processes of box id of the boxd whose data directory
// is dataDir, found as other tests find them: its sandbox's bwrap (the
// one that sets BOX_ID to id) and every process below it, every process
// in the box's control group (boxd makes one per box, .../boxd/<id>), and
// every process of the box's own host uid (the owner of its files, when
// boxes have uids of their own).
func boxProcs(dataDir, id string) []hostProc {
	all := hostProcs()
	boxUID := -1
	if fi, err := os.Stat(filepath.Join(dataDir, "boxes", id, "fs")); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
			boxUID = int(st.Uid)
		}
	}
	in := map[int]bool{}
	for _, p := range all {
		if strings.Contains(p.cmdline, "BOX_ID\x00"+id+"\x00") || strings.Contains(p.cgroup, "/boxd/"+id+"\n") ||
			strings.Contains(p.cgroup, "/boxd/"+id+"/") || p.uid == boxUID {
			in[p.pid] = true
		}
	}
	// Below them, at any depth.
	for grew := true; grew; {
		grew = false
		for _, p := range all {
			if !in[p.pid] && in[p.ppid] {
				in[p.pid], grew = true, true
			}
		}
	}
	var out []hostProc
	for _, p := range all {
		if in[p.pid] {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether p still runs: the same pid with the same start
// time, and not a zombie.
func alive(p hostProc) bool {
	now, ok := readProc(p.pid)
	return ok && now.start == p.start && !now.zombie
}

// TestDesktopDeleteEndsIt: deleting a box whose desktop runs, with a
// viewer watching, ends every process of the desktop (Xvfb, the window
// manager, both x11vnc, Chromium and its helpers) and of the box within
// seconds, closes the viewer's WebSocket, and revokes the viewer: its
// page and its WebSocket answer 401 with the password that worked a
// moment before, and the desktop's API answers 404.
func TestDesktopDeleteEndsIt(t *testing.T) {
	t.Parallel()
	needDesktop(t)
	srv := boxtest.NewServer(t)
	if srv.Backend() == nil {
		t.Skip("the processes of a boxd elsewhere (BOXTEST_BASE_URL) cannot be seen from here")
	}
	ctx := t.Context()
	b := newBox(t, srv, &box.CreateParams{Desktop: true})
	if _, err := b.Desktop.Start(ctx, nil); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// Chromium has started when the screen shows more than the
	// background: wait for its window, so that its processes are there
	// to be counted.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		procs := boxProcs(srv.DataDir(), b.ID())
		if hasAll(procs, "Xvfb", "openbox", "x11vnc", "chromium") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the desktop's processes never all showed; the box has %v", procs)
		}
	}
	v, err := b.Desktop.Stream(ctx, nil)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	auth := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(v.Username+":"+v.Password))}}
	viewer := func() int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", v.URL, nil)
		req.Header = auth.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := viewer(); code != 200 {
		t.Fatalf("the viewer's page before the delete: %d", code)
	}
	// A viewer watches: its WebSocket speaks RFB with the box's VNC
	// server.
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// (503 until x11vnc listens.)
	var ws *websocket.Conn
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var resp *http.Response
		ws, resp, err = websocket.Dial(wctx, v.RawWebSocketURL, &websocket.DialOptions{HTTPHeader: auth, Subprotocols: []string{"binary"}})
		if err == nil {
			break
		}
		if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("the viewer's WebSocket: %v", err)
		}
	}
	defer ws.CloseNow()
	if _, msg, err := ws.Read(wctx); err != nil || !strings.HasPrefix(string(msg), "RFB 003.") {
		t.Fatalf("the VNC server's greeting: %q, %v", msg, err)
	}
	wsClosed := make(chan error, 1)
	go func() {
		for {
			if _, _, err := ws.Read(wctx); err != nil {
				wsClosed <- err
				return
			}
		}
	}()

	procs := boxProcs(srv.DataDir(), b.ID())
	t.Logf("the box's processes before the delete: %v", procs)
	vncs := slices.DeleteFunc(slices.Clone(procs), func(p hostProc) bool { return p.comm != "x11vnc" })
	if !hasAll(procs, "Xvfb", "openbox", "chromium") || len(vncs) != 2 {
		t.Fatalf("before the delete the box's processes are %v; want Xvfb, openbox, chromium and two x11vnc", procs)
	}
	deleted := time.Now()
	if err := b.Delete(ctx); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	const bound = 10 * time.Second
	for {
		var left []hostProc
		for _, p := range procs {
			if alive(p) {
				left = append(left, p)
			}
		}
		// And nothing new of the box's.
		for _, p := range boxProcs(srv.DataDir(), b.ID()) {
			if !p.zombie && !slices.ContainsFunc(left, func(q hostProc) bool { return q.pid == p.pid }) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Since(deleted) > bound {
			t.Fatalf("%v after the delete the box's processes %v still run", bound, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("every process of the box ended %v after the delete was asked for", time.Since(deleted).Round(time.Millisecond))

	select {
	case err := <-wsClosed:
		if websocket.CloseStatus(err) == -1 && wctx.Err() != nil {
			t.Errorf("the viewer's WebSocket did not close: %v", err)
		}
	case <-time.After(bound):
		t.Errorf("the viewer's WebSocket is still open %v after the delete", bound)
	}
	if code := viewer(); code != 401 && code != 404 {
		t.Errorf("the viewer's page after the delete: %d, want 401 or 404", code)
	}
	_, resp, err := websocket.Dial(ctx, v.RawWebSocketURL, &websocket.DialOptions{HTTPHeader: auth, Subprotocols: []string{"binary"}})
	if err == nil {
		t.Errorf("the viewer's WebSocket opened after the delete")
	} else if resp == nil || (resp.StatusCode != 401 && resp.StatusCode != 404) {
		t.Errorf("the viewer's WebSocket after the delete: %v, %+v; want 401 or 404", err, resp)
	}
	if _, err := b.Desktop.Status(ctx); !box.IsNotFound(err) {
		t.Errorf("the desktop's status after the delete: %v, want a 404", err)
	}
}

// hasAll reports whether procs has, for each name, a process whose name
// starts with it.
func hasAll(procs []hostProc, names ...string) bool {
	for _, n := range names {
		if !slices.ContainsFunc(procs, func(p hostProc) bool { return strings.HasPrefix(p.comm, n) }) {
			return false
		}
	}
	return true
}
