package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The run journal: PutRun appends a run's record to it and returns; a
// background folder commits what the journal holds into the database in
// batches, one synced commit per batch.
//
// The journal is two files beside the database, path+".journal.0" and
// path+".journal.1". Records go to the active one. A fold makes the other
// one active, commits what was appended before (with the sequence number
// of the last of them, in the meta bucket, in the same transaction) and
// then truncates the file they were in. Every record has a sequence
// number, so replay applies them in the order they were written, whatever
// file each is in, and skips those at or below the committed number: a
// file whose truncation was lost is harmless.
//
// A frame is the payload's length (uint32), the CRC-32C of the sequence
// number and the payload (uint32), the sequence number (uint64), all
// little-endian, and the payload, a Run's JSON.

const (
	frameHeader = 16

	// journalDelay is how long the folder lets a batch gather after the
	// first record arrives.
	journalDelay = 20 * time.Millisecond
	// journalMaxRecords and journalMaxBytes bound the records waiting
	// for a fold: past either, PutRun folds before it appends.
	journalMaxRecords = 4096
	journalMaxBytes   = 16 << 20
)

var (
	bucketMeta = addBucket("meta")
	// keyJournalSeq holds the sequence number of the last journaled
	// record that a fold committed (or dropped, its box gone).
	keyJournalSeq = []byte("run_journal_seq")

	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	errClosed = errors.New("store: closed")
)

// journalLimits are the journal's tunables; tests shrink them.
type journalLimits struct {
	delay      time.Duration
	maxRecords int
	maxBytes   int
}

var defaultJournalLimits = journalLimits{delay: journalDelay, maxRecords: journalMaxRecords, maxBytes: journalMaxBytes}

// pendingRun is a journaled run record not yet committed.
type pendingRun struct {
	seq   uint64
	boxID string
	raw   []byte
}

// journal is the state of the run journal. mu guards everything but the
// channels and foldMu, which serialises folds.
type journal struct {
	limits journalLimits
	paths  [2]string
	files  [2]*os.File

	mu      sync.Mutex
	active  int      // the file records go to
	size    [2]int64 // each file's length as written by this process
	broken  [2]bool  // the file may end in a partial frame that could not be removed
	seq     uint64   // the last sequence number given
	pending map[string]pendingRun
	bytes   int // of pending payloads
	closed  bool
	frame   []byte // reused for encoding

	foldMu sync.Mutex
	// folding, when set (by tests), runs in a fold between taking the
	// batch and committing it; an error fails the commit.
	folding func() error

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Recovery is what Open found in the run journal that an earlier process
// left: the records it committed and the damage it passed over.
type Recovery struct {
	// Runs counts the run records committed from the journal.
	Runs int
	// Dropped counts records whose box had been deleted.
	Dropped int
	// Ignored says, for each journal file that ended in a torn or
	// corrupt frame, where and why the rest of it was ignored. A torn
	// tail is what a power loss (never a killed process) can leave: the
	// records in it were never committed.
	Ignored []string
}

// Recovered returns what Open replayed from the run journal.
func (s *Store) Recovered() Recovery { return s.recovery }

func journalPaths(path string) [2]string {
	return [2]string{path + ".journal.0", path + ".journal.1"}
}

// openJournal replays what the journal files at path hold into the
// database, empties them and starts the folder.
func (s *Store) openJournal(path string, limits journalLimits) error {
	j := &journal{
		limits:  limits,
		paths:   journalPaths(path),
		pending: map[string]pendingRun{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	s.j = j
	var folded uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyJournalSeq); len(v) == 8 {
			folded = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var frames []frame
	for _, p := range j.paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: read the run journal: %w", err)
		}
		fs, good, why := readFrames(data)
		if why != "" {
			s.recovery.Ignored = append(s.recovery.Ignored, fmt.Sprintf("%s: %d bytes from offset %d ignored: %s", p, len(data)-good, good, why))
		}
		frames = append(frames, fs...)
	}
	sort.Slice(frames, func(a, b int) bool { return frames[a].seq < frames[b].seq })
	upTo := folded
	for _, f := range frames {
		upTo = max(upTo, f.seq)
		if f.seq <= folded {
			continue // committed before
		}
		var id struct {
			ID    string `json:"id"`
			BoxID string `json:"box_id"`
		}
		if err := json.Unmarshal(f.raw, &id); err != nil || id.ID == "" || id.BoxID == "" {
			s.recovery.Ignored = append(s.recovery.Ignored, fmt.Sprintf("record %d: not a run record", f.seq))
			continue
		}
		// Sorted by sequence number, so a later write of a run wins.
		j.pending[runKey(id.BoxID, id.ID)] = pendingRun{seq: f.seq, boxID: id.BoxID, raw: f.raw}
	}
	if len(j.pending) > 0 || upTo > folded {
		dropped, err := s.commitRuns(j.pending, upTo)
		if err != nil {
			return fmt.Errorf("store: commit the run journal: %w", err)
		}
		s.recovery.Runs = len(j.pending) - dropped
		s.recovery.Dropped = dropped
		j.pending = map[string]pendingRun{}
	}
	j.seq = upTo
	for i, p := range j.paths {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
		if err == nil {
			// Emptied for good before anything new goes in, so that
			// no record of an earlier process can come back.
			if err = f.Truncate(0); err == nil {
				err = f.Sync()
			}
		}
		if err != nil {
			j.closeFiles()
			if f != nil {
				f.Close()
			}
			return fmt.Errorf("store: open the run journal: %w", err)
		}
		j.files[i] = f
	}
	go s.folder()
	return nil
}

// frame is a decoded journal frame.
type frame struct {
	seq uint64
	raw []byte
}

// appendFrame appends the frame of payload with sequence number seq to b.
func appendFrame(b []byte, seq uint64, payload []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, payload...)
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(b[start+8:], castagnoli))
	return b
}

