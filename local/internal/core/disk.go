package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/upstash/box-go/local/internal/errdefs"
)

// DefaultMinFreeDisk is the free space boxd keeps on its data directory's
// file system when Config.MinFreeDisk is zero: below it, it makes no new
// box, snapshot or image.
const DefaultMinFreeDisk = 256 << 20

// MinFreeDisk is the free space boxd keeps when Config.MinFreeDisk is
// keep; 0 means none.
func MinFreeDisk(keep int64) int64 {
	switch d := keep; {
	case d < 0:
		return 0
	case d == 0:
		return DefaultMinFreeDisk
	default:
		return d
	}
}

// freeDisk returns the bytes free to boxd on the data directory's file
// system.
func (c *Core) freeDisk() (int64, error) {
	return freeBytes(c.cfg.DataDir)
}

// NeedDisk refuses, with an errdefs.ErrNoSpace, what would grow the data directory (what)
// when less than the kept free space is left.
func (c *Core) NeedDisk(what string) error {
	keep := MinFreeDisk(c.cfg.MinFreeDisk)
	if keep == 0 {
		return nil
	}
	free, err := c.freeDisk()
	if err != nil {
		return fmt.Errorf("free disk space: %w", err)
	}
	if free < keep {
		return errdefs.NoSpace("cannot %s: boxd's data directory has %s free, less than the %s it keeps free; delete boxes, snapshots or images (boxd -prune-images)", what, bytesText(free), bytesText(keep))
	}
	return nil
}

// DiskFull reports whether err comes from a full file system (or quota).
func DiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// bytesText writes n in MB (or KB), for messages.
func bytesText(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MB", n/1e6)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	default:
		return fmt.Sprintf("%d KB", n/1e3)
	}
}

// boxDirs returns the names of the directories under boxes/ in the data
// directory: one per box that has files.
func (c *Core) boxDirs() []string {
	ents, err := os.ReadDir(filepath.Join(c.cfg.DataDir, "boxes"))
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "box-") {
			ids = append(ids, e.Name())
		}
	}
	return ids
}
