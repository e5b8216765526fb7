package local

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/upstash/box-go/local/internal/errdefs"
)

// DefaultMinFreeDisk is the free space boxd keeps on its data directory's
// file system when Config.MinFreeDisk is zero: below it, it makes no new
// box, snapshot or image.
const DefaultMinFreeDisk = 256 << 20

// minFreeDisk is the free space boxd keeps; 0 means none.
func (s *Server) minFreeDisk() int64 {
	switch d := s.cfg.MinFreeDisk; {
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
func (s *Server) freeDisk() (int64, error) {
	return freeBytes(s.cfg.DataDir)
}

// needDisk refuses, with 507, what would grow the data directory (what)
// when less than the kept free space is left.
func (s *Server) needDisk(what string) error {
	keep := s.minFreeDisk()
	if keep == 0 {
		return nil
	}
	free, err := s.freeDisk()
	if err != nil {
		return fmt.Errorf("free disk space: %w", err)
	}
	if free < keep {
		return errdefs.NoSpace("cannot %s: boxd's data directory has %s free, less than the %s it keeps free; delete boxes, snapshots or images (boxd -prune-images)", what, bytesText(free), bytesText(keep))
	}
	return nil
}

// diskFull reports whether err comes from a full file system (or quota).
func diskFull(err error) bool {
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
