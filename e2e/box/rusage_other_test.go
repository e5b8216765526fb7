//go:build !linux

package box_test

import "time"

// cpuTime and peakRSS are measured on Linux, where the benchmarks that
// report them run (they need boxd); elsewhere they are 0, unknown.
func cpuTime() time.Duration { return 0 }
func peakRSS() int64         { return 0 }
