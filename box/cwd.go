package box

import (
	"path"
	"strings"
	"sync"
)

// WorkspaceHome is the initial working directory of every box, and the
// directory relative paths are resolved against on the server.
const WorkspaceHome = "/workspace/home"

// cwd is the working directory a Box tracks on the client. Nothing changes
// inside the box when it moves; every call sends it as `folder`. It is safe
// for concurrent use.
type cwd struct {
	mu  sync.RWMutex
	dir string
}

func newCwd() *cwd { return &cwd{dir: WorkspaceHome} }

func (c *cwd) get() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dir
}

func (c *cwd) set(dir string) {
	c.mu.Lock()
	c.dir = dir
	c.mu.Unlock()
}

// join resolves p against dir: an absolute p is normalised, a relative one
// is joined and normalised; ".." never climbs above "/".
func join(dir, p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

// folder is the `folder` value sent with exec, code, agent runs, files
// list and git calls for working directory dir: empty at /workspace/home,
// the remainder below it, or the absolute directory elsewhere.
func folder(dir string) string {
	if dir == WorkspaceHome {
		return ""
	}
	if rest, ok := strings.CutPrefix(dir, WorkspaceHome+"/"); ok {
		return rest
	}
	return dir
}
