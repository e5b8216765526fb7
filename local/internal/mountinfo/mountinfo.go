// Package mountinfo reads a process's mount table from
// /proc/<pid>/mountinfo.
package mountinfo

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Mount is one line of a mount table.
type Mount struct {
	// Root is the directory of the file system mounted here (not "/"
	// for a bind mount of a subdirectory).
	Root string
	// Point is where it is mounted.
	Point string
	// FSType is the file system type ("tmpfs", "cgroup", "cgroup2").
	FSType string
	// SuperOptions are the options of the file system (for cgroup v1,
	// its controllers among them).
	SuperOptions []string
}

// Self returns the mount table of the calling process.
func Self() ([]Mount, error) { return Read("/proc/self/mountinfo") }

// Read parses the mount table in the file at path.
func Read(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, sf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(sf) < 3 {
			continue
		}
		out = append(out, Mount{Root: unescape(pf[3]), Point: unescape(pf[4]), FSType: sf[0], SuperOptions: strings.Split(sf[2], ",")})
	}
	return out, sc.Err()
}

// unescape undoes the table's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
