package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// A box whose root is an image (Spec.Image) sees the image's tree
// read-only at /, with the box's own workspace, home and /tmp mounted over
// it as in every box, a tmpfs at /run, and boxd's /etc files over the
// image's. PrepareImageRoot makes, once per image, the mount points that
// this needs, since the tree is read-only by the time a box starts.

// ImageCABundle is where a box whose root is an image sees its CA bundle:
// the place Debian's, Alpine's and most images' TLS libraries read.
const ImageCABundle = "/etc/ssl/certs/ca-certificates.crt"

// libDir is where a box sees the host's dynamic loader and the libraries
// boxd's binary needs, when its root is an image and the binary is not
// static.
const libDir = "/run/boxd-lib"

// PrepareImageRoot makes an unpacked image's tree fit to be a box's root:
// the directories and files that a box mounts over (a link or anything
// else the image has there is replaced), and /var/tmp as a link to /tmp.
func PrepareImageRoot(root *os.Root) error {
	for _, d := range []string{"proc", "dev", "run", "tmp", "etc", "home", "workspace", "home/" + UserName, "etc/ssl", "etc/ssl/certs"} {
		if err := ensureDir(root, d); err != nil {
			return err
		}
	}
	names := make([]string, 0, 16)
	for name := range etcFiles(Spec{}) {
		names = append(names, "etc/"+name)
	}
	sort.Strings(names)
	for _, f := range append(names, strings.TrimPrefix(ImageCABundle, "/")) {
		if err := ensureFile(root, f); err != nil {
			return err
		}
	}
	if fi, err := root.Lstat("var"); err == nil && fi.IsDir() {
		if err := root.RemoveAll("var/tmp"); err != nil {
			return err
		}
		if err := root.Symlink("/tmp", "var/tmp"); err != nil {
			return err
		}
	}
	return nil
}

func ensureDir(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := root.Remove(name); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := root.Mkdir(name, 0o755); err != nil {
		return err
	}
	return nil
}

func ensureFile(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if err == nil && fi.Mode().IsRegular() {
		return nil
	}
	if err == nil {
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// ImagePath is PATH in a box whose image's configuration sets imagePath:
// the box user's own bin directories, then the image's.
func ImagePath(imagePath string) string {
	if imagePath == "" {
		imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return "/home/boxuser/.local/bin:/home/boxuser/bin:" + imagePath
}

// loader is how a box whose root is an image runs boxd's binary: directly
// when the binary is static, else through the host's dynamic loader and
// libraries, mounted at libDir, so that it runs whatever the image's libc
// (musl, another glibc, none).
type loader struct {
	interp string            // host path of the dynamic loader; "" for a static binary
	libs   map[string]string // soname → host path
}

var (
	loadersMu sync.Mutex
	loaders   = map[string]*loader{}
)

// loaderFor inspects bin (once per binary).
func loaderFor(bin string) (*loader, error) {
	loadersMu.Lock()
	defer loadersMu.Unlock()
	if l, ok := loaders[bin]; ok {
		return l, nil
	}
	l, err := inspect(bin)
	if err != nil {
		return nil, fmt.Errorf("sandbox: boxd's binary %s: %w", bin, err)
	}
	loaders[bin] = l
	return l, nil
}

func inspect(bin string) (*loader, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := &loader{libs: map[string]string{}}
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return nil, err
		}
		l.interp = strings.TrimRight(string(b), "\x00")
	}
	if l.interp == "" {
		return l, nil // static
	}
	interp, err := filepath.EvalSymlinks(l.interp)
	if err != nil {
		return nil, fmt.Errorf("its dynamic loader: %w", err)
	}
	dirs := []string{filepath.Dir(interp), "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
	need, err := f.ImportedLibraries()
	if err != nil {
		return nil, err
	}
	for len(need) > 0 {
		so := need[0]
		need = need[1:]
		if _, ok := l.libs[so]; ok || so == path.Base(l.interp) {
			continue
		}
		found := ""
		for _, d := range dirs {
			if p, err := filepath.EvalSymlinks(filepath.Join(d, so)); err == nil {
				found = p
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("the library %s it needs is not on the host", so)
		}
		l.libs[so] = found
		if lf, err := elf.Open(found); err == nil {
			more, _ := lf.ImportedLibraries()
			lf.Close()
			need = append(need, more...)
		}
	}
	l.interp = interp
	return l, nil
}

// args are bubblewrap's arguments that mount what the loader needs.
func (l *loader) args() []string {
	if l.interp == "" {
		return nil
	}
	a := []string{"--ro-bind", l.interp, libDir + "/ld.so"}
	names := make([]string, 0, len(l.libs))
	for so := range l.libs {
		names = append(names, so)
	}
	sort.Strings(names)
	for _, so := range names {
		a = append(a, "--ro-bind", l.libs[so], libDir+"/"+so)
	}
	return a
}

// argv is the command line that runs boxd's binary in the box.
func (l *loader) argv() []string {
	if l.interp == "" {
		return []string{agentPath}
	}
	return []string{libDir + "/ld.so", "--library-path", libDir, agentPath}
}

// AgentArgv is the command line with which a box's processes run boxd's
// binary: in the box with bubblewrap (through the host's dynamic loader
// when the box's root is an image and the binary is not static), at its
// host path without isolation.
func AgentArgv(mode Mode, hostBinary string, image bool) ([]string, error) {
	if mode != ModeBwrap {
		return []string{hostBinary}, nil
	}
	if !image {
		return []string{agentPath}, nil
	}
	l, err := loaderFor(hostBinary)
	if err != nil {
		return nil, err
	}
	return l.argv(), nil
}
