// Package backend picks where the examples run, from the environment as
// the SDK reads it:
//
//   - UPSTASH_BOX_BASE_URL and UPSTASH_BOX_API_KEY: the server at that URL,
//     a boxd (on a Linux machine or VM, say) unless the URL is the Upstash
//     Box cloud's (a host under upstash.com);
//   - UPSTASH_BOX_API_KEY alone: the Upstash Box cloud;
//   - neither: boxd, the local backend, started inside the example's own
//     process. That needs Linux; elsewhere Connect fails with ErrNoBackend
//     and says what to set.
package backend

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"

	"github.com/upstash/box-go/box"
	"github.com/upstash/box-go/boxtest"
	"github.com/upstash/box-go/local"
)

// The environment variables that choose the backend, as the SDK reads
// them.
const (
	envAPIKey  = "UPSTASH_BOX_API_KEY"
	envBaseURL = "UPSTASH_BOX_BASE_URL"
)

// Kind says where an example's boxes run.
type Kind int

const (
	// Embedded is a boxd started in the example's process.
	Embedded Kind = iota
	// Boxd is a boxd elsewhere, at UPSTASH_BOX_BASE_URL.
	Boxd
	// Cloud is the Upstash Box cloud.
	Cloud
)

func (k Kind) String() string {
	switch k {
	case Embedded:
		return "embedded boxd"
	case Boxd:
		return "boxd"
	case Cloud:
		return "Upstash Box"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrNoBackend is returned by Connect when nothing is set and no boxd can
// run in the example's process (off Linux).
var ErrNoBackend = errors.New("no backend")

// Backend is where an example runs: a client, and what it is a client of.
type Backend struct {
	Client *box.Client
	Kind   Kind
	stop   func()
}

// Close stops the embedded boxd, if Connect started one, and removes its
// data. It does nothing for a remote server.
func (b *Backend) Close() {
	if b.stop != nil {
		b.stop()
	}
}

// Connect chooses the backend, connects to it (starting an embedded boxd
// if that is the one) and prints which it uses on standard output.
func Connect(ctx context.Context) (*Backend, error) {
	kind, err := choose(os.Getenv, local.CheckIsolation)
	if err != nil {
		return nil, err
	}
	if kind == Embedded {
		return embedded()
	}
	c, err := box.NewClient()
	if err != nil {
		return nil, err
	}
	fmt.Printf("backend: %s at %s\n", kind, c.BaseURL())
	return &Backend{Client: c, Kind: kind}, nil
}

// choose picks the backend from the environment (getenv) and, when
// nothing is set there, from whether boxd can run here (checkEmbedded,
// local.CheckIsolation). Only a boxd that cannot run at all (off Linux)
// leaves no backend: without bubblewrap the embedded boxd runs without
// isolation, and says so.
func choose(getenv func(string) string, checkEmbedded func() error) (Kind, error) {
	key, base := getenv(envAPIKey), getenv(envBaseURL)
	switch {
	case base != "" && key == "":
		return 0, fmt.Errorf("%s is set but %s is not: set it to the key of the server at %s", envBaseURL, envAPIKey, envBaseURL)
	case base != "" && !isCloud(base):
		return Boxd, nil
	case key != "":
		return Cloud, nil
	}
	if err := checkEmbedded(); errors.Is(err, local.ErrUnsupportedOS) {
		return 0, fmt.Errorf("%w: boxd runs boxes only on Linux, so the examples cannot start one on %s; set %s and %s for a boxd on a Linux machine or VM, or %s alone for the Upstash Box cloud",
			ErrNoBackend, runtime.GOOS, envBaseURL, envAPIKey, envAPIKey)
	}
	return Embedded, nil
}

// isCloud reports whether the base URL base is the Upstash Box cloud's.
func isCloud(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "upstash.com" || strings.HasSuffix(h, ".upstash.com")
}

// embedded starts boxd in this process on a loopback port.
func embedded() (*Backend, error) {
	srv, err := boxtest.Start()
	if err != nil {
		return nil, err
	}
	if why := srv.IsolationFallback(); why != nil {
		fmt.Printf("backend: %v; running boxes WITHOUT isolation\n", why)
	}
	fmt.Printf("backend: embedded boxd at %s (isolation %s); set %s (and %s for a boxd elsewhere) to use another\n", srv.URL(), srv.Isolation(), envAPIKey, envBaseURL)
	return &Backend{Client: srv.Client(), Kind: Embedded, stop: func() { _ = srv.Close() }}, nil
}
