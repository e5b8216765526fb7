package agent

import (
	"net/http"
	"path"
	"path/filepath"
	"strings"

	"github.com/upstash/box-go/local/internal/sandbox"
)

// boxFS maps paths as the box sees them onto the paths the agent opens. Inside
// a bubblewrap sandbox the two are the same. Without isolation the box's
// directories live under its host directory, and only /workspace,
// /home/boxuser and /tmp are mapped there.
type boxFS struct {
	hostRoot string // empty inside a sandbox
}

// real turns an absolute, cleaned box path into a path to open.
func (f boxFS) real(p string) string {
	if f.hostRoot == "" {
		return p
	}
	l := sandbox.Tree{Dir: f.hostRoot}
	for _, m := range []struct{ box, host string }{
		{sandbox.Workspace, l.Workspace()},
		{sandbox.UserHome, l.UserHome()},
		{"/tmp", l.Tmp()},
	} {
		if p == m.box {
			return m.host
		}
		if strings.HasPrefix(p, m.box+"/") {
			return filepath.Join(m.host, p[len(m.box):])
		}
	}
	return p
}

// boxPath cleans an absolute path from a request. A relative path is taken
// relative to /workspace/home.
func boxPath(p string) (string, error) {
	if p == "" {
		return "", errorf(http.StatusBadRequest, "path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errorf(http.StatusBadRequest, "path contains a NUL byte")
	}
	if !strings.HasPrefix(p, "/") {
		p = sandbox.Home + "/" + p
	}
	return path.Clean(p), nil
}

// folderPath resolves the `folder` field of exec, code and files list: empty
// means /workspace/home, a relative value is relative to it, an absolute
// value is used as is.
func folderPath(folder string) (string, error) {
	if folder == "" {
		return sandbox.Home, nil
	}
	return boxPath(folder)
}
