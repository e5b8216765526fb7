package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// TestDeleteWinsOverWakers deletes paused boxes while other calls wake
// them: an exec, a resume, a file read, and an anonymous request to the
// box's public URL, which needs no API key. Each delete must win over
// them all: when it has answered 200, nothing of the box runs, its files
// are gone, and the API answers 404 for it from then on, however the
// wakers raced it. A box created afterwards gets a host uid that no
// process left alive has.
func TestDeleteWinsOverWakers(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	// Host uids are the boxes' own only when boxd runs as root with
	// bubblewrap; otherwise every box is boxd's user.
	ownUIDs := isolation(t) == local.IsolationBwrap && os.Geteuid() == 0
	apiPort := port(t, srv.URL())
	anonymous := newHostClient(t, srv.URL())
	const boxes = 8

	ids := make([]string, boxes)
	uids := make([]uint32, boxes)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.send(t.Context(), "POST", "/v2/box", map[string]any{}, nil)
			if err != nil || r.status != http.StatusOK {
				t.Errorf("create: %v %s", err, r)
				return
			}
			var b struct{ ID string }
			if err := json.Unmarshal(r.body, &b); err != nil {
				t.Errorf("create: %v in %s", err, r.body)
				return
			}
			ids[i] = b.ID
			base := "/v2/box/" + b.ID
			for _, step := range []struct {
				method, path string
				body         any
			}{
				{"POST", base + "/files/write", map[string]string{"path": "/workspace/home/kept.txt", "content": "kept"}},
				{"POST", base + "/preview", map[string]int{"port": 3000}},
				{"POST", base + "/pause", nil},
			} {
				if r, err := c.send(t.Context(), step.method, step.path, step.body, nil); err != nil || r.status != http.StatusOK {
					t.Errorf("%s %s: %v %s", step.method, step.path, err, r)
					return
				}
			}
			uids[i] = ownerOf(t, filepath.Join(srv.DataDir(), "boxes", b.ID, "fs"))
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	var tally tally
	// Each box is deleted while four wakers call it over and over. A
	// waker's call that starts after the delete answered must find no
	// box; those before may find it or not, but must never revive it.
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := "/v2/box/" + id
			preview := fmt.Sprintf("%s-3000.localhost:%s", id, apiPort)
			wakers := map[string]func(ctx context.Context) (response, error){
				"exec": func(ctx context.Context) (response, error) {
					return c.send(ctx, "POST", base+"/exec", execBody("cat kept.txt"), nil)
				},
				"resume": func(ctx context.Context) (response, error) {
					return c.send(ctx, "POST", base+"/resume", nil, nil)
				},
				"file read": func(ctx context.Context) (response, error) {
					return c.send(ctx, "GET", base+"/files/read?path=/workspace/home/kept.txt", nil, nil)
				},
				"public URL": func(ctx context.Context) (response, error) { return anonymous.get(ctx, preview) },
			}
			var deleted atomic.Bool // the delete has answered
			stop := make(chan struct{})
			var ww sync.WaitGroup
			for what, call := range wakers {
				ww.Add(1)
				go func() {
					defer ww.Done()
					for {
						after := deleted.Load()
						ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
						r, err := call(ctx)
						cancel()
						tally.add(what, r, err)
						switch {
						case errors.Is(err, context.DeadlineExceeded):
							t.Errorf("box %d, %s: no answer in a minute", i, what)
							return
						case err != nil && after:
							t.Errorf("box %d, %s after the delete answered: %v", i, what, err)
						case err != nil:
							// A call the delete cut short.
						case after && r.status != http.StatusNotFound:
							t.Errorf("box %d, %s after the delete answered: %s, want 404", i, what, r)
						}
						select {
						case <-stop:
							return
						default:
						}
					}
				}()
			}
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			r, err := c.send(t.Context(), "DELETE", base, nil, nil)
			if err != nil || r.status != http.StatusOK {
				t.Errorf("box %d: delete: %v %s", i, err, r)
			}
			deleted.Store(true)
			// Wakers go on for a while after the delete: a box that
			// came back would answer them.
			time.Sleep(300 * time.Millisecond)
			close(stop)
			ww.Wait()
		}()
	}
	wg.Wait()
	t.Logf("wakers' answers: %s", tally.String())

	// Nothing of a deleted box runs: no process in its sandbox or control
	// group, and none of its host uid that another box does not account
	// for. A sandbox is killed before its delete answers; the grace below
	// is for the kernel to reap what was killed.
	mine := map[string]bool{}
	for _, id := range ids {
		mine[id] = true
	}
	for i, id := range ids {
		var left []string
		if !waitFor(5*time.Second, func() bool {
			left = nil
			for _, p := range liveProcs() {
				if p.box == id || (ownUIDs && p.uid == uids[i] && (p.box == "" || mine[p.box])) {
					left = append(left, p.String())
				}
			}
			return len(left) == 0
		}) {
			t.Errorf("box %d (%s, host uid %d) left processes after its delete: %s", i, id, uids[i], strings.Join(left, "; "))
		}
		if _, err := os.Stat(filepath.Join(srv.DataDir(), "boxes", id)); !os.IsNotExist(err) {
			t.Errorf("box %d (%s): its directory after the delete: %v", i, id, err)
		}
	}

	// The API forgets them, and they stay forgotten.
	for range 5 {
		for i, id := range ids {
			if r := c.do("GET", "/v2/box/"+id, nil, nil); r.status != http.StatusNotFound {
				t.Errorf("box %d (%s): GET after the delete = %s, want 404", i, id, r)
			}
		}
		r := c.do("GET", "/v2/box", nil, nil)
		for _, id := range ids {
			if strings.Contains(string(r.body), id) {
				t.Errorf("box %s is listed after its delete", id)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A new box's host uid is its alone.
	nb := newBox(t, srv, nil)
	mustExec(t, nb, "true")
	uid := ownerOf(t, filepath.Join(srv.DataDir(), "boxes", nb.ID(), "fs"))
	if ownUIDs {
		for _, p := range liveProcs() {
			if p.uid == uid && (p.box == "" || mine[p.box]) {
				t.Errorf("new box %s has host uid %d, which a process it does not own has: %s", nb.ID(), uid, p)
			}
		}
	}
}

// tally counts the answers of each kind of call by status.
type tally struct {
	mu      sync.Mutex
	n       map[string]map[string]int
	example map[string]string // an answer of each kind that is neither 200 nor 404
}

func (t *tally) add(what string, r response, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]map[string]int{}
	}
	if t.n[what] == nil {
		t.n[what] = map[string]int{}
	}
	k := strconv.Itoa(r.status)
	if err != nil {
		k = "error"
	}
	t.n[what][k]++
	if k != "200" && k != "404" {
		if t.example == nil {
			t.example = map[string]string{}
		}
		if err != nil {
			t.example[what+" "+k] = err.Error()
		} else {
			t.example[what+" "+k] = strings.TrimSpace(string(r.body))
		}
	}
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for _, what := range slices.Sorted(maps.Keys(t.n)) {
		var ks []string
		for _, k := range slices.Sorted(maps.Keys(t.n[what])) {
			ks = append(ks, fmt.Sprintf("%s×%d", k, t.n[what][k]))
		}
		parts = append(parts, what+" "+strings.Join(ks, " "))
	}
	for _, k := range slices.Sorted(maps.Keys(t.example)) {
		parts = append(parts, fmt.Sprintf("%s: %.200s", k, t.example[k]))
	}
	return strings.Join(parts, "; ")
}

