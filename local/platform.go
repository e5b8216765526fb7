package local

import (
	"errors"
	"fmt"
	goruntime "runtime" // the package has a type runtime
)

// ErrUnsupportedOS is returned, wrapped with what to do instead, by New and
// CheckIsolation on any system but Linux. A box is a Linux sandbox
// (bubblewrap, namespaces, seccomp, control groups), so boxd runs only
// there; the SDK and the box CLI work everywhere, against a boxd on a
// Linux machine or VM, or against the Upstash Box cloud.
var ErrUnsupportedOS = errors.New("boxd: boxes run only on Linux")

// checkOS returns nil on Linux (goos is a GOOS value), and elsewhere an
// error that wraps ErrUnsupportedOS and says how to reach boxes from there.
func checkOS(goos string) error {
	if goos == "linux" {
		return nil
	}
	name := map[string]string{"darwin": "macOS", "windows": "Windows"}[goos]
	if name == "" {
		name = goos
	}
	return fmt.Errorf("%w; on %s, set UPSTASH_BOX_BASE_URL and UPSTASH_BOX_API_KEY for a boxd on a Linux machine or VM, or UPSTASH_BOX_API_KEY alone for the Upstash Box cloud", ErrUnsupportedOS, name)
}

// osSupported is checkOS for the system boxd runs on.
func osSupported() error { return checkOS(goruntime.GOOS) }