// readFrames decodes data's frames up to the first that is torn or
// corrupt. It returns them, the length of data they span, and why the
// rest was not read ("" when all was).
func readFrames(data []byte) (frames []frame, good int, why string) {
	for good < len(data) {
		rest := data[good:]
		if len(rest) < frameHeader {
			return frames, good, "a partial frame header"
		}
		n := binary.LittleEndian.Uint32(rest)
		if n == 0 {
			return frames, good, "a frame of length 0"
		}
		if uint64(n) > uint64(len(rest)-frameHeader) {
			return frames, good, fmt.Sprintf("a frame of %d bytes where %d remain", n, len(rest)-frameHeader)
		}
		body := rest[8 : frameHeader+int(n)]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(rest[4:]) {
			return frames, good, "a checksum mismatch"
		}
		frames = append(frames, frame{seq: binary.LittleEndian.Uint64(body), raw: body[8:]})
		good += frameHeader + int(n)
	}
	return frames, good, ""
}

func runKey(boxID, runID string) string { return boxID + "\x00" + runID }

// journalRun appends a run record to the journal and notes it as
// pending. It returns once the record is in the kernel's hands (one
// write(2), no fsync): a killed process loses nothing it acknowledged.
func (s *Store) journalRun(boxID, runID string, raw []byte) error {
	j := s.j
	j.mu.Lock()
	for !j.closed && (len(j.pending) >= j.limits.maxRecords || j.bytes >= j.limits.maxBytes) {
		// Backpressure: the folder is behind (or failing); commit
		// what waits before adding to it.
		j.mu.Unlock()
		if err := s.fold(); err != nil {
			return err
		}
		j.mu.Lock()
	}
	if j.closed {
		j.mu.Unlock()
		return errClosed
	}
	j.seq++
	p := pendingRun{seq: j.seq, boxID: boxID, raw: raw}
	direct := j.broken[j.active]
	if !direct {
		j.frame = appendFrame(j.frame[:0], p.seq, raw)
		f := j.files[j.active]
		_, err := f.Write(j.frame)
		if cap(j.frame) > 1<<16 {
			j.frame = nil // a large record's buffer is not kept
		}
		if err != nil {
			// Take back whatever part of the frame was written, so
			// that later frames stay readable; where that fails too,
			// nothing more goes to this file until a fold empties it.
			if f.Truncate(j.size[j.active]) != nil {
				j.broken[j.active] = true
			}
			direct = true
		} else {
			j.size[j.active] += int64(frameHeader + len(raw))
		}
	}
	k := runKey(boxID, runID)
	if old, ok := j.pending[k]; ok {
		j.bytes -= len(old.raw)
	}
	j.pending[k] = p
	j.bytes += len(raw)
	j.mu.Unlock()
	if direct {
		// Not in the journal: acknowledged only once committed.
		return s.fold()
	}
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// folder commits the journal in the background: a while after a record
// arrives, everything that arrived meanwhile goes in one commit.
func (s *Store) folder() {
	j := s.j
	defer close(j.done)
	wait := j.limits.delay
	for {
		select {
		case <-j.stop:
			return
		case <-j.kick:
		}
		t := time.NewTimer(wait)
		select {
		case <-j.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if s.fold() != nil {
			// The records stay pending (and journaled); try again,
			// less often while it fails.
			wait = min(2*wait+time.Millisecond, time.Second)
			select {
			case j.kick <- struct{}{}:
			default:
			}
			continue
		}
		wait = j.limits.delay
	}
}

// fold commits every pending record in one synced transaction and then
// empties the journal file they were appended to. When it returns nil,
// every record PutRun acknowledged before the call is in the database.
func (s *Store) fold() error {
	j := s.j
	j.foldMu.Lock()
	defer j.foldMu.Unlock()
	j.mu.Lock()
	if len(j.pending) == 0 {
		j.mu.Unlock()
		return nil
	}
	batch, upTo := j.pending, j.seq
	j.pending, j.bytes = map[string]pendingRun{}, 0
	old := j.active
	j.active = 1 - old
	j.mu.Unlock()

	err := error(nil)
	if j.folding != nil {
		err = j.folding()
	}
	if err == nil {
		_, err = s.commitRuns(batch, upTo)
	}
	if err != nil {
		// Back to pending, where a record written since wins.
		j.mu.Lock()
		for k, p := range batch {
			if cur, ok := j.pending[k]; ok {
				if cur.seq > p.seq {
					continue
				}
				j.bytes -= len(cur.raw)
			}
			j.pending[k] = p
			j.bytes += len(p.raw)
		}
		j.mu.Unlock()
		return err
	}
	// Only a fold (this one, under foldMu) makes old active again, so
	// nothing is appended to it meanwhile. If it cannot be emptied, its
	// records are at or below the committed sequence number, and replay
	// skips them.
	err = j.files[old].Truncate(0)
	j.mu.Lock()
	if err == nil {
		j.size[old], j.broken[old] = 0, false
	}
	j.mu.Unlock()
	return nil
}

// commitRuns writes batch into the database in one transaction, with upTo
// as the last sequence number folded, skipping the records of boxes that
// are gone. It returns how many it skipped.
func (s *Store) commitRuns(batch map[string]pendingRun, upTo uint64) (dropped int, err error) {
	keys := make([]string, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	sort.Strings(keys) // bbolt inserts in key order best
	err = s.db.Update(func(tx *bolt.Tx) error {
		dropped = 0
		boxes, runs := tx.Bucket(bucketBoxes), tx.Bucket(bucketRuns)
		for _, k := range keys {
			p := batch[k]
			if boxes.Get([]byte(p.boxID)) == nil {
				dropped++ // the box was deleted: its runs went with it
				continue
			}
			if err := runs.Put([]byte(k), p.raw); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyJournalSeq, binary.BigEndian.AppendUint64(nil, upTo))
	})
	return dropped, err
}

// dropPending forgets the pending records of a box.
func (s *Store) dropPending(boxID string) {
	j := s.j
	j.mu.Lock()
	defer j.mu.Unlock()
	for k, p := range j.pending {
		if p.boxID == boxID {
			delete(j.pending, k)
			j.bytes -= len(p.raw)
		}
	}
}

// closeJournal stops the folder, commits what is pending and closes the
// journal files.
func (s *Store) closeJournal() error {
	j := s.j
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	close(j.stop)
	<-j.done
	err := s.fold()
	return errors.Join(err, j.closeFiles())
}

func (j *journal) closeFiles() error {
	var errs []error
	for i, f := range j.files {
		if f != nil {
			errs = append(errs, f.Close())
			j.files[i] = nil
		}
	}
	return errors.Join(errs...)
}
