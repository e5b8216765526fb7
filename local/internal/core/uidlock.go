package core

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// uidLocksDir is where every boxd of this machine keeps a lock on each
// host uid its boxes have: the uids are the machine's, and two boxd
// instances (two services, or two boxtest servers in one test binary)
// each keep their own record of which they gave.
const uidLocksDir = "/run/boxd-uids"

// uidLocks are the locks this boxd holds on its boxes' host uids. A uid
// whose lock another boxd holds is not given to a box here, even while
// nothing runs as it there (a box that is not started), so that no two
// boxes of the machine ever share a uid.
type uidLocks struct {
	mu   sync.Mutex
	held map[uint32]*os.File
}

// lock takes the lock on uid, and reports whether this boxd holds it now.
// A machine where the locks cannot be kept (no /run) holds every uid: the
// record of this boxd and the live processes stay the guard.
func (l *uidLocks) lock(uid uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[uid] != nil {
		return true
	}
	if err := os.MkdirAll(uidLocksDir, 0o700); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(uidLocksDir, strconv.FormatUint(uint64(uid), 10)), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return true
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		f.Close()
		return err != nil
	}
	if l.held == nil {
		l.held = map[uint32]*os.File{}
	}
	l.held[uid] = f
	return true
}

// unlock lets go of uid, for any boxd of the machine to give.
func (l *uidLocks) unlock(uid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.held[uid]; f != nil {
		f.Close()
		delete(l.held, uid)
	}
}

// closeAll lets go of every uid (boxd shutting down: its boxes' processes
// are gone).
func (l *uidLocks) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, f := range l.held {
		f.Close()
		delete(l.held, uid)
	}
}
