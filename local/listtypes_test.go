package local_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/upstash/box-go/boxtest"
)

// TestFilesListSaysWhatEachEntryIs: files/list describes a link as what
// it leads to (is_dir, size, as before, for the clients of 0.5.5), and
// says with type and target that it is a link and where it points, so
// that a client walking a tree need not follow it. A FIFO, a socket or a
// device is "other".
func TestFilesListSaysWhatEachEntryIs(t *testing.T) {
	t.Parallel()
	srv := boxtest.NewServer(t)
	c := rawFor(t, srv)
	b := newBox(t, srv, nil)
	mustExec(t, b, `mkdir -p t/dir && printf 12345 > t/file && ln -s . t/self && ln -s file t/tofile && ln -s /nowhere t/dangling && mkfifo t/fifo`)
	r := c.do("GET", "/v2/box/"+b.ID()+"/files/list?folder=t", nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("list: %s", r)
	}
	var l struct {
		Files []struct {
			Name   string  `json:"name"`
			IsDir  bool    `json:"is_dir"`
			Size   int64   `json:"size"`
			Type   string  `json:"type"`
			Target *string `json:"target"`
		} `json:"files"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Type, Target string
		IsDir              bool
		HasTarget          bool
	}
	var got []row
	for _, f := range l.Files {
		rw := row{Name: f.Name, Type: f.Type, IsDir: f.IsDir, HasTarget: f.Target != nil}
		if f.Target != nil {
			rw.Target = *f.Target
		}
		if f.Name == "tofile" && f.Size != 5 {
			t.Errorf("a link to a file lists with size %d, want the file's 5", f.Size)
		}
		got = append(got, rw)
	}
	want := []row{
		{Name: "dangling", Type: "symlink", Target: "/nowhere", HasTarget: true},
		{Name: "dir", Type: "directory", IsDir: true},
		{Name: "fifo", Type: "other"},
		{Name: "file", Type: "file"},
		{Name: "self", Type: "symlink", Target: ".", IsDir: true, HasTarget: true},
		{Name: "tofile", Type: "symlink", Target: "file", HasTarget: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
}