// hostClient sends requests to boxd with a Host of their own and no API
// key, as a browser opening a public URL does.
type hostClient struct {
	base string
	hc   *http.Client
}

func newHostClient(t *testing.T, base string) *hostClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &hostClient{base: base, hc: &http.Client{Transport: tr}}
}

func (c *hostClient) get(ctx context.Context, host string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/", nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// ownerOf returns the host uid that owns path.
func ownerOf(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := fileOwner(fi)
	return uid
}

// liveProc is a process seen in /proc: its pid, its real uid, and the
// box it belongs to, named by its control group (boxd makes one per box,
// .../boxd/<box id>) or by the BOX_ID its sandbox's bwrap sets; "" when
// neither names one.
type liveProc struct {
	pid  int
	ppid int
	uid  uint32
	box  string
	comm string
}

func (p liveProc) String() string {
	return fmt.Sprintf("pid %d (%s) uid %d box %q", p.pid, p.comm, p.uid, p.box)
}

// liveProcs lists the processes alive now.
func liveProcs() []liveProc {
	ents, _ := os.ReadDir("/proc")
	var out []liveProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		status, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue
		}
		p := liveProc{pid: pid}
		for line := range strings.SplitSeq(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			switch k {
			case "Name":
				p.comm = strings.TrimSpace(v)
			case "PPid":
				p.ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			case "Uid":
				if f := strings.Fields(v); len(f) > 0 {
					u, _ := strconv.ParseUint(f[0], 10, 32)
					p.uid = uint32(u)
				}
			case "State":
				if strings.HasPrefix(strings.TrimSpace(v), "Z") {
					p.comm += " (zombie)"
				}
			}
		}
		if cg, err := os.ReadFile(filepath.Join(dir, "cgroup")); err == nil {
			for line := range strings.SplitSeq(string(cg), "\n") {
				if _, rest, ok := strings.Cut(line, "/boxd/"); ok {
					p.box, _, _ = strings.Cut(rest, "/")
					break
				}
			}
		}
		if p.box == "" {
			if cmd, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
				if _, rest, ok := strings.Cut(string(cmd), "BOX_ID\x00"); ok {
					p.box, _, _ = strings.Cut(rest, "\x00")
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// TestServersNeverShareAUID: two boxd of one machine (here two servers in
// one process) each keep their own record of the host uids they gave.
// While a box of one had no process (its sandbox gone, to start again at
// its next call), the other gave its uid to a box of its own, and once
// both ran, a box ran as another. A box's uid is now its alone on the
// machine for as long as the box exists.
func TestServersNeverShareAUID(t *testing.T) {
	if isolation(t) != local.IsolationBwrap || os.Geteuid() != 0 {
		t.Skip("boxes have host uids of their own only as root with bubblewrap")
	}
	first := boxtest.NewServer(t)
	a := newBox(t, first, nil)
	mustExec(t, a, "true")
	uid := ownerOf(t, filepath.Join(first.DataDir(), "boxes", a.ID(), "fs"))
	// Its sandbox dies (as a crash or a kill would end it): nothing runs
	// as its uid until its next call.
	for _, p := range liveProcs() {
		if p.uid == uid || p.box == a.ID() {
			if proc, err := os.FindProcess(p.pid); err == nil {
				_ = proc.Kill()
			}
		}
	}
	if !waitFor(10*time.Second, func() bool {
		for _, p := range liveProcs() {
			if p.uid == uid {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("processes of uid %d outlive SIGKILL", uid)
	}
	second := boxtest.NewServer(t)
	b := newBox(t, second, nil)
	if got := ownerOf(t, filepath.Join(second.DataDir(), "boxes", b.ID(), "fs")); got == uid {
		t.Errorf("a box of another boxd has host uid %d, the uid of box %s, whose sandbox is down", got, a.ID())
	}
	// The first box runs again, as its own uid.
	mustExec(t, a, "true")
}
